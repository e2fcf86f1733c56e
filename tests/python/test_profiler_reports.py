"""A profiler you can read (issue 18, item 7): Profiler.table(), one row per
kind of event, Profiler.export_chrome_trace(path), Chrome/Perfetto JSON with
one complete "X" span per move, and MoveEvent.bytes. The trace is held to
`json.load` and its spans to the MoveEvent records; the table's rows to
numbers recomputed from the records."""

import json
import pathlib
import re
import threading

import numpy as np
import pytest

import strideweave as sw
from extension_for_tests import D, L, TIMEOUT, Pair

F32 = D.Float32
POOL = 1 << 16  # 256 KiB of Float32: a pool job


def cpu_tensor(n):
    t = sw.Tensor(sw.CPU(n, dtype=F32), 0, L([n], [1]))
    np.from_dlpack(t)[:] = 1.5
    return t


def some_moves():
    """Sync (inline) and async (pool) moves both ways, one strided view, and
    two dispatched operations; returns the byte counts expected per move."""
    sw.move(cpu_tensor(16), sw.FileBacked())                      # inline, 64 B
    h = sw.move_async(cpu_tensor(POOL), sw.FileBacked())          # pool
    on_file = h.wait()
    sw.move(on_file, sw.CPU(POOL))                                # pool, back
    view = sw.Tensor(sw.CPU(64), 3, L([4, 5], [2, 12]))           # span 55 slots
    sw.move(view, sw.FileBacked())
    x = sw.Tensor(sw.CPU(4), 0, L([4], [1]))
    sw.add(x, x)
    sw.add(x, x)
    return [64, POOL * 4, POOL * 4, 55 * 4]


def completes(p):
    return [e for e in p.move_events() if e.phase == "complete"]


def submits(p):
    return [e for e in p.move_events() if e.phase == "submit"]


# ---- MoveEvent.bytes --------------------------------------------------------------------


def test_move_event_bytes_is_what_each_move_copies():
    with sw.profile() as p:
        expected = some_moves()
    assert [e.bytes for e in submits(p)] == expected
    assert [e.bytes for e in completes(p)] == expected
    assert all(e.succeeded for e in completes(p))


def test_move_event_bytes_of_a_route_through_a_provider():
    p = Pair(gate=threading.Event())
    src = p.source([1.0, 2.0, 3.0])[0]
    with sw.profile() as prof:
        h = sw.move_async(src, p.B(0, dtype=F32))
        p.ab.gate.set()
        h.wait(TIMEOUT)
    assert [e.bytes for e in prof.move_events()] == [12, 12]


# ---- export_chrome_trace ------------------------------------------------------------------


def load_trace(p, tmp_path, name="trace.json"):
    path = tmp_path / name
    assert p.export_chrome_trace(path) is None
    with open(path) as f:
        doc = json.load(f)
    assert isinstance(doc["traceEvents"], list)
    return doc["traceEvents"]


def spans(trace, cat):
    return [e for e in trace if e.get("ph") == "X" and e.get("cat") == cat]


def test_trace_has_one_complete_span_per_move_from_submit_to_complete(tmp_path):
    with sw.profile() as p:
        expected = some_moves()
    trace = load_trace(p, tmp_path)
    moves = spans(trace, "move")
    assert len(moves) == len(expected) == len(completes(p))
    me = threading.get_ident()
    for span, done, sub, nbytes in zip(moves, completes(p), submits(p), expected):
        assert span["ph"] == "X" and span["tid"] == sub.thread_id == me
        assert isinstance(span["pid"], int) and span["pid"] > 0
        assert span["ts"] == pytest.approx(done.start_time_ns / 1e3, abs=1e-3)
        assert span["dur"] == pytest.approx(done.duration_ns / 1e3, abs=1e-3)
        # the span starts where submission started and ends at completion
        assert sub.start_time_ns == done.start_time_ns
        assert span["args"]["bytes"] == nbytes and span["args"]["succeeded"] is True
        assert span["args"]["move_id"] == done.move_id == sub.move_id
        assert span["args"]["completion_thread"] == done.thread_id
        assert span["name"] == (f"move {done.source_type.__qualname__} -> "
                                f"{done.destination_type.__qualname__}")
    # pool moves complete on the completion thread, inline ones here
    assert moves[0]["args"]["completion_thread"] == me
    assert moves[1]["args"]["completion_thread"] != me
    ops = spans(trace, "operation")
    assert [o["name"] for o in ops] == ["add (CPU)", "add (CPU)"]
    for o, e in zip(ops, p.events()):
        assert o["tid"] == e.thread_id and o["dur"] == pytest.approx(e.duration_ns / 1e3,
                                                                    abs=1e-3)
    assert all({"name", "ph", "pid", "tid"} <= set(e) for e in trace)


def test_trace_spans_from_several_threads_land_on_their_threads(tmp_path):
    n = 4
    results, errors = {}, []
    start = threading.Barrier(n)

    def worker(k):
        try:
            start.wait(TIMEOUT)
            with sw.profile() as p:
                sw.move(cpu_tensor(8 + k), sw.FileBacked())
                h = sw.move_async(cpu_tensor(POOL + k), sw.FileBacked())
                h.wait(TIMEOUT)
            results[k] = (threading.get_ident(), load_trace(p, tmp_path, f"t{k}.json"))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(TIMEOUT)
    assert errors == [] and len(results) == n
    tids = set()
    for k, (ident, trace) in results.items():
        moves = spans(trace, "move")
        assert [m["args"]["bytes"] for m in moves] == [(8 + k) * 4, (POOL + k) * 4]
        assert all(m["tid"] == ident for m in moves)
        tids.add(ident)
    assert len(tids) == n


def test_trace_keeps_a_failed_move_and_a_route_id(tmp_path):
    p = Pair(gate=threading.Event(), fail=OSError("gone"))
    src = p.source([1.0, 2.0])[0]
    with sw.profile() as prof:
        h = sw.move_async(src, p.B(0, dtype=F32))
        p.ab.gate.set()
        with pytest.raises(OSError):
            h.wait(TIMEOUT)
    (span,) = spans(load_trace(prof, tmp_path), "move")
    assert span["args"]["succeeded"] is False and span["args"]["route_id"] == p.ab_id
    assert span["name"] == f"move RemoteA -> RemoteB via {p.ab_id!r}"


def test_export_chrome_trace_arguments_and_timing(tmp_path):
    p = sw.profile()
    with p:
        with pytest.raises(RuntimeError, match="after"):
            p.export_chrome_trace(tmp_path / "early.json")
        with pytest.raises(RuntimeError, match="after"):
            p.table()
    assert not (tmp_path / "early.json").exists()
    with pytest.raises(TypeError):
        p.export_chrome_trace(3)
    with pytest.raises(FileNotFoundError):
        p.export_chrome_trace(tmp_path / "missing" / "t.json")
    p.export_chrome_trace(str(tmp_path / "s.json"))
    assert spans(json.loads(pathlib.Path(tmp_path / "s.json").read_text())["traceEvents"],
                 "move") == []


# ---- table() --------------------------------------------------------------------------------


def parse_table(text):
    lines = text.splitlines()
    assert set(lines[0]) <= {"-", " "} and lines[0] == lines[2] == lines[-1]
    header = re.split(r"\s{2,}", lines[1].strip())
    assert header == ["Name", "Count", "Total (us)", "Mean (us)", "Bytes", "GB/s"]
    rows = {}
    for line in lines[3:-1]:
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == 6, line
        rows[cells[0]] = cells[1:]
    return rows, [re.split(r"\s{2,}", line.strip())[0] for line in lines[3:-1]]


def test_table_rows_match_the_records():
    with sw.profile() as p:
        some_moves()
    rows, order = parse_table(p.table())
    kinds = {}
    for e in completes(p):
        name = f"move {e.source_type.__qualname__} -> {e.destination_type.__qualname__}"
        k = kinds.setdefault(name, [0, 0, 0])
        k[0] += 1
        k[1] += e.duration_ns
        k[2] += e.bytes
    for e in p.events():
        k = kinds.setdefault(f"{e.name} ({e.carrier_type.__qualname__})", [0, 0, None])
        k[0] += 1
        k[1] += e.duration_ns
    assert set(rows) == set(kinds) == {"move CPU -> FileBacked", "move FileBacked -> CPU",
                                       "add (CPU)"}
    for name, (count, total_ns, nbytes) in kinds.items():
        c, total, mean, b, gbs = rows[name]
        assert int(c) == count
        assert total == f"{total_ns / 1e3:.3f}" and mean == f"{total_ns / 1e3 / count:.3f}"
        if nbytes is None:
            assert b == "-" and gbs == "-"
        else:
            assert int(b) == nbytes and gbs == f"{nbytes / total_ns:.3f}"
    assert rows["move CPU -> FileBacked"][0] == "3"
    assert int(rows["move CPU -> FileBacked"][3]) == 64 + POOL * 4 + 220
    totals = [float(rows[n][1]) for n in order]
    assert totals == sorted(totals, reverse=True)


def test_table_counts_a_failed_move_without_its_bytes():
    p = Pair(gate=threading.Event(), fail=OSError("gone"))
    ok = Pair(names=("OkA", "OkB"))
    with sw.profile() as prof:
        h = sw.move_async(p.source([1.0, 2.0])[0], p.B(0, dtype=F32))
        p.ab.gate.set()
        with pytest.raises(OSError):
            h.wait(TIMEOUT)
        sw.move(ok.source([1.0, 2.0, 3.0])[0], ok.B(0, dtype=F32))
    rows, _ = parse_table(prof.table())
    failed = rows[f"move RemoteA -> RemoteB via {p.ab_id!r}"]
    assert failed[0] == "1" and failed[3] == "0"
    good = rows[f"move OkA -> OkB via {ok.ab_id!r}"]
    assert good[0] == "1" and good[3] == "12"


def test_table_of_an_empty_profiler_has_the_header_only():
    with sw.profile() as p:
        pass
    rows, order = parse_table(p.table())
    assert rows == {} and order == []
    assert isinstance(p.table(), str) and "GB/s" in p.table()


def test_table_and_trace_are_documented():
    assert "GB/s" in sw.Profiler.table.__doc__
    assert "traceEvents" in sw.Profiler.export_chrome_trace.__doc__
