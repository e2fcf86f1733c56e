"""Move participates in autograd across the carrier boundary (seed; contract
O-11, A-19): the reverse route is captured before submission, a successful
move attaches exactly one node saving the source, and the node's backward
moves the cotangent back into fresh storage of the source carrier's class."""

import pytest

import strideweave as sw
from strideweave import DType as D
from strideweave.carriers.move import registered_move_operation


def L(shape, stride):
    return sw.Layout(sw.Shape(*shape) if isinstance(shape, tuple) else sw.Shape(shape),
                     sw.Stride(*stride) if isinstance(stride, tuple) else sw.Stride(stride))


def cpu_tensor(values, layout, offset=0, dtype=D.Float32):
    c = sw.CPU(offset + layout.cosize, dtype=dtype)
    t = sw.Tensor(c, offset, layout)
    for k, v in enumerate(values):
        t[k] = v
    return t


class Mine(sw.Carrier):
    """A Python carrier that can grow (allocatable-empty)."""

    def __init__(self, n=0):
        self.v = [0.0] * n

    def size(self): return len(self.v)
    def dtype(self): return D.Float32
    def get_value(self, i): return self.v[i]
    def set_value(self, i, x): self.v[i] = float(x)
    def _is_mutable(self): return True
    def _allocate(self, n): self.v = [0.0] * n
    def new_like(self, values, *, mutable=True, dtype=None):
        m = Mine()
        m.v = [0.0 if x is None else float(x) for x in values]
        return m
    def allocate_like(self, size, *, mutable=True, dtype=None, empty=False):
        return Mine(size)


def test_differentiable_move_attaches_exactly_one_node_saving_the_source():
    t = cpu_tensor(range(6), L(6, 1))
    r = sw.move(t, sw.FileBacked())
    node = r.autograd_ctx
    assert type(node) is sw.CpuToFileBackedMoveOperation
    assert isinstance(node, sw.Operation)
    assert node.inputs() == (t,) and node.inputs()[0] is t
    assert node.input_versions() == (t._version_token(),)
    assert t.autograd_ctx is None  # the source stays a leaf


def test_no_node_without_graph_construction():
    t = cpu_tensor(range(4), L(4, 1))
    with sw.no_grad():
        r = sw.move(t, sw.FileBacked())
    assert r.autograd_ctx is None
    i = cpu_tensor(range(4), L(4, 1), dtype=D.Int32)
    assert sw.move(i, sw.FileBacked(dtype=D.Int32)).autograd_ctx is None


def test_reject_a_differentiable_one_way_route_early():
    class Forward(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            sw.ElementwiseMoveOperation()._copy(tensor, destination, output, element_count)

    class Back(sw.MoveOperation):  # registered for the reverse pair, pinned elsewhere
        source_class = sw.Generic

        def _copy(self, tensor, destination, output, element_count):
            raise AssertionError("never runs")

    t = cpu_tensor(range(3), L(3, 1))
    d = Mine()
    with registered_move_operation(sw.CPU, Mine, Forward), \
            registered_move_operation(Mine, sw.CPU, Back):
        with pytest.raises(NotImplementedError, match="Mine to CPU"):
            sw.move_async(t, d)
        # nothing happened: no handle, no growth, source live
        assert d.size() == 0 and not t.carrier.is_released()
        assert t.carrier.version == 3
        with sw.no_grad():  # without a gradient path the move is fine
            r = sw.move(t, d)
        assert r.tolist() == [0.0, 1.0, 2.0] and r.autograd_ctx is None


def test_backward_returns_fresh_source_class_gradient_in_source_layout():
    layout = L((2, [3, 2]), (1, [2, 7]))  # hierarchical and gapped
    t = cpu_tensor([float(k) for k in range(12)], layout, offset=3)
    r = sw.move(t, sw.FileBacked())
    g = cpu_tensor([0.5 * k for k in range(12)], sw.Layout.canonical(layout.shape))
    (grad,) = r.autograd_ctx.backward(g)
    assert type(grad.carrier) is sw.CPU
    assert grad.carrier is not t.carrier and grad.carrier is not g.carrier
    assert grad.layout == layout and grad.offset == 0 and grad.autograd_ctx is None
    assert grad.tolist() == [0.5 * k for k in range(12)]
    assert not g.carrier.is_released()  # the caller's cotangent is never moved


def test_broadcast_source_gets_a_canonical_injective_gradient():
    base = cpu_tensor([5.0, 7.0], L(2, 1))
    b = sw.broadcast_to(sw.Tensor(base.carrier, 0, L((1, 2), (1, 1))), sw.Shape(3, 2))
    with sw.no_grad():  # keep the graph to the move alone
        b = sw.Tensor(b.carrier, b.offset, b.layout)
    r = sw.move(b, sw.FileBacked())
    assert r.carrier.size() == 2 and r.layout == b.layout
    g = cpu_tensor([float(k) for k in range(6)], sw.Layout.canonical(b.layout.shape))
    (grad,) = r.autograd_ctx.backward(g)
    assert grad.layout == sw.Layout.canonical(b.layout.shape)
    assert grad.tolist() == [float(k) for k in range(6)] and type(grad.carrier) is sw.CPU


def test_backward_between_python_carriers_and_back():
    t = cpu_tensor([1.0, 2.0, 3.0], L(3, 1))
    r = sw.move(t, Mine())
    assert type(r.autograd_ctx) is sw.ElementwiseMoveOperation
    (grad,) = r.autograd_ctx.backward(cpu_tensor([4.0, 5.0, 6.0], L(3, 1)))
    assert type(grad.carrier) is sw.CPU and grad.tolist() == [4.0, 5.0, 6.0]


@pytest.mark.parametrize("bad, exc, match", [
    (lambda: [1.0, 2.0], TypeError, "Tensor"),
    (lambda: cpu_tensor([1.0, 2.0], L(2, 1)), ValueError, "shape"),
    (lambda: sw.Tensor(sw.CPU(1), 0, L(3, 0)), ValueError, "injective gradient Layout is required"),
])
def test_backward_checks_the_cotangent(bad, exc, match):
    r = sw.move(cpu_tensor([1.0, 2.0, 3.0], L(3, 1)), sw.FileBacked())
    with pytest.raises(exc, match=match):
        r.autograd_ctx.backward(bad())


def test_backward_rejects_a_released_cotangent():
    r = sw.move(cpu_tensor([1.0, 2.0, 3.0], L(3, 1)), sw.FileBacked())
    g = cpu_tensor([1.0, 1.0, 1.0], L(3, 1))
    g.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        r.autograd_ctx.backward(g)


def test_cotangent_layout_may_differ_from_the_source_layout():
    t = cpu_tensor([1.0, 2.0, 3.0, 4.0], L((2, 2), (1, 2)))
    r = sw.move(t, sw.FileBacked())
    g = cpu_tensor([9.0, 8.0, 7.0, 6.0], L((2, 2), (2, 1)))  # transposed storage
    (grad,) = r.autograd_ctx.backward(g)
    assert grad.layout == t.layout and grad.tolist() == [9.0, 8.0, 7.0, 6.0]


def test_failed_move_attaches_no_node_and_keeps_nothing_saved():
    class Broken(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise OSError("no")

    op = Broken()
    t = cpu_tensor([1.0, 2.0], L(2, 1))
    with pytest.raises(OSError):
        op.forward(t, Mine())
    assert op.inputs() == () and op.input_versions() == ()


def test_reverse_move_is_profiled_as_a_move():
    r = sw.move(cpu_tensor([1.0, 2.0], L(2, 1)), sw.FileBacked())
    with sw.profile() as p:
        r.autograd_ctx.backward(cpu_tensor([3.0, 4.0], L(2, 1)))
    phases = [(e.phase, e.source_type, e.destination_type) for e in p.move_events()]
    assert phases == [("submit", sw.FileBacked, sw.CPU), ("complete", sw.FileBacked, sw.CPU)]


# ---- end to end through Tensor.backward ------------------------------------------


def loss_of(x):
    return sw.reduce_sum(sw.elementwise_mul(x, x), "a b -> 1")


def test_scenario_gradient_crosses_a_move_to_a_file_and_back():
    # Seed: a CPU Tensor moved to FileBacked, loss computed there; backward
    # returns a fresh CPU gradient equal to the gradient without the move.
    layout = L((2, 3), (1, 2))
    values = [1.0, -2.0, 3.5, 0.25, 4.0, -1.5]
    plain = cpu_tensor(values, layout)
    loss_of(plain).backward()
    expected = plain.grad.tolist()
    assert expected == [2.0 * v for v in values]

    x = cpu_tensor(values, layout)
    on_file = sw.move(x, sw.FileBacked())
    assert x.carrier.is_released()
    loss = loss_of(on_file)
    loss.backward()
    assert type(x.grad.carrier) is sw.CPU and x.grad.carrier is not x.carrier
    assert x.grad.layout == layout and x.grad.tolist() == expected
    assert x.grad.autograd_ctx is None and on_file.grad is None


def test_gradient_through_cpu_file_cpu_round_trip():
    layout = L((2, 2), (1, 2))
    x = cpu_tensor([1.0, 2.0, 3.0, 4.0], layout)
    back = sw.move(sw.move(x, sw.FileBacked()), sw.CPU(4))
    loss_of(back).backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0, 8.0] and type(x.grad.carrier) is sw.CPU


def test_gradient_through_a_python_carrier_pair():
    x = cpu_tensor([1.0, 2.0, 3.0], L(3, 1))
    on_mine = sw.move(x, Mine())
    back = sw.move(on_mine, sw.CPU(3))
    s = sw.reduce_sum(sw.elementwise_mul(back, back), "a -> 1")
    s.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_moved_broadcast_view_hands_the_broadcast_node_an_injective_gradient():
    # F-4's example: moving the broadcast first gives the same x.grad.
    x = cpu_tensor([1.0, 2.0, 3.0], L((1, 3), (1, 1)))
    y = sw.broadcast_to(x, sw.Shape(4, 3))
    moved = sw.move(y, sw.FileBacked())
    assert moved.carrier.size() == 3
    s = sw.reduce_sum(moved, "a b -> 1")
    assert s.tolist() == [24.0]
    s.backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0] and x.grad.layout == x.layout


def test_move_node_released_after_backward_needs_retain_graph():
    x = cpu_tensor([1.0, 2.0], L(2, 1))
    s = sw.reduce_sum(sw.move(x, sw.FileBacked()), "a -> 1")
    s.backward(retain_graph=True)
    s.backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        s.backward()
