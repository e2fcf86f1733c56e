"""Evictable (contract-carriers E-1 .. E-10): two owned tiers, evict/promote
as moves, failure atomicity, release and collection, factories."""

import gc
import struct
import threading

import numpy as np
import pytest

import strideweave as sw
from loop_device import loop_device  # noqa: F401
from measure import settled_live_bytes
from strideweave import CPU, FileBacked, Evictable, Generic, _C
from strideweave.carriers.extension import (
    CarrierDefinition,
    StorageProvider,
    TransferProvider,
    TransferRoute,
    PreparedTransfer,
)

F, I32, B = sw.DType.Float32, sw.DType.Int32, sw.DType.Bool


def flat(carrier, n=None):
    n = carrier.size() if n is None else n
    return sw.Tensor(carrier, 0, sw.Layout(sw.Shape(n), sw.Stride(1)))


def cpu_values(values, dtype=F):
    c = CPU(len(values), dtype=dtype)
    for i, v in enumerate(values):
        c[i] = v
    return c


def state(e):
    return (e.is_evicted(), e.primary, e.secondary, e.version, e.primary.is_owned(),
            e.secondary.is_owned(), e.primary.is_released(), e.secondary.is_released())


# ---- E-1 construction checks, in order -----------------------------------------


def test_e1_promoted_and_owns_both_tiers():
    p, s = cpu_values([1.0, 2.0, 3.0]), FileBacked()
    e = Evictable(p, s)
    assert not e.is_evicted()
    assert e.primary is p and e.secondary is s
    assert p.is_owned() and s.is_owned() and not e.is_owned()
    assert isinstance(e, sw.DependentCarrier)


@pytest.mark.parametrize("args, which", [((1, CPU(2)), "primary"), ((CPU(2), "x"), "secondary")])
def test_e1_check1_not_a_carrier(args, which):
    with pytest.raises(TypeError, match=which):
        Evictable(*args)


def test_e1_check1_primary_before_secondary():
    with pytest.raises(TypeError, match="primary"):
        Evictable(1, 2)


def test_e1_check2_block_device_carrier_tier(loop_device):
    # E-1 check 2 with a real BlockDeviceCarrier, before checks 3-7 (the
    # same object in both positions, a released one): TypeError, nothing
    # claimed.
    dev = sw.BlockDevice(loop_device)
    b = dev.allocate(2)
    c = CPU(2)
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        Evictable(b, c)
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        Evictable(c, b)
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        Evictable(b, b)
    b.release()
    with pytest.raises(TypeError, match="BlockDeviceCarrier"):
        Evictable(c, b)
    assert not b.is_owned() and not c.is_owned() and not c.is_released()
    del b
    gc.collect()
    dev.close()


def test_e1_check3_same_object():
    c = CPU(2)
    with pytest.raises(ValueError):
        Evictable(c, c)
    assert not c.is_owned()


def test_e1_check4_released_tier_primary_first():
    p, s = CPU(2), CPU(2)
    p.release()
    s.release()
    with pytest.raises(RuntimeError, match="primary"):
        Evictable(p, s)
    s2 = CPU(2)
    s2.release()
    with pytest.raises(RuntimeError, match="secondary"):
        Evictable(CPU(2), s2)


def test_e1_check5_owned_tier():
    p, s = CPU(2), CPU(2)
    Evictable(p, s)  # claims both; the wrapper lives in a temporary
    gc.collect()
    other = CPU(2)
    token = other._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        Evictable(CPU(2), other)
    with pytest.raises(RuntimeError, match="owned"):
        Evictable(other, CPU(2))
    other._relinquish_ownership(token)


def test_e1_check5_before_check6():
    other = CPU(2, dtype=I32)
    token = other._claim_ownership()
    with pytest.raises(RuntimeError):
        Evictable(CPU(2), other)  # owned wins over the dtype mismatch
    other._relinquish_ownership(token)


def test_e1_check6_dtypes_differ():
    p, s = CPU(2), FileBacked(dtype=I32)
    with pytest.raises(TypeError, match="dtype"):
        Evictable(p, s)
    assert not p.is_owned() and not s.is_owned()


def test_e1_check7_secondary_not_mutable():
    p, s = CPU(2), CPU(2, mutable=False)
    with pytest.raises(RuntimeError, match="not mutable"):
        Evictable(p, s)
    assert not p.is_owned() and not s.is_owned()


def test_e1_immutable_primary_is_fine_and_captured():
    p, s = CPU(2, mutable=False), CPU(2)
    e = Evictable(p, s)
    assert e.is_mutable() is False and e._is_mutable() is False
    with pytest.raises(RuntimeError):
        e[0] = 1.0


def test_e1_check8_empty_primary():
    p, s = CPU(0), FileBacked()
    with pytest.raises(ValueError, match="empty"):
        Evictable(p, s)
    assert not p.is_owned() and not s.is_owned()


def test_c18_evictable_is_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Sub(Evictable):  # noqa: F841
            pass


# ---- E-10 movement edges (definition-backed tiers) ------------------------------


def _bytes_storage():
    return StorageProvider(
        lambda c, d: d is F,
        lambda c: len(c.buf) // 4,
        lambda c, n: setattr(c, "buf", bytearray(4 * n)),
        lambda c: setattr(c, "buf", None),
        lambda c, i: struct.unpack_from("<f", c.buf, 4 * i)[0],
        lambda c, i, v: struct.pack_into("<f", c.buf, 4 * i, v),
    )


def _copy_route(src, dst, rid):
    def prepare(req):
        s, d, n = req.tensor.carrier, req.destination, req.physical_span

        def submit():
            for i in range(n):
                d[i] = s[req.tensor.offset + i]
        return PreparedTransfer(submit)
    return TransferRoute(src, dst, rid, TransferProvider(prepare))


def test_e10_definition_backed_tier_without_routes_refused_before_any_claim():
    class Bytes(sw.Carrier):
        pass
    sw.register_carrier_definition(Bytes, CarrierDefinition(_bytes_storage()))
    b = Bytes(4, dtype=F)
    s = CPU(4)
    with pytest.raises(NotImplementedError, match="Bytes"):
        Evictable(b, s)
    with pytest.raises(NotImplementedError, match="Bytes"):
        Evictable(s, b)
    assert not b.is_owned() and not s.is_owned()


def test_e10_two_defined_tiers_with_routes_both_ways_evict_and_promote():
    class Near(sw.Carrier):
        pass

    class Far(sw.Carrier):
        pass
    sw.register_carrier_definition(
        Near, CarrierDefinition(_bytes_storage(), transfers=[_copy_route(Near, Far, "n-f")]))
    sw.register_carrier_definition(
        Far, CarrierDefinition(_bytes_storage(), transfers=[_copy_route(Far, Near, "f-n")]))
    near = Near(3, dtype=F)
    for i in range(3):
        near[i] = i + 0.5
    e = Evictable(near, Far(0, dtype=F))
    e.evict()
    assert e.is_evicted() and type(e.secondary) is Far and e.secondary.size() == 3
    e.promote()
    assert [e[i] for i in range(3)] == [0.5, 1.5, 2.5]
    assert type(e.primary) is Near and e.primary is not near and near.is_released()


def test_e10_definition_free_pairs_always_usable():
    e = Evictable(Generic([1.0, 2.0]), CPU(2))  # elementwise fallback both ways
    e.evict()
    e.promote()
    assert [e[0], e[1]] == [1.0, 2.0]


# ---- E-2 / E-3 introspection and access ----------------------------------------


def test_e2_introspection():
    p = cpu_values([1, 2, 3, 4], dtype=I32)
    e = Evictable(p, FileBacked(dtype=I32))
    assert e.size() == 4 and e.dtype() is I32 and e.is_mutable() is True
    e.evict()
    assert e.size() == 4 and e.dtype() is I32


def test_e3_promoted_access_goes_to_primary_and_advances_wrapper_version():
    p = cpu_values([1.0, 2.0])
    e = Evictable(p, CPU(2))
    assert e.version == 0
    e[1] = 7.0
    e.set_value(0, 5)
    assert (e[0], e.get_value(1)) == (5.0, 7.0)
    assert (p[0], p[1]) == (5.0, 7.0)  # the alias still reads
    assert e.version == 2


def test_e3_retained_aliases_are_owned():
    p, s = cpu_values([1.0, 2.0]), CPU(2)
    e = Evictable(p, s)
    for alias in (p, s):
        assert alias.is_owned() and alias.is_mutable() is False
        with pytest.raises(RuntimeError, match="owned"):
            alias[0] = 3.0
        with pytest.raises(RuntimeError, match="owned"):
            alias.release()
    with pytest.raises(RuntimeError, match="owned"):
        sw.move(flat(p), CPU(2))
    assert e[0] == 1.0 and not p.is_released()


def test_e3_evicted_access_fails_mentioning_promote():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    t = flat(e)
    e.evict()
    for read in (lambda: e[0], lambda: e.get_value(0), lambda: t[0], lambda: t.tolist()):
        with pytest.raises(RuntimeError, match=r"promote\(\)"):
            read()
    with pytest.raises(RuntimeError, match=r"promote\(\)"):
        e[0] = 1.0
    with pytest.raises(RuntimeError, match=r"promote\(\)"):
        t[1] = 1.0
    assert e.version == 0
    # metadata stays available
    assert e.size() == 2 and e.dtype() is F and e.is_evicted()


def test_e3_evicted_check_comes_before_the_index_range():
    e = Evictable(cpu_values([1.0]), FileBacked())
    e.evict()
    with pytest.raises(RuntimeError, match=r"promote\(\)"):
        e[99]


# ---- E-4 transitions ----------------------------------------------------------


def test_e4_evict_then_promote_keeps_values():
    vals = [float(i) for i in range(10)]
    p = cpu_values(vals)
    e = Evictable(p, FileBacked())
    e.evict()
    assert e.is_evicted()
    assert p.is_released() and e.primary is p  # the released prototype stays
    assert type(e.secondary) is FileBacked and e.secondary.size() == 10
    e.promote()
    assert not e.is_evicted()
    assert [e[i] for i in range(10)] == vals
    assert type(e.primary) is CPU and e.primary is not p
    assert e.primary.is_owned() and e.secondary.is_released()
    assert not p.is_owned()  # the replaced tier was relinquished


def test_e4_big_enough_live_target_is_reused():
    p, s = cpu_values([1.0, 2.0, 3.0]), CPU(5)
    e = Evictable(p, s)
    e.evict()
    assert e.secondary is s and s.is_owned()
    assert [s[i] for i in range(3)] == [1.0, 2.0, 3.0]


def test_e4_too_small_target_is_replaced_and_released():
    p, s = cpu_values([1.0, 2.0, 3.0]), CPU(2)
    e = Evictable(p, s)
    e.evict()
    assert e.secondary is not s and e.secondary.size() == 3
    assert s.is_released() and not s.is_owned()


def test_e4_repeated_transitions_are_no_ops():
    e = Evictable(cpu_values([1.0]), FileBacked())
    e.promote()
    before = state(e)
    e.promote()
    assert state(e) == before
    e.evict()
    sec = e.secondary
    e.evict()
    assert e.secondary is sec and e.is_evicted()


def test_e4_owned_hierarchy_without_owner_access_refuses():
    e = Evictable(cpu_values([1.0]), FileBacked())
    token = e._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        e.evict()
    assert not e.is_evicted()
    e._begin_owner_access(token)
    e.evict()
    e.promote()
    e._end_owner_access(token)
    e._relinquish_ownership(token)
    assert e[0] == 1.0


def test_e4_released_hierarchy_refuses():
    e = Evictable(cpu_values([1.0]), FileBacked())
    e.release()
    for op in (e.evict, e.promote):
        with pytest.raises(RuntimeError, match="released"):
            op()


def test_e4_transitions_record_no_move_events():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    with sw.profile() as prof:
        e.evict()
        e.promote()
    assert prof.move_events() == ()


def test_e4_transitions_record_no_autograd_node():
    x = sw.Tensor(Evictable(cpu_values([1.0, 2.0]), CPU(2)), 0,
                  sw.Layout(sw.Shape(2), sw.Stride(1)))
    x.carrier.evict()
    x.carrier.promote()
    assert x.autograd_ctx is None


# ---- E-5 failure atomicity ------------------------------------------------------

N = 1 << 20  # 4 MiB: big enough for the worker pool


def _big():
    p = CPU(N)
    np.from_dlpack(flat(p))[:] = np.arange(N, dtype=np.float32)
    return p


@pytest.mark.parametrize("n", [8, N])
def test_e5_failing_copy_changes_nothing_and_is_retryable(n):
    if not _C._fault_injection_enabled():
        pytest.skip("needs the fault-injection build (make test builds it)")
    p = _big() if n == N else cpu_values([float(i) for i in range(n)])
    e = Evictable(p, FileBacked())
    e[3] = -3.0
    before = state(e)
    _C._fault_inject("pwrite", 0, 1)
    with pytest.raises(OSError):
        e.evict()
    _C._fault_clear()
    assert state(e) == before
    assert e[3] == -3.0 and e[n - 1] == float(n - 1)
    e.evict()
    e.promote()
    assert e[3] == -3.0 and e[n - 1] == float(n - 1) and e.version == before[3]


def test_e5_failing_allocation_changes_nothing_and_is_retryable():
    if not _C._fault_injection_enabled():
        pytest.skip("needs the fault-injection build (make test builds it)")
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e.evict()
    before = state(e)
    _C._fault_inject("alloc", 0, 1)
    with pytest.raises(MemoryError):
        e.promote()  # the fresh CPU primary cannot be allocated
    _C._fault_clear()
    assert state(e) == before
    e.promote()
    assert [e[0], e[1]] == [1.0, 2.0]


def test_e5_failing_python_copy_disposes_the_temporary():
    made = []

    class Flaky(sw.MoveOperation):
        def _copy(self, tensor, destination, output, element_count):
            made.append(destination)
            raise OSError("tier offline")

    p = Generic([1.0, 2.0])
    e = Evictable(p, CPU(1))  # too small: a fresh CPU is allocated per attempt
    before = state(e)
    with sw.carriers.move.registered_move_operation(Generic, CPU, Flaky):
        with pytest.raises(OSError, match="tier offline"):
            e.evict()
    assert state(e) == before
    assert made and made[0].is_released()  # the temporary destination went away
    e.evict()
    assert e.is_evicted() and e.secondary.size() == 2


# ---- E-6 / E-7 ---------------------------------------------------------------------


def test_e6_transitions_keep_the_version():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e[0] = 3.0
    e.evict()
    e.promote()
    e.evict()
    assert e.version == 1


def test_e7_dlpack_refused_in_both_states():
    e = Evictable(cpu_values([1.0, 2.0]), CPU(2))
    t = flat(e)
    for _ in range(2):
        with pytest.raises(BufferError, match="Evictable"):
            t.__dlpack__()
        with pytest.raises(BufferError, match="Evictable"):
            np.from_dlpack(t)
        e.evict()


# ---- E-8 release and collection -------------------------------------------------


def test_e8_release_releases_both_tiers_and_is_idempotent():
    p, s = cpu_values([1.0]), FileBacked()
    e = Evictable(p, s)
    assert e.release() is None
    assert e.is_released() and e.size() == 0
    assert p.is_released() and s.is_released()
    assert not p.is_owned() and not s.is_owned()
    e.release()
    for op in (e.evict, e.promote, lambda: e[0]):
        with pytest.raises(RuntimeError):
            op()
    assert e.dtype() is F


def test_e8_release_of_an_owned_hierarchy_refuses():
    p = cpu_values([1.0])
    e = Evictable(p, FileBacked())
    token = e._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        e.release()
    assert not e.is_released() and not p.is_released()
    e._relinquish_ownership(token)


def test_e8_collection_only_relinquishes():
    p, s = cpu_values([4.0]), CPU(1)
    Evictable(p, s)
    gc.collect()
    assert not p.is_owned() and not s.is_owned()
    assert not p.is_released() and p.is_mutable()
    p[0] = 5.0
    assert p[0] == 5.0


def test_e8_moving_an_evictable_tensor_releases_the_hierarchy():
    p = cpu_values([1.0, 2.0, 3.0])
    e = Evictable(p, FileBacked())
    out = sw.move(flat(e), CPU(3))
    assert out.tolist() == [1.0, 2.0, 3.0]
    assert e.is_released() and p.is_released() and not p.is_owned()


def test_e10_moving_an_evicted_evictable_fails_and_keeps_it():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e.evict()
    with pytest.raises(RuntimeError, match=r"promote\(\)"):
        sw.move(flat(e), CPU(2))
    assert not e.is_released() and e.is_evicted()
    e.promote()
    assert e[1] == 2.0


def test_moving_into_an_evictable_writes_the_primary():
    e = Evictable(CPU(3), FileBacked())
    src = flat(cpu_values([7.0, 8.0, 9.0]))
    out = sw.move(src, e)
    assert out.carrier is e and out.tolist() == [7.0, 8.0, 9.0]
    assert e.version == 0  # a move is not an in-place write
    e.evict()
    e.promote()
    assert out.tolist() == [7.0, 8.0, 9.0]


# ---- E-9 factories ---------------------------------------------------------------


def test_e9_new_like_is_a_promoted_evictable_of_the_same_tier_classes():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e.evict()
    n = e.new_like([5, 6, 7], mutable=False)
    assert type(n) is Evictable and not n.is_evicted()
    assert type(n.primary) is CPU and type(n.secondary) is FileBacked
    assert n.size() == 3 and [n[i] for i in range(3)] == [5.0, 6.0, 7.0]
    assert n.secondary.size() == 0 and n.is_mutable() is False and n.version == 0


def test_e9_allocate_like_after_release():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e.release()
    a = e.allocate_like(4, dtype=I32)
    assert type(a) is Evictable and a.size() == 4 and a.dtype() is I32
    assert [a[i] for i in range(4)] == [0, 0, 0, 0]


def test_e9_dtype_unsupported_by_a_tier_fails_with_that_tiers_error():
    e = Evictable(cpu_values([1.0]), FileBacked())
    with pytest.raises(ValueError, match="FileBacked"):
        e.new_like([True], dtype=B)
    with pytest.raises(TypeError):
        e.allocate_like(2, dtype="Float32")


def test_supports_storage_dtype_is_the_tiers_intersection():
    e = Evictable(cpu_values([1.0]), FileBacked())
    assert e.supports_storage_dtype(F) and e.supports_storage_dtype(I32)
    assert not e.supports_storage_dtype(B)  # CPU could, FileBacked cannot
    e.release()
    assert e.supports_storage_dtype(F)


# ---- threads ------------------------------------------------------------------------


def test_transitions_from_many_threads_keep_the_values():
    es = [Evictable(cpu_values([float(i), float(i + 1)]), FileBacked()) for i in range(16)]
    errors = []

    def churn(e):
        try:
            for _ in range(5):
                e.evict()
                e.promote()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(e,)) for e in es]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [(e[0], e[1]) for e in es] == [(float(i), float(i + 1)) for i in range(16)]


# ---- audit: E-1 check order, every failure leaves both tiers as they were -------


def _routeless_definition_backed(n):
    class Bytes(sw.Carrier):
        pass
    sw.register_carrier_definition(Bytes, CarrierDefinition(_bytes_storage()))
    return Bytes(n, dtype=F)


def _owned(c):
    c._claim_ownership()
    return c


def _released(c):
    c.release()
    return c


def _e1_cases():
    # (name, build() -> (primary, secondary), exception, message fragment);
    # each case also fails a later check, so it shows which check runs first
    return [
        ("1-primary-before-secondary", lambda: (1, "x"), TypeError, "primary"),
        ("1-secondary", lambda: (cpu_values([1.0]), "x"), TypeError, "secondary"),
        ("3-before-4", lambda: (lambda c: (c, c))(_released(CPU(2))), ValueError, "different"),
        ("4-primary-before-secondary",
         lambda: (_released(CPU(2)), _released(CPU(2))), RuntimeError, "primary"),
        ("4-before-5", lambda: (_released(CPU(2)), _owned(CPU(2))), RuntimeError, "released"),
        ("4-secondary", lambda: (cpu_values([1.0]), _released(CPU(2))), RuntimeError,
         "secondary"),
        ("5-primary-before-secondary", lambda: (_owned(CPU(2)), _owned(CPU(2))),
         RuntimeError, "primary"),
        ("5-before-6", lambda: (cpu_values([1.0]), _owned(CPU(2, dtype=I32))),
         RuntimeError, "owned"),
        ("6-before-7", lambda: (cpu_values([1.0]), CPU(2, dtype=I32, mutable=False)),
         TypeError, "dtype"),
        ("7-before-8", lambda: (CPU(0), CPU(2, mutable=False)), RuntimeError, "not mutable"),
        ("8-before-9", lambda: (CPU(0), _routeless_definition_backed(2)), ValueError, "empty"),
        ("9-primary-edge", lambda: (_routeless_definition_backed(2), CPU(2)),
         NotImplementedError, "Bytes"),
    ]


@pytest.mark.parametrize("case", _e1_cases(), ids=lambda c: c[0])
def test_e1_check_order_and_no_claim_on_failure(case):
    _, build, exc, fragment = case
    p, s = build()
    tiers = [t for t in (p, s) if isinstance(t, sw.Carrier)]
    before = [(t.is_owned(), t.is_released(), t.version) for t in tiers]
    with pytest.raises(exc, match=fragment):
        Evictable(p, s)
    assert [(t.is_owned(), t.is_released(), t.version) for t in tiers] == before
    for t in tiers:  # a tier that was free before is still claimable
        if not t.is_owned() and not t.is_released():
            t._relinquish_ownership(t._claim_ownership())


def test_e1_block_device_tier_comes_after_the_carrier_check(loop_device):
    # E-1 check 1 for both tiers runs before check 2
    dev = sw.BlockDevice(loop_device)
    b = dev.allocate(2)
    with pytest.raises(TypeError, match="secondary must be a Carrier"):
        Evictable(b, 1)
    assert not b.is_owned()
    del b
    gc.collect()
    dev.close()


# ---- audit: E-4 / E-5 -------------------------------------------------------------


def test_e4_captured_mutability_survives_transitions():
    e = Evictable(CPU(2, mutable=False), CPU(2))
    e.evict()
    e.promote()
    assert e.is_mutable() is False and e._is_mutable() is False
    assert e.primary.is_owned()
    with pytest.raises(RuntimeError):
        e[0] = 1.0
    assert e.version == 0


def _session_files():
    probe = FileBacked()
    directory = probe.path.parent
    probe.release()
    return {p.name for p in directory.iterdir()}


@pytest.mark.parametrize("site, exc", [("alloc", MemoryError), ("open", OSError),
                                       ("truncate", OSError)])
def test_e5_failing_secondary_allocation_on_evict(site, exc):
    if not _C._fault_injection_enabled():
        pytest.skip("needs the fault-injection build (make test builds it)")
    e = Evictable(cpu_values([1.0, 2.0, 3.0]), FileBacked())  # the empty secondary is replaced
    e[1] = -2.0
    before, files = state(e), _session_files()
    _C._fault_inject(site, 0, 1)
    try:
        with pytest.raises(exc):
            e.evict()
    finally:
        _C._fault_clear()
    assert state(e) == before and e.secondary.size() == 0
    assert [e[i] for i in range(3)] == [1.0, -2.0, 3.0]
    assert _session_files() == files  # no temporary file left behind
    e.evict()
    e.promote()
    assert [e[i] for i in range(3)] == [1.0, -2.0, 3.0] and e.version == before[3]


def test_e5_failing_copy_on_promote_disposes_the_fresh_primary():
    if not _C._fault_injection_enabled():
        pytest.skip("needs the fault-injection build (make test builds it)")
    e = Evictable(cpu_values([float(i) for i in range(64)]), FileBacked())
    e.evict()
    live = settled_live_bytes()
    before = state(e)
    _C._fault_inject("pread", 0, 1)
    try:
        with pytest.raises(OSError):
            e.promote()
    finally:
        _C._fault_clear()
    gc.collect()
    assert state(e) == before and e.is_evicted()
    assert _C._live_bytes() == live  # the fresh CPU primary was freed
    e.promote()
    assert [e[i] for i in range(64)] == [float(i) for i in range(64)]


# ---- audit: E-7 DLPack in both residencies ------------------------------------------


def test_e7_every_dlpack_entry_point_refuses_in_both_states():
    torch = pytest.importorskip("torch")
    e = Evictable(cpu_values([1.0, 2.0]), CPU(2))
    t = flat(e)
    for _ in range(2):
        before = state(e)
        for call in (t.__dlpack_device__, t.__dlpack__, e.dlpack_info,
                     lambda: np.from_dlpack(t), lambda: torch.from_dlpack(t)):
            with pytest.raises(BufferError, match="Evictable"):
                call()
        assert state(e) == before
        e.evict()


# ---- audit: E-8 release and collection ----------------------------------------------


def test_e8_release_under_owner_access():
    p = cpu_values([1.0])
    e = Evictable(p, FileBacked())
    token = e._claim_ownership()
    e._begin_owner_access(token)
    assert e.release() is None
    e._end_owner_access(token)
    assert e.is_released() and p.is_released() and not p.is_owned()
    e._relinquish_ownership(token)


def test_e8_collection_restores_intrinsic_mutability_only():
    p, s = CPU(2, mutable=False), CPU(2)
    Evictable(p, s)
    gc.collect()
    assert not p.is_owned() and not s.is_owned()
    assert p.is_mutable() is False and s.is_mutable() is True
    assert not p.is_released() and not s.is_released()


def test_e8_collection_of_an_evicted_hierarchy_leaves_the_secondary_readable():
    p = cpu_values([3.0, 4.0])
    e = Evictable(p, CPU(2))
    e.evict()
    s = e.secondary
    del e
    gc.collect()
    assert p.is_released() and not p.is_owned()  # the move released it
    assert not s.is_owned() and not s.is_released() and s.is_mutable()
    assert [s[0], s[1]] == [3.0, 4.0]


def test_e8_released_hierarchy_refuses_access_and_factories_still_work():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    e.release()
    for op in (lambda: e[0], lambda: e.get_value(0), lambda: e.set_value(0, 1.0),
               e.evict, e.promote):
        with pytest.raises(RuntimeError):
            op()
    n = e.new_like([9.0])
    assert type(n) is Evictable and n[0] == 9.0 and e.version == 0


# ---- audit: E-9 factories -------------------------------------------------------------


def test_e9_new_hierarchy_owns_fresh_tiers():
    e = Evictable(cpu_values([1.0, 2.0]), FileBacked())
    a = e.allocate_like(3, mutable=False)
    assert a.primary is not e.primary and a.secondary is not e.secondary
    assert a.primary.is_owned() and a.secondary.is_owned() and not a.is_owned()
    assert a.secondary.size() == 0 and a.is_mutable() is False
    assert [a[i] for i in range(3)] == [0.0, 0.0, 0.0]
    a.evict()
    assert a.secondary.size() == 3 and a.secondary.is_owned()
    a.promote()
    assert a.secondary.is_released() and [a[i] for i in range(3)] == [0.0, 0.0, 0.0]


def test_e9_primary_tier_error_and_empty_results():
    fb = FileBacked()
    fb._allocate(2)
    e = Evictable(fb, CPU(2))
    with pytest.raises(ValueError, match="FileBacked"):
        e.allocate_like(2, dtype=B)  # the primary's own refusal
    with pytest.raises(TypeError):
        e.new_like(5)
    gc.collect()
    live = _C._live_bytes()
    for make in (lambda: e.new_like([]), lambda: e.allocate_like(0)):
        with pytest.raises(ValueError, match="empty"):  # E-1 check 8 on the result
            make()
    gc.collect()
    assert _C._live_bytes() == live  # the fresh tiers were released
    assert not e.primary.is_released() and e.primary.is_owned()


# ---- audit: base rules on Evictable (C-5, C-17) -------------------------------------------


def test_c5_evicted_refusal_comes_before_every_argument_check():
    e = Evictable(cpu_values([1.0]), FileBacked())
    e.evict()
    for write in (lambda: e.__setitem__("0", "x"), lambda: e.set_value(99, 1.0)):
        with pytest.raises(RuntimeError, match=r"promote\(\)"):
            write()
    e.promote()
    with pytest.raises(TypeError):
        e["0"] = 1.0
    with pytest.raises(IndexError):
        e[5] = "x"
    assert e.version == 0 and e[0] == 1.0


def test_c17_scatter_is_not_implemented():
    e = Evictable(cpu_values([1.0]), CPU(1))
    with pytest.raises(NotImplementedError):
        e.scatter(e, e, None)
    assert e[0] == 1.0


def _metal_or_skip(n):
    try:
        return sw.Metal(n)
    except RuntimeError as e:  # no MPS device on this host
        pytest.skip(f"needs a Metal (MPS) device: {e}")


def test_e10_metal_tier_needs_registered_edges_both_ways():
    m = _metal_or_skip(2)
    g = Generic([1.0, 2.0])
    for p, s in ((m, g), (g, m)):  # Generic<->Metal has only the elementwise fallback
        with pytest.raises(NotImplementedError, match="Metal"):
            Evictable(p, s)
    assert not m.is_owned() and not g.is_owned()
    m[1] = 4.0
    e = Evictable(m, CPU(2))  # CPU<->Metal are registered
    e.evict()
    e.promote()
    assert e[1] == 4.0 and type(e.primary) is sw.Metal
