"""Each Carrier class has a core class of its own (issue 17): the class of its
instances' core carriers and the key of its routes in the core's registry, so
the core finds a move's route from the two carriers themselves (contract X-14:
the exact class pair; a subclass never matches its parent's route). A class
that is collected takes its routes with it."""

import gc
import weakref

import strideweave as sw
from strideweave import _C
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       unregister_move_operation)
from moves_for_tests import L, PyList


class Copy(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(tensor.size()):
            output[i] = tensor[i]


def _classes():
    class Src(PyList):
        pass

    class Dst(PyList):
        pass

    return Src, Dst


def test_x14_core_resolves_the_route_of_two_python_carriers():
    Src, Dst = _classes()
    register_move_operation(Src, Dst, Copy)
    try:
        src, dst = Src([1.0, 2.0]), Dst()
        entry = _C._core_route_of(src, dst)
        assert entry is not None and entry[:2] == (Src, Dst) and entry[2] is Copy
        # the exact pair only: not the other way, not a parent's instance
        assert _C._core_route_of(dst, src) is None
        assert _C._core_route_of(PyList([1.0]), dst) is None
        assert _C._core_route_of(src, PyList()) is None
    finally:
        unregister_move_operation(Src, Dst)
    assert _C._core_route_of(Src([1.0]), Dst()) is None


def test_x14_a_tensor_outlives_its_class_name_and_moves_through_its_route():
    Src, Dst = _classes()
    register_move_operation(Src, Dst, Copy)
    t = sw.Tensor(Src([1.0, 2.0, 3.0]), 0, L(3, 1))
    dst = Dst()
    ref = weakref.ref(Src)
    del Src
    gc.collect()
    assert ref() is not None  # the tensor's carrier keeps its class
    out = sw.move(t, dst)
    assert out.tolist() == [1.0, 2.0, 3.0]
    unregister_move_operation(ref(), Dst)


def test_x14_a_collected_class_takes_its_routes_and_core_class_with_it():
    Src, Dst = _classes()
    register_move_operation(Src, Dst, Copy)
    t = sw.Tensor(Src([4.0, 5.0]), 0, L(2, 1))
    assert sw.move(t, Dst()).tolist() == [4.0, 5.0]
    unregister_move_operation(Src, Dst)
    ref = weakref.ref(Src)
    del Src, t
    gc.collect()
    assert ref() is None
    # classes made afterwards (one may reuse the address) start without routes
    for _ in range(20):
        New, _Other = _classes()
        assert dispatch_move(New, Dst) is sw.ElementwiseMoveOperation
        assert _C._core_route_of(New([1.0]), Dst()) is None
