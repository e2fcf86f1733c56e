"""Each Carrier class has a core class of its own (issue 17): the class of its
instances' core carriers and the key of its routes in the core's registry, so
the core finds a move's route from the two carriers themselves (contract X-14:
the exact class pair; a subclass never matches its parent's route), and says
whether the pair may fall back element by element (both CarrierDefinitions'
StorageProviders allow it). A class that is collected takes its routes with
it."""

import gc
import weakref

import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       unregister_move_operation)
from extension_for_tests import Transfer, define, filled, new_class, route
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
        entry, may_fall_back = _C._core_route_of(src, dst)
        assert entry[:2] == (Src, Dst) and entry[2] is Copy and not may_fall_back
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


def test_x14_the_core_says_which_defined_pairs_may_fall_back():
    A, B, C, Plain = (new_class(n) for n in ("FallA", "FallB", "NoFall", "Plain"))
    t = Transfer()
    define(A, fallback=True, routes=[route(A, C, t)])
    define(B, fallback=True)
    define(C, fallback=False)
    a, b, c = filled(A, [1.0]), filled(B, [2.0]), filled(C, [3.0])
    assert _C._core_route_of(a, b) == (None, True)
    assert _C._core_route_of(b, a) == (None, True)
    assert _C._core_route_of(a, a) == (None, True)
    r, may_fall_back = _C._core_route_of(a, c)
    assert r.source_class is A and r.destination_class is C and not may_fall_back
    assert _C._core_route_of(c, a) is None  # the core refuses: no route, no fallback
    assert _C._core_route_of(b, Plain()) is None
    # and the moves do as the core says
    assert sw.move(sw.Tensor(a, 0, L(1, 1)), filled(B, [0.0])).tolist() == [1.0]
    with pytest.raises(NotImplementedError, match="do not both allow"):
        sw.move(sw.Tensor(c, 0, L(1, 1)), filled(A, [0.0]))
