"""A Tensor a move makes (or one made on a CPU, Generic or FileBacked
carrier) stays off the cyclic garbage collector's lists while it cannot be
part of a reference cycle, so collections do not traverse every moved
result; it joins them as soon as it could be (an autograd context or a
gradient set). Cycles through such Tensors are still collected."""

import gc
import weakref

import numpy as np

import strideweave as sw
from strideweave import CPU, FileBacked, Layout, Shape, Stride, Tensor


def cpu_tensor(n, fill=1.5):
    t = Tensor(CPU(n, empty=True), 0, Layout(Shape(n), Stride(1)))
    a = np.from_dlpack(t)
    a[:] = fill
    del a
    return t


def test_moved_results_on_builtin_carriers_are_not_gc_tracked():
    with sw.no_grad():
        on_cpu = sw.move(cpu_tensor(16), CPU(16, empty=True))
        on_file = sw.move(cpu_tensor(16), FileBacked())
        back = sw.move_async(on_file, CPU(16, empty=True)).wait()
    for t in (on_cpu, on_file, back):
        assert not gc.is_tracked(t)
    assert back.carrier[15] == 1.5
    assert not gc.is_tracked(cpu_tensor(4))


def test_a_tensor_joins_the_gc_when_it_gets_a_gradient_or_an_autograd_context():
    t = cpu_tensor(4)
    g = cpu_tensor(4, 0.0)
    assert not gc.is_tracked(t)
    t.grad = g
    assert gc.is_tracked(t)
    u = cpu_tensor(4)
    u.autograd_ctx = sw.Operation()
    assert gc.is_tracked(u)


def test_cycles_through_a_moved_result_are_collected():
    class Keeper(sw.Operation):
        pass

    with sw.no_grad():
        r = sw.move(cpu_tensor(8), CPU(8, empty=True))
    op = Keeper()
    op.keep = r  # r -> op -> r
    r.autograd_ctx = op
    h = sw.move_async(cpu_tensor(8), CPU(8, empty=True))
    r2 = h.wait()
    r2.grad = cpu_tensor(8, 0.0)
    r2.grad.autograd_ctx = Keeper()
    r2.grad.autograd_ctx.handle = h  # h -> r2 -> grad -> op -> h
    refs = [weakref.ref(r), weakref.ref(op), weakref.ref(h), weakref.ref(r2)]
    del r, op, h, r2
    gc.collect()
    assert [ref() for ref in refs] == [None] * 4
