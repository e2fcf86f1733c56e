"""Operation events of the profiler (contract-autograd-profiling P-3, P-5..P-8,
P-14) with real dispatched operations."""

import dataclasses
import threading
import time

import pytest

import strideweave as sw
from strideweave import DType, Layout, Shape, Stride, Tensor

F32, I32 = DType.Float32, DType.Int32


def make(values, layout=None, carrier_proto=None, dtype=F32):
    values = list(values)
    if layout is None:
        layout = Layout(Shape(len(values)), Stride(1))
    proto = carrier_proto if carrier_proto is not None else sw.CPU(1)
    return Tensor(proto.new_like(values, dtype=dtype), 0, layout)


def gen(values, dtype=F32):
    return make(values, carrier_proto=sw.Generic([0.0]), dtype=dtype)


# ---- P-5 what is recorded ------------------------------------------------------------


def test_one_event_per_dispatched_execution():
    x = make([1.0, 2.0])
    with sw.profile() as p:
        sw.add(x, x)
        sw.elementwise_mul(x, x)
        sw.reduce_sum(x, "a -> 1")
    ev = p.events()
    assert [e.name for e in ev] == ["add", "elementwise_mul", "reduce_sum"]
    assert [e.id for e in ev] == [0, 1, 2]
    for e in ev:
        assert e.carrier_type is sw.CPU and e.succeeded is True
        assert e.parent_id is None and e.input_shapes is None
        assert e.thread_id == threading.get_ident()
        assert 0 <= e.self_time_ns <= e.duration_ns
    assert ev[0].implementation_type is type(sw.CPU(1).dispatch_op("add"))
    assert p.move_events() == ()


def test_event_times_use_monotonic_clock():
    x = make([1.0])
    before = time.monotonic_ns()
    with sw.profile() as p:
        sw.add(x, x)
    after = time.monotonic_ns()
    (e,) = p.events()
    assert before <= e.start_time_ns <= e.start_time_ns + e.duration_ns <= after


def test_failures_inside_boundary_recorded_then_normal():
    x, y = make([1.0, 2.0]), make([1.0, 2.0, 3.0])
    dead = make([1.0, 2.0])
    dead.carrier.release()
    with sw.profile() as p:
        with pytest.raises(ValueError):
            sw.add(x, y)
        with pytest.raises(RuntimeError):
            sw.elementwise_mul(dead, x)
        with pytest.raises(ValueError):
            sw.reduce_sum(x, "a b -> 1")
        sw.add(x, x)
    assert [(e.name, e.succeeded) for e in p.events()] == [
        ("add", False), ("elementwise_mul", False), ("reduce_sum", False), ("add", True)]


def test_nothing_for_checks_before_the_boundary_or_dispatch_alone():
    x = make([1.0])
    with sw.profile() as p:
        with pytest.raises(TypeError):
            sw.add(1, x)
        with pytest.raises(TypeError):
            sw.add(x, gen([1.0]))
        with pytest.raises(TypeError):
            sw.reduce_sum(x, 3)
        with pytest.raises(NotImplementedError):
            x.carrier.dispatch_op("nope")
        sw.CPU(1).dispatch_op("add")
        op = sw.CPU(1).dispatch_op("add")
        with pytest.raises(TypeError):
            op.forward(x, x, options=1)  # preflight
    assert p.events() == ()


def test_nothing_for_undispatched_operations():
    class Double(sw.Operation):
        def _forward(self, t):
            return make([2.0 * v for v in t.tolist()])

    x = make([1.0])
    with sw.profile() as p:
        Double().forward(x)
        type(sw.CPU(1).dispatch_op("add"))().forward(x, x)  # constructed directly
    assert p.events() == ()


def test_nothing_without_active_profiler_or_on_other_threads():
    x = make([1.0])
    sw.add(x, x)
    with sw.profile() as p:
        t = threading.Thread(target=lambda: sw.add(x, x))
        t.start()
        t.join()
    assert p.events() == ()


def test_selection_by_exact_carrier_class():
    c, g = make([1.0]), gen([1.0])
    with sw.profile(carriers=[sw.Generic]) as p:
        sw.add(c, c)
        sw.add(g, g)
    assert [e.carrier_type for e in p.events()] == [sw.Generic]
    with sw.profile(carriers=[]) as p2:
        sw.add(g, g)
    assert p2.events() == ()


def test_file_backed_events():
    f = make([1.0, 2.0], carrier_proto=sw.FileBacked())
    with sw.profile(carriers=[sw.FileBacked]) as p:
        sw.reduce_sum(f, "a -> 1")
    (e,) = p.events()
    assert e.carrier_type is sw.FileBacked and e.name == "reduce_sum"


# ---- P-6 record type ------------------------------------------------------------------


def test_events_are_frozen_and_hashable():
    x = make([1.0])
    with sw.profile() as p:
        sw.add(x, x)
    (e,) = p.events()
    assert isinstance(e, sw.ProfilerEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.name = "x"
    assert hash(e) == hash(dataclasses.replace(e)) and e == dataclasses.replace(e)
    assert p.events() == p.events()


# ---- P-7 shapes ----------------------------------------------------------------------


def test_record_shapes():
    x = make(range(24), Layout(Shape([2, [3, 4]]), Stride([1, [2, 6]])))
    v = make([1.0, 2.0])
    with sw.profile(record_shapes=True) as p:
        sw.add(v, v)
        sw.reduce_sum(x, "a b -> 1")
        sw.reduce_sum(v, "a -> 1", accumulator_dtype=DType.Float64)
        sw.CPU(1).dispatch_op("add").forward(v, v, options=None)
    shapes = [e.input_shapes for e in p.events()]
    assert shapes == [((2,), (2,)), ((2, (3, 4)), None), ((2,), None, None),
                      ((2,), (2,))]


# ---- P-8 nesting ---------------------------------------------------------------------


def dispatched(op, name, carrier_class=sw.CPU):
    """Give a user operation dispatch metadata (test aid), as dispatch_op would."""
    sw._C._set_dispatch_metadata(op, name, carrier_class)
    return op


class Composite(sw.Operation):
    """Runs dispatched operations inside its own _forward."""

    def __init__(self, body):
        self.body = body

    def _forward(self, *inputs):
        return self.body(*inputs)


def test_nesting_parent_ids_and_self_time():
    x = make([1.0, 2.0])

    def inner_body(t):
        return sw.add(t, t)                      # grandchild

    def outer_body(t):
        y = dispatched(Composite(inner_body), "inner").forward(t)   # child
        time.sleep(0.002)  # widen the outer's own time (not a synchronization)
        return sw.reduce_sum(y, "a -> 1")         # second child

    with sw.profile() as p:
        dispatched(Composite(outer_body), "outer").forward(x)
        sw.add(x, x)
    ev = p.events()
    assert [(e.id, e.name, e.parent_id) for e in ev] == [
        (0, "outer", None), (1, "inner", 0), (2, "add", 1), (3, "reduce_sum", 0),
        (4, "add", None)]
    outer, inner, grand, red = ev[:4]
    assert outer.implementation_type is Composite
    assert outer.start_time_ns <= inner.start_time_ns <= grand.start_time_ns
    assert grand.start_time_ns + grand.duration_ns <= inner.start_time_ns + inner.duration_ns
    # self time = inclusive minus immediately nested (grandchild subtracted once)
    assert outer.self_time_ns == outer.duration_ns - inner.duration_ns - red.duration_ns
    assert inner.self_time_ns == inner.duration_ns - grand.duration_ns
    assert outer.self_time_ns >= 2_000_000
    assert grand.self_time_ns == grand.duration_ns


def test_nesting_through_unselected_parent():
    x = make([1.0, 2.0])
    g = gen([1.0, 2.0])

    def body(t):
        sw.add(g, g)                             # selected child of an unselected op
        return sw.add(t, t)

    with sw.profile(carriers=[sw.Generic]) as p:
        dispatched(Composite(body), "outer", sw.CPU).forward(x)
    (e,) = p.events()
    assert e.carrier_type is sw.Generic and e.parent_id is None
    assert e.self_time_ns == e.duration_ns


def test_type_check_failure_inside_boundary():
    x = make([1.0])
    with sw.profile() as p:
        with pytest.raises(TypeError, match="Tensor"):
            dispatched(Composite(lambda t: 42), "bad").forward(x)
    (e,) = p.events()
    assert e.name == "bad" and e.succeeded is False


def test_exit_during_profiled_computation_raises():
    x = make([1.0])
    seen = []

    def body(t):
        with pytest.raises(RuntimeError):
            prof.__exit__(None, None, None)
        seen.append(True)
        return sw.add(t, t)

    with sw.profile() as prof:
        dispatched(Composite(body), "outer").forward(x)
    assert seen == [True]
    assert [e.name for e in prof.events()] == ["outer", "add"]


def test_exit_from_undispatched_user_code_is_allowed():
    x = make([1.0])
    prof = sw.profile()
    prof.__enter__()
    sw.add(x, x)
    Composite(lambda t: (prof.__exit__(None, None, None), sw.add(t, t))[1]).forward(x)
    assert [e.name for e in prof.events()] == ["add"]


def test_events_only_from_entering_thread_even_when_nested():
    x = make([1.0])

    def body(t):
        th = threading.Thread(target=lambda: sw.add(x, x))
        th.start()
        th.join()
        return sw.add(t, t)

    with sw.profile() as p:
        dispatched(Composite(body), "outer").forward(x)
    assert [(e.name, e.parent_id) for e in p.events()] == [("outer", None), ("add", 0)]


# ---- P-14 aggregates -------------------------------------------------------------------


def test_key_averages_with_real_events():
    x, g = make([1.0, 2.0]), gen([1.0, 2.0])
    bad = make([1.0, 2.0, 3.0])
    with sw.profile(record_shapes=True) as p:
        sw.add(x, x)
        sw.add(x, x)
        with pytest.raises(ValueError):
            sw.add(x, bad)
        sw.add(g, g)
        sw.reduce_sum(x, "a -> 1")
    rows = p.key_averages()
    assert [(r.name, r.carrier_type, r.count) for r in rows] == [
        ("add", sw.CPU, 3), ("add", sw.Generic, 1), ("reduce_sum", sw.CPU, 1)]
    ev = [e for e in p.events() if e.name == "add" and e.carrier_type is sw.CPU]
    r0 = rows[0]
    assert r0.input_shapes is None
    assert r0.total_time_ns == sum(e.duration_ns for e in ev)
    assert r0.self_total_time_ns == sum(e.self_time_ns for e in ev)
    assert r0.min_time_ns == min(e.duration_ns for e in ev)
    assert r0.max_time_ns == max(e.duration_ns for e in ev)
    assert r0.mean_time_ns == r0.total_time_ns / 3
    by = p.key_averages(group_by_input_shape=True)
    assert [(r.name, r.input_shapes, r.count) for r in by if r.carrier_type is sw.CPU] == [
        ("add", ((2,), (2,)), 2), ("add", ((2,), (3,)), 1), ("reduce_sum", ((2,), None), 1)]
