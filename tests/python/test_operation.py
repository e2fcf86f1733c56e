"""Operation base, Tensor autograd attributes and grad mode
(contract-autograd-profiling O-1..O-10, A-2..A-6)."""

import gc
import inspect
import threading
import weakref

import pytest

import strideweave as sw
import strideweave.operation as swop
from strideweave import DType, Operation
from strideweave.friendly import scaled_int32, tensor


class Double(sw.Operation):
    """Returns a fresh Tensor of doubled values."""

    def _forward(self, x):
        return tensor([2.0 * v for v in x.tolist()])

    def backward(self, g):
        return (tensor([2.0 * v for v in g.tolist()]),)


class Identity(sw.Operation):
    def _forward(self, x):
        return x


def f32(*values):
    return tensor(list(values) if values else [1.0, 2.0, 3.0])


def i32():
    return tensor([1, 2, 3], dtype=DType.Int32)


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    sw.set_grad_enabled(True)
    yield
    sw.set_grad_enabled(True)


# ---- import surface (section 1) ------------------------------------------------


def test_import_surface_same_objects():
    for name in ("Operation", "MoveOperation", "is_grad_enabled", "set_grad_enabled",
                 "no_grad"):
        assert getattr(sw, name) is getattr(swop, name) is getattr(sw._C, name)
        assert name in sw.__all__ and name in swop.__all__


def test_docstrings_have_signatures_and_no_contract_ids():
    assert str(inspect.signature(Operation.forward)) == "(self, /, *inputs, options=None)"
    assert str(inspect.signature(Operation)) == "()"
    assert str(inspect.signature(sw.set_grad_enabled)) == "(enabled, /)"
    for obj in (Operation, Operation.forward, Operation.store_inputs, sw.no_grad,
                sw.is_grad_enabled, Operation.validate_input_versions):
        assert "O-" not in obj.__doc__ and "A-" not in obj.__doc__


# ---- O-1 class -----------------------------------------------------------------


def test_o1_no_arguments():
    Operation()
    with pytest.raises(TypeError, match="no arguments"):
        Operation(1)
    with pytest.raises(TypeError, match="no arguments"):
        Operation(x=1)
    with pytest.raises(TypeError, match="Double"):
        Double(1)


def test_o1_subclass_init_need_not_call_super():
    class WithInit(Operation):
        def __init__(self, factor):
            self.factor = factor

        def _forward(self, x):
            return tensor([self.factor * v for v in x.tolist()])

    op = WithInit(3.0)
    assert op.ctx == {} and op.inputs() == ()
    x = f32()
    y = op.forward(x)
    assert y.tolist() == [3.0, 6.0, 9.0]
    assert y.autograd_ctx is op and op.inputs() == (x,)


def test_o1_subclass_has_dict_and_weakref():
    op = Double()
    op.anything = 5
    assert op.anything == 5
    r = weakref.ref(op)
    del op
    gc.collect()
    assert r() is None


# ---- O-2 hooks -----------------------------------------------------------------


def test_o2_base_hooks_raise_not_implemented():
    op = Operation()
    with pytest.raises(NotImplementedError, match="_forward"):
        op.forward(f32())
    with pytest.raises(NotImplementedError, match="backward"):
        op.backward(f32())
    assert op.inputs() == ()  # a failed forward leaves nothing saved


def test_o2_hooks_found_by_attribute_lookup():
    op = Double()  # an instance attribute wins over the class's hook
    op._forward = lambda x: tensor([7.0])
    assert op.forward(f32()).tolist() == [7.0]


# ---- O-3 ctx -------------------------------------------------------------------


def test_o3_ctx_same_dict_and_read_only():
    op = Double()
    ctx = op.ctx
    assert type(ctx) is dict and op.ctx is ctx
    ctx["k"] = 1
    assert op.ctx == {"k": 1}
    with pytest.raises(AttributeError):
        op.ctx = {}
    with pytest.raises(AttributeError):
        del op.ctx


# ---- O-4 forward ---------------------------------------------------------------


def test_o4_records_node_and_saved_inputs():
    op = Double()
    x = f32()
    y = op.forward(x)
    assert y.tolist() == [2.0, 4.0, 6.0]
    assert y.autograd_ctx is op
    assert op.inputs() == (x,) and op.inputs()[0] is x


def test_o4_unknown_keyword_names_it():
    op = Double()
    with pytest.raises(TypeError, match="bogus"):
        op.forward(f32(), bogus=1)
    assert op.inputs() == ()


def test_o4_options_must_be_none():
    op = Double()
    y = op.forward(f32(), options=None)
    assert y.autograd_ctx is op
    op2 = Double()
    with pytest.raises(TypeError, match="options"):
        op2.forward(f32(), options={})
    assert op2.inputs() == ()


def test_o4_multi_subtensor_not_implemented():
    op = Double()
    with pytest.raises(NotImplementedError, match="input 0 has 2 planes"):
        op.forward(scaled_int32([[1, 2], [3, 4]], scale=0.5))
    assert op.inputs() == ()


def test_o4_saved_inputs_in_order_tensor_twice_non_tensors_skipped():
    class Pick(Operation):
        def _forward(self, a, b, c, d):
            return tensor([1.0])

    x, n = f32(), i32()
    op = Pick()
    y = op.forward(x, 3, n, x)
    assert y.autograd_ctx is op
    saved = op.inputs()
    assert len(saved) == 3 and saved[0] is x and saved[1] is n and saved[2] is x
    assert op.input_versions() == (x._version_token(), n._version_token(),
                                   x._version_token())


def test_o4_forward_passes_positional_arguments_unchanged():
    seen = []

    class Spy(Operation):
        def _forward(self, *inputs):
            seen.append(inputs)
            return tensor([0.0])

    x = f32()
    Spy().forward(x, "a", None, options=None)
    assert len(seen) == 1 and seen[0][0] is x and seen[0][1:] == ("a", None)


def test_o4_non_tensor_result_type_error():
    class Bad(Operation):
        def _forward(self, x):
            return [1.0]

    op = Bad()
    with pytest.raises(TypeError, match="Tensor"):
        op.forward(f32())
    assert op.inputs() == () and op.input_versions() == ()


def test_o4_result_is_own_input_value_error():
    op = Identity()
    x = f32()
    with pytest.raises(ValueError, match="a result may not be its own input"):
        op.forward(x)
    assert x.autograd_ctx is None and op.inputs() == ()


def test_o4_own_input_allowed_when_not_recording():
    op = Identity()
    x = f32()
    with sw.no_grad():
        assert op.forward(x) is x
    assert x.autograd_ctx is None and op.inputs() == ()


def test_o4_forward_exception_propagates_nothing_saved():
    class Boom(Operation):
        def _forward(self, x):
            self.store_inputs(x)
            raise KeyError("boom")

    op = Boom()
    with pytest.raises(KeyError):
        op.forward(f32())
    assert op.inputs() == () and op.input_versions() == ()


def test_o4_grad_mode_inside_forward_does_not_affect_node():
    class Inner(Operation):
        def _forward(self, x):
            sw.set_grad_enabled(False)
            return tensor([1.0])

    op = Inner()
    y = op.forward(f32())
    assert not sw.is_grad_enabled()
    assert y.autograd_ctx is op and len(op.inputs()) == 1

    class Enable(Operation):
        def _forward(self, x):
            sw.set_grad_enabled(True)
            return tensor([1.0])

    sw.set_grad_enabled(False)
    op2 = Enable()
    y2 = op2.forward(f32())
    assert y2.autograd_ctx is None and op2.inputs() == ()


def test_o4_inner_operation_under_no_grad_records_nothing():
    inner = Double()

    class Outer(Operation):
        def _forward(self, x):
            with sw.no_grad():
                return inner.forward(x)

    op = Outer()
    x = f32()
    y = op.forward(x)
    assert y.autograd_ctx is op
    assert inner.inputs() == ()


# ---- O-5 / O-6 / O-7 -----------------------------------------------------------


def test_o5_store_inputs_inside_forward_replaces_saved():
    derived = []

    class SaveDerived(Operation):
        def _forward(self, x):
            d = tensor([5.0])
            derived.append(d)
            self.store_inputs(d, "skip", x)
            return tensor([1.0])

    op = SaveDerived()
    x = f32()
    y = op.forward(x)
    assert y.autograd_ctx is op
    assert op.inputs() == (derived[0], x)
    assert op.input_versions() == (derived[0]._version_token(), x._version_token())


def test_o5_store_inputs_discarded_when_not_recording():
    class Save(Operation):
        def _forward(self, x):
            self.store_inputs(x)
            return tensor([1.0])

    op = Save()
    op.forward(i32())  # no differentiable input: not recorded
    assert op.inputs() == ()


def test_o5_store_inputs_directly():
    op = Operation()
    x, n = f32(), i32()
    assert op.store_inputs(x, 1, n) is None
    assert op.inputs() == (x, n)
    op.store_inputs()
    assert op.inputs() == () and op.input_versions() == ()


def test_o6_inputs_is_tuple_empty_when_none():
    op = Double()
    assert op.inputs() == () and type(op.inputs()) is tuple


def test_o7_version_token_shape():
    x = f32()
    op = Double()
    op.forward(x)
    (token,) = op.input_versions()
    assert token == ((id(x.carrier), x.carrier.version),)


# ---- O-8 -----------------------------------------------------------------------


def test_o8_validate_passes_then_detects_in_place():
    x = f32()
    op = Double()
    op.forward(x)
    assert op.validate_input_versions() is None
    x[0] = 10.0
    with pytest.raises(RuntimeError, match="in-place"):
        op.validate_input_versions()


def test_o8_first_differing_input_reported():
    a, b = f32(), f32()

    class Two(Operation):
        def _forward(self, a, b):
            return tensor([0.0])

    op = Two()
    op.forward(a, b)
    b[0] = 3.0
    with pytest.raises(RuntimeError, match="input 1 .*in-place"):
        op.validate_input_versions()


def test_o8_validate_without_saved_inputs():
    assert Operation().validate_input_versions() is None


# ---- O-9 / O-10 ----------------------------------------------------------------


def test_o9_dispatch_metadata_none_and_read_only():
    op = Double()
    assert op._operation_name is None and op._dispatch_carrier_class is None
    with pytest.raises(AttributeError):
        op._operation_name = "x"
    with pytest.raises(AttributeError):
        op._dispatch_carrier_class = sw.CPU


def test_o10_second_forward_overwrites_saved_state():
    op = Double()
    x1, x2 = f32(), f32()
    y1 = op.forward(x1)
    y2 = op.forward(x2)
    assert op.inputs() == (x2,)
    assert y1.autograd_ctx is op and y2.autograd_ctx is op
    with sw.no_grad():
        op.forward(x1)
    assert op.inputs() == ()


# ---- MoveOperation is an Operation (O-11) ----------------------------------------


def test_o11_move_operation_subclasses_operation():
    assert issubclass(sw.MoveOperation, Operation)
    assert issubclass(sw.ElementwiseMoveOperation, Operation)
    m = sw.MoveOperation()
    assert m.ctx == {} and m.inputs() == () and m._operation_name is None
    with pytest.raises(TypeError, match="no arguments"):
        sw.MoveOperation(1)
    assert gc.is_tracked(sw.ElementwiseMoveOperation())

    class MyMove(sw.MoveOperation):
        pass

    mm = MyMove()
    mm.ctx["a"] = 1
    assert mm.inputs() == ()
    # MoveOperation keeps its own forward(tensor, destination).
    assert "destination" in str(inspect.signature(sw.MoveOperation.forward))


def test_o11_move_forward_still_moves():
    x = f32()
    y = sw.ElementwiseMoveOperation().forward(x, sw.CPU(3))
    assert y.tolist() == [1.0, 2.0, 3.0]


# ---- A-2 / A-3 / A-4 -------------------------------------------------------------


def test_a3_autograd_ctx_initially_none_and_assignable():
    x = f32()
    assert x.autograd_ctx is None
    op = Double()
    x.autograd_ctx = op
    assert x.autograd_ctx is op
    x.autograd_ctx = None
    assert x.autograd_ctx is None


def test_a3_autograd_ctx_type_error():
    x = f32()
    with pytest.raises(TypeError, match="Operation"):
        x.autograd_ctx = 5
    with pytest.raises(TypeError, match="Operation"):
        x.autograd_ctx = Double  # the class, not an instance


def test_a2_autograd_ctx_non_differentiable():
    n = i32()
    with pytest.raises(RuntimeError, match="non-differentiable"):
        n.autograd_ctx = Double()
    with pytest.raises(RuntimeError, match="non-differentiable"):
        n.autograd_ctx = 5  # the guard runs before the type check
    n.autograd_ctx = None
    assert n.autograd_ctx is None


def test_a4_grad_read_write():
    x = f32()
    assert x.grad is None
    g = f32()
    x.grad = g
    assert x.grad is g
    n = i32()
    x.grad = n  # stored as given, without validation
    assert x.grad is n
    x.grad = None
    assert x.grad is None
    with pytest.raises(TypeError, match="Tensor"):
        x.grad = [1.0]


def test_a2_grad_non_differentiable():
    n = i32()
    with pytest.raises(RuntimeError, match="non-differentiable"):
        n.grad
    with pytest.raises(RuntimeError, match="non-differentiable"):
        n.grad = f32()
    with pytest.raises(RuntimeError, match="non-differentiable"):
        n.grad = "x"
    n.grad = None


# ---- A-5 grad mode ---------------------------------------------------------------


def test_a5_set_and_read():
    assert sw.is_grad_enabled() is True
    assert sw.set_grad_enabled(False) is None
    assert sw.is_grad_enabled() is False
    sw.set_grad_enabled(True)
    assert sw.is_grad_enabled() is True


@pytest.mark.parametrize("bad", [1, 0, None, "yes", 1.0])
def test_a5_set_grad_enabled_requires_bool(bad):
    with pytest.raises(TypeError, match="bool"):
        sw.set_grad_enabled(bad)
    assert sw.is_grad_enabled() is True


def test_a5_no_grad_restores_and_nests():
    with sw.no_grad():
        assert not sw.is_grad_enabled()
        with sw.no_grad():
            assert not sw.is_grad_enabled()
        assert not sw.is_grad_enabled()
    assert sw.is_grad_enabled()
    sw.set_grad_enabled(False)
    with sw.no_grad():
        sw.set_grad_enabled(True)
    assert sw.is_grad_enabled() is False


def test_a5_no_grad_restores_on_exception_and_never_suppresses():
    with pytest.raises(ZeroDivisionError):
        with sw.no_grad():
            1 / 0
    assert sw.is_grad_enabled()


def test_a5_same_no_grad_object_reentered():
    ng = sw.no_grad()
    with ng:
        sw.set_grad_enabled(True)
        with ng:
            assert not sw.is_grad_enabled()
        assert sw.is_grad_enabled()
    assert sw.is_grad_enabled()


def test_a5_no_grad_takes_no_arguments():
    with pytest.raises(TypeError):
        sw.no_grad(True)


def test_a5_per_thread_state():
    seen = []
    with sw.no_grad():
        t = threading.Thread(target=lambda: seen.append(sw.is_grad_enabled()))
        t.start()
        t.join()
        assert not sw.is_grad_enabled()
    assert seen == [True]

    ready, done = threading.Event(), threading.Event()

    def other():
        sw.set_grad_enabled(False)
        ready.set()
        done.wait()

    t = threading.Thread(target=other)
    t.start()
    ready.wait()
    assert sw.is_grad_enabled()  # another thread's change is not ours
    done.set()
    t.join()


# ---- A-6 recording ---------------------------------------------------------------


def test_a6_no_node_under_no_grad():
    op = Double()
    with sw.no_grad():
        y = op.forward(f32())
    assert y.autograd_ctx is None and op.inputs() == ()


def test_a6_no_node_without_differentiable_input():
    class FromInt(Operation):
        def _forward(self, n):
            return tensor([1.0])

    op = FromInt()
    y = op.forward(i32())
    assert y.autograd_ctx is None and op.inputs() == ()


def test_a6_no_node_for_non_differentiable_result():
    class ToInt(Operation):
        def _forward(self, x):
            return tensor([1], dtype=DType.Int32)

    op = ToInt()
    y = op.forward(f32())
    assert y.autograd_ctx is None and op.inputs() == ()


# ---- GC and leaks ------------------------------------------------------------------


def test_cycle_through_ctx_is_collected():
    op = Double()
    op.ctx["self"] = op
    x = f32()
    y = op.forward(x)
    op.ctx["y"] = y  # y -> op -> ctx -> y
    r = weakref.ref(op)
    del op, y
    gc.collect()
    assert r() is None


def test_no_leak_in_forward_loop():
    x = f32()
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(2000):
        Double().forward(x)
    gc.collect()
    assert len(gc.get_objects()) - before < 50
