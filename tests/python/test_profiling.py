"""Profiler lifecycle (P-1..P-4, P-9, P-14), the record types (P-6, P-13) and
move profiling (P-11..P-13; the seed's "Profiling distinguishes submission
from completion"). Operation events (P-5..P-8) come with dispatched
operations."""

import dataclasses
import threading
import time
import weakref

import pytest

import strideweave as sw
from strideweave import _C
from strideweave.carriers.move import registered_move_operation

N_POOLED = 1 << 20  # 4 MiB: a pool job, never finished inline


def flat(n, carrier=None):
    c = carrier if carrier is not None else sw.CPU(n)
    return sw.Tensor(c, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))


class held:
    """Pool jobs wait until the block ends, even if the test fails."""

    def __enter__(self):
        _C._hold_moves(True)

    def __exit__(self, *exc):
        _C._hold_moves(False)
        return False


# ---- P-1 construction ----------------------------------------------------------


def test_p1_profile_and_profiler_build_new_profilers():
    a, b = sw.profile(), sw.Profiler(carriers=[sw.CPU], record_shapes=True)
    assert type(a) is sw.Profiler and type(b) is sw.Profiler and a is not sw.profile()


@pytest.mark.parametrize("carriers", [3, [sw.CPU(1)], [int], "CPU", [sw.CPU, object]])
def test_p1_carriers_must_be_carrier_classes(carriers):
    with pytest.raises(TypeError, match="Carrier"):
        sw.profile(carriers=carriers)


@pytest.mark.parametrize("flag", [1, None, "yes"])
def test_p1_record_shapes_must_be_bool(flag):
    with pytest.raises(TypeError, match="record_shapes"):
        sw.profile(record_shapes=flag)


def test_p1_carriers_iterable_is_consumed_once_at_construction():
    it = iter([sw.CPU])
    p = sw.profile(carriers=it)
    assert list(it) == []
    with p:
        sw.move(flat(4), sw.FileBacked())
    assert len(p.move_events()) == 2


def test_p1_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        sw.profile(None)


# ---- P-2, P-3, P-4 lifecycle -----------------------------------------------------


def test_p2_single_use():
    p = sw.profile()
    with p:
        pass
    with pytest.raises(RuntimeError, match="single-use"):
        p.__enter__()


def test_p2_failed_entry_still_consumes_the_profiler():
    with sw.profile():
        p = sw.profile()
        with pytest.raises(RuntimeError, match="already active"):
            p.__enter__()
    with pytest.raises(RuntimeError, match="single-use"):
        p.__enter__()


def test_p3_exit_when_not_active():
    p = sw.profile()
    with pytest.raises(RuntimeError):
        p.__exit__(None, None, None)


def test_p3_exit_returns_false_and_keeps_records_of_a_failed_body():
    with pytest.raises(ValueError, match="body"):
        with sw.profile() as p:
            sw.move(flat(4), sw.FileBacked())
            raise ValueError("body")
    assert [e.phase for e in p.move_events()] == ["submit", "complete"]


def test_p4_results_only_after_exit():
    p = sw.profile()
    for call in (p.events, p.move_events, p.key_averages):
        with pytest.raises(RuntimeError, match="only after context exit"):
            call()
    with p:
        with pytest.raises(RuntimeError, match="only after context exit"):
            p.move_events()
    assert p.events() == () and p.move_events() == () and p.key_averages() == ()


# ---- P-9 threads -------------------------------------------------------------------


def test_p9_exit_from_another_thread_abandons_the_profiler():
    p = sw.profile()
    p.__enter__()
    sw.move(flat(4), sw.FileBacked())
    errors = []

    def other():
        try:
            p.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(e)

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert len(errors) == 1
    with pytest.raises(RuntimeError, match="only after context exit"):
        p.move_events()  # an abandoned profiler never has results
    with sw.profile() as q:  # the owner thread may enter a new one
        sw.move(flat(4), sw.FileBacked())
    assert len(q.move_events()) == 2


def test_p9_other_threads_moves_are_not_recorded():
    with sw.profile() as p:
        th = threading.Thread(target=lambda: sw.move(flat(4), sw.FileBacked()))
        th.start()
        th.join()
    assert p.move_events() == ()


def test_p9_profilers_on_two_threads_are_independent():
    results = {}

    def worker(k):
        with sw.profile() as p:
            for _ in range(k):
                sw.move(flat(4), sw.FileBacked())
        results[k] = p.move_events()

    threads = [threading.Thread(target=worker, args=(k,)) for k in (1, 2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results[1]) == 2 and len(results[2]) == 4


# ---- P-6 / P-13 / P-14 record types ---------------------------------------------------


@pytest.mark.parametrize("cls, n", [(sw.ProfilerEvent, 11), (sw.MoveEvent, 13),
                                    (sw.ProfilerAggregate, 9)])
def test_record_types_are_frozen_value_records(cls, n):
    values = list(range(n))
    a, b = cls(*values), cls(*values)
    assert a == b and hash(a) == hash(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.id = 5 if hasattr(a, "id") else None
        a.name = "x"
    with pytest.raises(TypeError):
        cls(*values[:-1])
    with pytest.raises(TypeError):
        cls(*values, 99)
    fields = [f.name for f in dataclasses.fields(cls)]
    assert cls(**dict(zip(fields, values))) == a
    with pytest.raises(TypeError):
        cls(*values, **{fields[0]: 1})


def test_record_types_import_paths():
    import strideweave.operation as op
    for name in ("Profiler", "profile", "ProfilerEvent", "MoveEvent", "ProfilerAggregate"):
        assert getattr(op, name) is getattr(sw, name)


def test_p14_group_by_input_shape_must_be_bool():
    with sw.profile() as p:
        pass
    with pytest.raises(TypeError, match="group_by_input_shape"):
        p.key_averages(group_by_input_shape=1)
    assert p.key_averages(group_by_input_shape=True) == ()


# ---- P-11..P-13 move events -------------------------------------------------------------


def test_p12_one_submit_and_one_complete_record_per_move():
    # The seed's scenario: repeated waits do not duplicate the terminal event,
    # and moves never appear among operation events.
    t = flat(N_POOLED)
    with sw.profile() as p:
        h = sw.move_async(t, sw.FileBacked())
        h.wait()
        h.wait()
        assert h.done
    submit, complete = p.move_events()
    assert (submit.id, submit.phase, complete.id, complete.phase) == (0, "submit", 1, "complete")
    assert submit.move_id == complete.move_id and submit.request_id == complete.request_id
    assert submit.start_time_ns == complete.start_time_ns
    assert submit.succeeded is None and complete.succeeded is True
    assert submit.thread_id == threading.get_ident()
    assert submit.source_type is sw.CPU and submit.destination_type is sw.FileBacked
    assert submit.operation_type is sw.CpuToFileBackedMoveOperation
    assert submit.route_id is None and complete.route_id is None
    assert p.events() == () and p.key_averages() == ()


def test_p12_start_time_is_monotonic_ns_clock():
    before = time.monotonic_ns()
    with sw.profile() as p:
        sw.move(flat(4), sw.CPU(4))
    after = time.monotonic_ns()
    submit, complete = p.move_events()
    assert before <= submit.start_time_ns <= after
    assert submit.duration_ns >= 0 and complete.duration_ns >= 0
    assert complete.start_time_ns + complete.duration_ns <= after


def test_p12_complete_duration_covers_the_asynchronous_work():
    t = flat(N_POOLED)
    with sw.profile() as p:
        with held():
            h = sw.move_async(t, sw.FileBacked())
            assert not h.done
            released_at = time.monotonic_ns()
        h.wait()
    submit, complete = p.move_events()
    assert submit.start_time_ns + submit.duration_ns <= released_at
    assert complete.start_time_ns + complete.duration_ns >= released_at
    assert complete.thread_id != threading.get_ident()  # committed by the completion thread


def test_p12_complete_recorded_once_with_eight_waiters():
    t = flat(N_POOLED)
    with sw.profile() as p:
        with held():
            h = sw.move_async(t, sw.FileBacked())
            barrier = threading.Barrier(9)
            results = []

            def waiter():
                barrier.wait()
                results.append(h.wait())

            threads = [threading.Thread(target=waiter) for _ in range(8)]
            for th in threads:
                th.start()
            barrier.wait()
        for th in threads:
            th.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert [e.phase for e in p.move_events()] == ["submit", "complete"]


def test_p12_dropped_handle_still_records_completion():
    t = flat(N_POOLED)
    committed = threading.Event()
    with sw.profile() as p:
        with held():
            h = sw.move_async(t, sw.FileBacked())
            # The request keeps the handle alive until its commit has run.
            weakref.finalize(h, committed.set)
            del h
        assert committed.wait(60)
    submit, complete = p.move_events()
    assert (submit.phase, complete.phase) == ("submit", "complete")
    assert complete.move_id == submit.move_id and complete.succeeded is True
    assert t.carrier.is_released()


def test_p12_failed_move_records_unsuccessful_completion():
    class Broken(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            raise OSError("disk on fire")

    class Mine(sw.Carrier):
        def __init__(self, n):
            self.v = [0.0] * n
        def size(self): return len(self.v)
        def dtype(self): return sw.DType.Float32
        def get_value(self, i): return self.v[i]
        def set_value(self, i, x): self.v[i] = x
        def _is_mutable(self): return True

    with registered_move_operation(sw.CPU, Mine, Broken):
        with sw.profile() as p:
            h = sw.move_async(flat(3), Mine(3))
            with pytest.raises(OSError):
                h.wait()
    submit, complete = p.move_events()
    assert submit.operation_type is Broken and complete.succeeded is False
    assert submit.id == 0 and complete.id == 1  # the synchronous route finished first


def test_p11_rejected_moves_record_nothing():
    with sw.profile() as p:
        with pytest.raises(ValueError):
            sw.move(flat(8), sw.CPU(2))          # too small (row 10)
        with pytest.raises(TypeError):
            sw.move(flat(4), [sw.CPU(4)])        # row 4
        src = flat(4)
        with pytest.raises(ValueError):
            sw.move(src, src.carrier)           # row 5
    assert p.move_events() == ()


def test_p11_selection_by_exact_source_or_destination_class():
    with sw.profile(carriers=[sw.FileBacked]) as p:
        sw.move(flat(4), sw.CPU(4))             # neither class selected
        sw.move(flat(4), sw.FileBacked())       # destination selected
    with sw.profile(carriers=[]) as q:
        sw.move(flat(4), sw.FileBacked())
    events = p.move_events()
    assert len(events) == 2 and events[0].destination_type is sw.FileBacked
    assert q.move_events() == ()


def test_p11_forward_records_like_move():
    with sw.profile() as p:
        sw.ElementwiseMoveOperation().forward(flat(4), sw.Generic([0.0] * 4))
    submit, complete = p.move_events()
    assert submit.operation_type is sw.ElementwiseMoveOperation
    assert complete.destination_type is sw.Generic


def test_p12_completion_after_exit_is_dropped():
    t = flat(N_POOLED)
    with held():
        with sw.profile() as p:
            h = sw.move_async(t, sw.FileBacked())
    h.wait()
    assert [e.phase for e in p.move_events()] == ["submit"]


def test_p13_move_and_request_ids_are_process_unique():
    with sw.profile() as p:
        for _ in range(3):
            sw.move(flat(4), sw.FileBacked())
    with sw.profile() as q:
        sw.move(flat(4), sw.FileBacked())
    ids = [e.move_id for e in p.move_events() + q.move_events() if e.phase == "submit"]
    reqs = [e.request_id for e in p.move_events() + q.move_events() if e.phase == "submit"]
    assert len(set(ids)) == 4 and len(set(reqs)) == 4
    assert [e.id for e in q.move_events()] == [0, 1]
