"""Definition-owned transfer routes (contract-carriers X-9, X-14; seed "Move
dispatches on the exact carrier class pair", "Move registration is explicit,
validated, and process-global" (the definition-backed refusal), "Move routes
are exact and definition-owned", "Move participates in autograd across the
carrier boundary"; contract-autograd-profiling P-11 .. P-13 (`route_id`)).

Synchronous routes only; provider completions are in test_extension_async."""

import pytest

import strideweave as sw
from strideweave.carriers import extension as ext
from strideweave.carriers.move import (dispatch_move, register_move_operation,
                                       registered_move_operation,
                                       unregister_move_operation)
from extension_for_tests import (D, L, Pair, Transfer, cpu_tensor, define, filled,
                                 gapped, new_class, route, slot_values, state, values_of)

F32 = D.Float32
GAPPED = L([2, [3, 2]], [1, [2, 7]])  # hierarchical, with holes: cosize 13, size 12


class Copy(sw.MoveOperation):
    def _copy(self, tensor, destination, output, element_count):
        for i in range(tensor.size()):
            output[i] = tensor[i]


def span_of(c, offset, n):
    return [c[offset + i] for i in range(n)]


def assert_unchanged(before, *carriers):
    assert [state(c) for c in carriers] == before


def snapshot(*carriers):
    return [state(c) for c in carriers]


# ---- X-9 prepare and submit ---------------------------------------------------------------


def test_x9_select_a_declared_bulk_route():
    # Seed scenario "Select a registered bulk operation".
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    d = p.B(0, dtype=F32)
    sv = c.version
    p.sa.clear()
    r = sw.move(t, d)
    assert r.carrier is d and r.offset == 0 and r.layout == t.layout
    assert r.tolist() == [1.0, 2.0, 3.0]
    assert p.ab.prepare_count == 1 and p.ab.submit_count == 1
    assert p.ba.prepare_count == 0
    assert c.is_released() and p.sa.carriers("release") == [c]
    assert c.version == sv and d.version == 0  # a move is not an in-place mutation
    assert d.size() == 3 and d.is_mutable()
    assert p.sb.names("write") == []  # the bulk copy never wrote through the carrier API


def test_x8_framework_builds_the_request():
    p = Pair()
    t, c = p.source(None, layout=GAPPED, offset=2, extra=3)
    d = p.B(0, dtype=F32)
    seen = {}

    def prepare(request):
        seen["dst_size"] = request.destination.size()
        seen["grad"] = sw.is_grad_enabled()
        return ext.PreparedTransfer(lambda: None)

    p.ab.prepare_hook = prepare
    p.sb.clear()
    sw.move(t, d)
    (req,) = p.ab.requests
    assert type(req) is ext.TransferRequest
    assert req.tensor is t and req.destination is d
    assert req.source_class is p.A and req.destination_class is p.B
    assert req.dtype is t.dtype() and req.layout is t.layout
    assert req.physical_span == GAPPED.cosize == 13
    assert seen == {"dst_size": 0, "grad": False}  # prepared before growth, graph off
    assert p.sb.names("allocate") == [(13,)] and d.size() == 13  # grown to exactly cosize
    assert sw.is_grad_enabled() is True


def test_x9_the_whole_physical_span_arrives_holes_included():
    p = Pair()
    t, c = p.source(None, layout=GAPPED, offset=2, extra=3)
    span = span_of(c, 2, 13)
    expected = t.tolist()
    r = sw.move(t, p.B(0, dtype=F32))
    assert values_of(r.carrier) == span
    assert r.tolist() == expected and r.layout == GAPPED


def test_x9_large_enough_destination_is_not_grown():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = filled(p.B, [9.0] * 4)
    p.sb.clear()
    r = sw.move(t, d)
    assert p.sb.names("allocate") == [] and d.size() == 4
    assert values_of(d)[:2] == [1.0, 2.0] and r.tolist() == [1.0, 2.0]
    assert d.version == 4


@pytest.mark.parametrize("dtype", [D.Int32, D.Bool], ids=str)
def test_x9_route_for_each_dtype(dtype):
    p = Pair()
    values = slot_values(dtype, 5)
    t, c = p.source(values, dtype=dtype)
    r = sw.move(t, p.B(0, dtype=dtype))
    assert r.tolist() == values and r.dtype() is dtype and r.autograd_ctx is None
    assert p.ab.requests[0].dtype is dtype


def test_x9_submit_runs_once_on_the_calling_thread_with_transfer_access():
    import threading
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    d = p.B(3, dtype=F32)
    seen = {}

    def submit(request):
        src = request.tensor.carrier
        seen["read"] = [src[i] for i in range(3)]
        for i in range(3):
            request.destination[i] = src[i] * 2
        seen["dst"] = [request.destination[i] for i in range(3)]
        try:
            src[0] = 100.0
        except RuntimeError as e:
            seen["source_write"] = str(e)
        return None

    p.ab.submit_hook = submit
    r = sw.move(t, d)
    assert p.ab.submit_threads == [threading.get_ident()]
    assert p.ab.prepare_threads == [threading.get_ident()]
    assert seen["read"] == [1.0, 2.0, 3.0] and seen["dst"] == [2.0, 4.0, 6.0]
    assert "pending" in seen["source_write"]
    assert r.tolist() == [2.0, 4.0, 6.0]
    assert d.version == 0 and c.version == 6  # transfer writes advance no version


@pytest.mark.parametrize("result", [None, 42, "prepared", ext.Unsupported],
                         ids=["None", "int", "str", "class"])
def test_x9_prepare_returning_another_type_fails_type_error_before_submission(result):
    p = Pair(fallback=(True, True))
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    p.ab.prepare_hook = lambda request: result
    before = snapshot(c, d)
    p.sb.clear()
    with pytest.raises(TypeError):
        sw.move_async(t, d)
    assert p.ab.submit_count == 0
    assert_unchanged(before, c, d)
    assert p.sb.names("allocate") == [] and p.sb.names("write") == []


def test_x9_prepare_exception_is_terminal_no_other_route():
    p = Pair(fallback=(True, True))
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    err = LookupError("remote catalog offline")

    def prepare(request):
        raise err

    p.ab.prepare_hook = prepare
    before = snapshot(c, d)
    p.sb.clear()
    with pytest.raises(LookupError) as e:
        sw.move_async(t, d)
    assert e.value is err
    assert_unchanged(before, c, d)
    assert p.sb.names("allocate") == [] and p.sb.names("write") == []  # no fallback ran


@pytest.mark.parametrize("action", ["write source", "write destination", "release source",
                                    "release destination", "increment source version"])
def test_x9_prepare_that_changes_a_carrier_fails_runtime_error(action):
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = filled(p.B, [0.0, 0.0])

    def prepare(request):
        src, dst = request.tensor.carrier, request.destination
        if action == "write source":
            src[0] = 50.0
        elif action == "write destination":
            dst[0] = 50.0
        elif action == "release source":
            src.release()
        elif action == "release destination":
            dst.release()
        else:
            src._increment_version()
        return ext.PreparedTransfer(lambda: None)

    p.ab.prepare_hook = prepare
    with pytest.raises(RuntimeError):
        sw.move_async(t, d)
    assert p.ab.submit_count == 0
    if action != "release source":
        assert not c.is_released() and c.is_mutable()


def reclaiming_prepare(tokens):
    """A prepare() that gives up the destination's claim (the last of
    `tokens`) and takes a new one, appended to `tokens`."""
    def prepare(request):
        dst = request.destination
        dst._end_owner_access(tokens[-1])
        dst._relinquish_ownership(tokens[-1])
        tokens.append(dst._claim_ownership())
        dst._begin_owner_access(tokens[-1])
        return ext.PreparedTransfer(lambda: None)
    return prepare


def test_x9_prepare_that_reclaims_a_cpu_destination_fails_runtime_error():
    # A built-in destination keeps its claim in the core, which shows no
    # token: a prepare() that gives the claim up and takes a new one leaves
    # it owned as before, and only the claim count tells the difference.
    A = new_class("RemoteA")
    to_cpu = Transfer()
    define(A, routes=[route(A, sw.CPU, to_cpu, "remote-to-cpu")])
    c = filled(A, [4, 5], D.Int32)
    d = sw.CPU(2, dtype=D.Int32)
    token = d._claim_ownership()
    d._begin_owner_access(token)
    tokens = [token]

    to_cpu.prepare_hook = reclaiming_prepare(tokens)
    with pytest.raises(RuntimeError, match="changed a carrier"):
        sw.move_async(sw.Tensor(c, 0, L([2], [1])), d)
    assert d.is_owned() and not c.is_released() and d.version == 0
    d._end_owner_access(tokens[-1])
    d._relinquish_ownership(tokens[-1])


def test_x9_prepare_that_reclaims_a_definition_backed_destination_fails_runtime_error():
    # Every carrier keeps its claim in the core now, definition-backed ones
    # too: the same reclaim is caught for them.
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = filled(p.B, [0.0, 0.0])
    tokens = [d._claim_ownership()]
    d._begin_owner_access(tokens[-1])

    p.ab.prepare_hook = reclaiming_prepare(tokens)
    with pytest.raises(RuntimeError, match="changed a carrier"):
        sw.move_async(t, d)
    assert p.ab.submit_count == 0 and not c.is_released()
    d._end_owner_access(tokens[-1])
    d._relinquish_ownership(tokens[-1])


def test_x9_validation_precedes_prepare():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    cases = [
        (ValueError, filled(p.B, [0.0, 0.0])),          # too small, cannot allocate
        (RuntimeError, p.B(3, dtype=F32, mutable=False)),  # not publicly mutable
        (TypeError, p.B(3, dtype=D.Int32)),             # another dtype
        (ValueError, c),                                 # the tensor's own carrier
    ]
    released = p.B(3, dtype=F32)
    released.release()
    cases.append((RuntimeError, released))
    before = state(c)
    for exc, d in cases:
        with pytest.raises(exc):
            sw.move_async(t, d)
    assert p.ab.prepare_count == 0 and p.ab.submit_count == 0
    assert state(c) == before


# ---- X-14 resolution -------------------------------------------------------------------------


def test_x14_resolve_an_exact_custom_route_among_several():
    # Seed scenario "Resolve an exact custom route".
    A, B, C = new_class("RemoteA"), new_class("RemoteB"), new_class("RemoteC")
    ab, ac = Transfer(), Transfer()
    define(A, routes=[route(A, B, ab, "a-b"), route(A, C, ac, "a-c")])
    define(B)
    define(C)
    c = filled(A, [1, 2, 3], D.Int32)
    r = sw.move(sw.Tensor(c, 0, L([3], [1])), C(0, dtype=D.Int32))
    assert type(r.carrier) is C and r.tolist() == [1, 2, 3]
    assert ac.prepare_count == 1 and ab.prepare_count == 0


def test_x14_subclass_does_not_inherit_route_as_destination():
    # Seed scenarios "Do not inherit a registration", "Refuse inherited transfer support".
    p = Pair()
    SubB = new_class("RemoteSubB", base=p.B)
    sub_store = define(SubB)
    t, c = p.source([1.0, 2.0])
    d = SubB(0, dtype=F32)
    before = snapshot(c, d)
    sub_store.clear()
    with pytest.raises(NotImplementedError) as e:
        sw.move_async(t, d)
    assert "RemoteA" in str(e.value) and "RemoteSubB" in str(e.value)
    assert p.ab.prepare_count == 0
    assert_unchanged(before, c, d)
    assert sub_store.names("allocate") == []


def test_x14_subclass_does_not_inherit_route_as_source():
    p = Pair()
    SubA = new_class("RemoteSubA", base=p.A)
    define(SubA)
    c = filled(SubA, [1.0, 2.0])
    t = sw.Tensor(c, 0, L([2], [1]))
    d = p.B(0, dtype=F32)
    before = snapshot(c, d)
    with pytest.raises(NotImplementedError) as e:
        sw.move_async(t, d)
    assert "RemoteSubA" in str(e.value) and "RemoteB" in str(e.value)
    assert p.ab.prepare_count == 0
    assert_unchanged(before, c, d)


def test_x14_subclass_pair_falls_back_instead_of_using_the_parent_route():
    p = Pair(fallback=(True, True))
    SubB = new_class("RemoteSubB", base=p.B)
    define(SubB, fallback=True)
    t, c = p.source([1.0, 2.0, 3.0])
    with sw.profile() as prof:
        r = sw.move(t, SubB(0, dtype=F32))
    assert r.tolist() == [1.0, 2.0, 3.0] and type(r.carrier) is SubB
    assert p.ab.prepare_count == 0
    assert {e.operation_type for e in prof.move_events()} == {sw.ElementwiseMoveOperation}


def test_x14_fall_back_for_an_unrouted_pair_when_both_permit():
    # Seed scenario "Fall back for an unregistered pair".
    p = Pair(routes=(), fallback=(True, True))
    t, c = p.source(None, layout=GAPPED, offset=1, extra=2)
    expected = t.tolist()
    d = p.B(0, dtype=F32)
    p.sb.clear()
    with sw.profile() as prof:
        r = sw.move(t, d)
    assert r.tolist() == expected and r.carrier is d and r.layout == GAPPED
    assert d.size() == GAPPED.cosize and p.sb.names("allocate") == [(GAPPED.cosize,)]
    assert c.is_released() and d.version == 0
    assert len(p.sb.names("write")) >= GAPPED.size  # elementwise: one write per value
    submit, complete = prof.move_events()
    assert submit.operation_type is sw.ElementwiseMoveOperation
    assert submit.route_id is None and complete.route_id is None
    assert complete.succeeded is True


@pytest.mark.parametrize("fallback", [(True, False), (False, True), (False, False)])
def test_x14_no_route_and_not_both_permitting_is_not_implemented(fallback):
    p = Pair(routes=("ba",), fallback=fallback)
    t, c = p.source([1, 2], dtype=D.Int32)
    d = p.B(0, dtype=D.Int32)
    before = snapshot(c, d)
    p.sb.clear()
    with sw.profile() as prof:
        with pytest.raises(NotImplementedError) as e:
            sw.move_async(t, d)
    assert "RemoteA" in str(e.value) and "RemoteB" in str(e.value)
    assert_unchanged(before, c, d)
    assert p.sb.names("allocate") == []
    assert prof.move_events() == ()  # rejected before submission: no record


def test_x14_unsupported_without_fallback_names_pair_and_reason():
    p = Pair(unsupported=lambda request: "this remote cannot reach that one")
    t, c = p.source([1, 2], dtype=D.Int32)
    d = p.B(0, dtype=D.Int32)
    before = snapshot(c, d)
    p.sb.clear()
    with pytest.raises(NotImplementedError) as e:
        sw.move_async(t, d)
    msg = str(e.value)
    assert "RemoteA" in msg and "RemoteB" in msg and "this remote cannot reach that one" in msg
    assert p.ab.prepare_count == 1 and p.ab.submit_count == 0
    assert_unchanged(before, c, d)
    assert p.sb.names("allocate") == []


def test_x14_unsupported_falls_back_when_both_permit():
    p = Pair(fallback=(True, True), unsupported=lambda request: "not today")
    t, c = p.source([1, 2, 3], dtype=D.Int32)
    with sw.profile() as prof:
        r = sw.move(t, p.B(0, dtype=D.Int32))
    assert r.tolist() == [1, 2, 3] and c.is_released()
    assert p.ab.prepare_count == 1 and p.ab.submit_count == 0
    submit, complete = prof.move_events()
    assert submit.operation_type is sw.ElementwiseMoveOperation and submit.route_id is None


def test_x14_unsupported_for_a_gapped_layout():
    # The provider that returns Unsupported for a gapped layout.
    p = Pair(unsupported=gapped)
    t, c = p.source([1, 2, 3, 4], dtype=D.Int32)
    assert sw.move(t, p.B(0, dtype=D.Int32)).tolist() == [1, 2, 3, 4]
    g, gc_ = p.source([5, 6], dtype=D.Int32, layout=L([2], [3]))
    d = p.B(0, dtype=D.Int32)
    before = snapshot(gc_, d)
    with pytest.raises(NotImplementedError, match="cannot transfer a gapped layout"):
        sw.move_async(g, d)
    assert_unchanged(before, gc_, d)
    assert p.ab.submit_count == 1  # only the contiguous move was submitted


@pytest.mark.parametrize("fallback", [True, False])
@pytest.mark.parametrize("kind", ["CPU", "Generic", "Python"])
def test_x14_definition_free_source_into_a_defined_destination(kind, fallback):
    B = new_class("RemoteB")
    store = define(B, fallback=fallback)
    if kind == "Python":
        class PySource(sw.Carrier):
            def __init__(self, values):
                self.values = list(values)

            def size(self):
                return len(self.values)

            def dtype(self):
                return D.Int32

            def get_value(self, i):
                return self.values[i]

        src = PySource([1, 2])
    elif kind == "CPU":
        src = sw.CPU(2, dtype=D.Int32)
    else:
        src = sw.Generic([1, 2], dtype=D.Int32)
    t = sw.Tensor(src, 0, L([2], [1]))
    d = B(0, dtype=D.Int32)
    before = snapshot(src, d)
    store.clear()
    with pytest.raises(NotImplementedError) as e:
        sw.move_async(t, d)
    assert type(src).__name__ in str(e.value) and "RemoteB" in str(e.value)
    assert_unchanged(before, src, d)
    assert store.names("allocate") == [] and store.names("write") == []


def test_x14_cpu_into_a_defined_destination_fails_in_every_mode():
    B = new_class("RemoteB")
    define(B, fallback=True)
    t = cpu_tensor([1.0, 2.0])
    for ctx in (sw.no_grad, sw.profile):
        with ctx():
            with pytest.raises(NotImplementedError):
                sw.move_async(t, B(0, dtype=F32))
    assert not t.carrier.is_released() and t.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("dst", ["CPU", "Generic"])
def test_x14_defined_source_to_definition_free_destination_without_route(dst):
    A = new_class("RemoteA")
    define(A, fallback=True)  # fallback needs a definition-backed destination too
    c = filled(A, [1, 2], D.Int32)
    t = sw.Tensor(c, 0, L([2], [1]))
    d = sw.CPU(2, dtype=D.Int32) if dst == "CPU" else sw.Generic([0, 0], dtype=D.Int32)
    before = snapshot(c, d)
    with pytest.raises(NotImplementedError) as e:
        sw.move_async(t, d)
    assert "RemoteA" in str(e.value) and dst in str(e.value)
    assert_unchanged(before, c, d)


def test_x14_defined_source_with_a_route_to_cpu():
    A = new_class("RemoteA")
    to_cpu = Transfer()
    define(A, routes=[route(A, sw.CPU, to_cpu, "remote-to-cpu")])
    c = filled(A, [4, 5, 6], D.Int32)
    d = sw.CPU(3, dtype=D.Int32)
    with sw.profile() as prof:
        r = sw.move(sw.Tensor(c, 0, L([3], [1])), d)
    assert r.carrier is d and r.tolist() == [4, 5, 6] and c.is_released()
    assert d.version == 0
    assert {e.route_id for e in prof.move_events()} == {"remote-to-cpu"}


def test_x14_differentiable_move_to_cpu_needs_the_impossible_reverse_route():
    # CPU -> definition-backed is never routable, so a Float32 move from a
    # definition-backed class to CPU cannot record a gradient path.
    A = new_class("RemoteA")
    to_cpu = Transfer()
    define(A, fallback=True, routes=[route(A, sw.CPU, to_cpu, "remote-to-cpu")])
    c = filled(A, [1.0, 2.0])
    t = sw.Tensor(c, 0, L([2], [1]))
    d = sw.CPU(2)
    before = snapshot(c, d)
    with pytest.raises(NotImplementedError):
        sw.move_async(t, d)
    assert to_cpu.prepare_count == 0
    assert_unchanged(before, c, d)
    with sw.no_grad():
        r = sw.move(t, d)
    assert r.tolist() == [1.0, 2.0] and r.autograd_ctx is None


def test_x14_both_definition_free_still_use_the_legacy_registry():
    with sw.profile() as prof:
        sw.move(cpu_tensor([1.0]), sw.FileBacked())
        sw.move(cpu_tensor([1.0]), sw.Generic([0.0]))
    ops = [(e.operation_type, e.route_id) for e in prof.move_events() if e.phase == "submit"]
    assert ops == [(sw.CpuToFileBackedMoveOperation, None), (sw.ElementwiseMoveOperation, None)]
    assert dispatch_move(sw.CPU, sw.FileBacked) is sw.CpuToFileBackedMoveOperation


# ---- legacy registry refusal for definition-backed classes --------------------------------------


LEGACY_CALLS = {
    "register_move_operation": lambda s, d: register_move_operation(s, d, Copy),
    "unregister_move_operation": lambda s, d: unregister_move_operation(s, d),
    "dispatch_move": lambda s, d: dispatch_move(s, d),
    "registered_move_operation": lambda s, d: registered_move_operation(s, d, Copy).__enter__(),
}


@pytest.mark.parametrize("position", ["source", "destination", "both"])
@pytest.mark.parametrize("api", list(LEGACY_CALLS))
def test_legacy_registry_refuses_definition_backed_classes(api, position):
    # Seed scenario "Reject registration for a defined carrier".
    p = Pair()
    pair = {"source": (p.A, sw.CPU), "destination": (sw.CPU, p.B), "both": (p.A, p.B)}[position]
    with pytest.raises(RuntimeError, match="TransferRoute"):
        LEGACY_CALLS[api](*pair)
    # nothing was registered for the pair, and the definition's route still governs
    with pytest.raises(RuntimeError, match="TransferRoute"):
        dispatch_move(*pair)
    t, c = p.source([1.0, 2.0])
    with sw.profile() as prof:
        r = sw.move(t, p.B(0, dtype=F32))
    assert r.tolist() == [1.0, 2.0] and p.ab.prepare_count == 1
    assert {(e.operation_type, e.route_id) for e in prof.move_events()} == {
        (ext.TransferRouteMoveOperation, p.ab_id)}


def test_legacy_refusal_comes_after_the_carrier_class_checks():
    p = Pair()
    with pytest.raises(TypeError):
        register_move_operation(p.A, int, Copy)
    with pytest.raises(TypeError):
        register_move_operation(3, p.B, Copy)
    with pytest.raises(TypeError):
        registered_move_operation(p.A, "CPU", Copy)


def test_legacy_refusal_scoped_block_does_not_register():
    p = Pair()
    cm = None
    with pytest.raises(RuntimeError, match="TransferRoute"):
        cm = registered_move_operation(p.A, p.B, Copy)
        with cm:
            raise AssertionError("entered a block for a definition-backed pair")
    # the definition-free legacy pairs are untouched
    assert dispatch_move(sw.FileBacked, sw.CPU) is sw.FileBackedToCpuMoveOperation


def test_legacy_registry_keeps_working_for_definition_free_pairs():
    A = new_class("LegacyA")
    with registered_move_operation(A, sw.CPU, Copy):
        assert dispatch_move(A, sw.CPU) is Copy
    assert dispatch_move(A, sw.CPU) is sw.ElementwiseMoveOperation


# ---- autograd across a definition route ---------------------------------------------------------


def test_autograd_move_attaches_one_transfer_route_node():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    r = sw.move(t, p.B(0, dtype=F32))
    node = r.autograd_ctx
    assert type(node) is ext.TransferRouteMoveOperation
    assert isinstance(node, sw.Operation)
    assert len(node.inputs()) == 1 and node.inputs()[0] is t
    assert node.input_versions() == (t._version_token(),)
    assert t.autograd_ctx is None
    assert p.ba.prepare_count == 0  # the reverse route is captured, not run


def test_autograd_reject_a_differentiable_one_way_route_early():
    # Seed scenario "Reject a differentiable one-way route early".
    p = Pair(routes=("ab",))
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    before = snapshot(c, d)
    p.sb.clear()
    with sw.profile() as prof:
        with pytest.raises(NotImplementedError) as e:
            sw.move_async(t, d)
    assert "RemoteB" in str(e.value) and "RemoteA" in str(e.value)
    assert p.ab.prepare_count == 0 and p.ab.submit_count == 0
    assert_unchanged(before, c, d)
    assert p.sb.names("allocate") == []
    assert prof.move_events() == ()
    with sw.no_grad():
        r = sw.move(t, d)
    assert r.tolist() == [1.0, 2.0] and r.autograd_ctx is None


def test_autograd_one_way_route_is_fine_for_non_differentiable_dtypes():
    p = Pair(routes=("ab",))
    t, c = p.source([1, 2], dtype=D.Int32)
    r = sw.move(t, p.B(0, dtype=D.Int32))
    assert r.tolist() == [1, 2] and r.autograd_ctx is None


def test_autograd_reverse_pair_permitted_by_fallback():
    p = Pair(routes=("ab",), fallback=(True, True))
    t, c = p.source([1.0, 2.0])
    r = sw.move(t, p.B(0, dtype=F32))
    (grad,) = r.autograd_ctx.backward(cpu_tensor([3.0, 4.0]))
    assert type(grad.carrier) is p.A and grad.tolist() == [3.0, 4.0]
    assert p.ba.prepare_count == 0


def test_autograd_backward_moves_the_gradient_back_through_the_reverse_route():
    # Seed scenario "Move a gradient back to the source carrier class".
    p = Pair()
    t, c = p.source(None, layout=GAPPED, offset=2, extra=1)
    r = sw.move(t, p.B(0, dtype=F32))
    g = cpu_tensor([0.5 * k for k in range(12)], sw.Layout.canonical(GAPPED.shape))
    with sw.profile() as prof:
        (grad,) = r.autograd_ctx.backward(g)
    assert type(grad.carrier) is p.A
    assert grad.carrier is not c and grad.carrier is not r.carrier
    assert grad.layout == GAPPED and grad.offset == 0 and grad.autograd_ctx is None
    assert grad.tolist() == [0.5 * k for k in range(12)]
    assert not g.carrier.is_released() and g.tolist() == [0.5 * k for k in range(12)]
    assert not r.carrier.is_released()  # the forward result is not consumed
    (req,) = p.ba.requests
    assert req.source_class is p.B and req.destination_class is p.A
    assert req.destination is grad.carrier and req.dtype is F32
    assert p.ba.grad_in_prepare == [False]
    events = prof.move_events()
    assert [(e.phase, e.source_type, e.destination_type, e.route_id) for e in events] == [
        ("submit", p.B, p.A, p.ba_id), ("complete", p.B, p.A, p.ba_id)]
    assert events[0].operation_type is ext.TransferRouteMoveOperation


def test_broadcast_view_moves_without_materializing():
    p = Pair()
    t, c = p.source(None, layout=L([2, 3], [1, 0]), offset=1, extra=1)  # cosize 2
    expected = t.tolist()
    d = p.B(0, dtype=F32)
    r = sw.move(t, d)
    assert d.size() == 2 and p.ab.requests[0].physical_span == 2
    assert r.layout == t.layout and r.tolist() == expected


def test_autograd_broadcast_source_gets_a_canonical_injective_gradient():
    p = Pair()
    t, c = p.source(None, layout=L([3], [0]))  # one slot seen three times
    r = sw.move(t, p.B(0, dtype=F32))
    (grad,) = r.autograd_ctx.backward(cpu_tensor([1.0, 2.0, 3.0]))
    assert type(grad.carrier) is p.A
    assert grad.layout == sw.Layout.canonical(t.layout.shape)
    assert grad.tolist() == [1.0, 2.0, 3.0]


def test_autograd_tensor_backward_reaches_the_source():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    r = sw.move(t, p.B(0, dtype=F32))
    r.backward(cpu_tensor([7.0, 8.0, 9.0]))
    assert type(t.grad.carrier) is p.A and t.grad.tolist() == [7.0, 8.0, 9.0]
    assert t.grad.autograd_ctx is None and t.grad.layout == t.layout


def test_autograd_cotangent_on_a_definition_backed_carrier():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    r = sw.move(t, p.B(0, dtype=F32))
    g = sw.Tensor(filled(p.B, [0.25, 0.5, 0.75]), 0, L([3], [1]))
    (grad,) = r.autograd_ctx.backward(g)
    assert type(grad.carrier) is p.A and grad.tolist() == [0.25, 0.5, 0.75]
    assert not g.carrier.is_released() and g.carrier.version == 3
    g.carrier.release()
    with pytest.raises(RuntimeError, match="released"):
        r.autograd_ctx.backward(g)


def test_autograd_backward_through_a_round_trip():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    there = sw.move(t, p.B(0, dtype=F32))
    back = sw.move(there, p.A(0, dtype=F32))
    assert type(back.autograd_ctx) is ext.TransferRouteMoveOperation
    back.backward(cpu_tensor([5.0, 6.0]))
    assert t.grad.tolist() == [5.0, 6.0] and type(t.grad.carrier) is p.A
    assert p.ab.prepare_count == 2 and p.ba.prepare_count == 2


def test_autograd_backward_refused_when_the_reverse_route_is_unsupported():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    r = sw.move(t, p.B(0, dtype=F32))
    p.ba.unsupported = lambda request: "gradients cannot travel back"
    with pytest.raises(NotImplementedError, match="gradients cannot travel back"):
        r.autograd_ctx.backward(cpu_tensor([1.0, 1.0]))
    assert t.grad is None


def test_autograd_backward_checks_the_cotangent():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    r = sw.move(t, p.B(0, dtype=F32))
    with pytest.raises(TypeError):
        r.autograd_ctx.backward([1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        r.autograd_ctx.backward(cpu_tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="injective"):
        r.autograd_ctx.backward(sw.Tensor(sw.CPU(1), 0, L([3], [0])))
    assert p.ba.prepare_count == 0


def test_autograd_no_node_without_graph_construction():
    p = Pair(routes=("ab",))
    t, c = p.source([1.0])
    with sw.no_grad():
        r = sw.move(t, p.B(0, dtype=F32))
    assert r.autograd_ctx is None


# ---- profiling ----------------------------------------------------------------------------------


def test_p13_route_move_events_carry_the_route_id():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    with sw.profile() as prof:
        h = sw.move_async(t, p.B(0, dtype=F32))
        h.wait()
        h.wait()
    submit, complete = prof.move_events()
    assert (submit.phase, complete.phase) == ("submit", "complete")
    for e in (submit, complete):
        assert e.operation_type is ext.TransferRouteMoveOperation
        assert e.route_id == p.ab_id and type(e.route_id) is str
        assert e.source_type is p.A and e.destination_type is p.B
    assert submit.move_id == complete.move_id and submit.request_id == complete.request_id
    assert complete.succeeded is True and submit.succeeded is None
    assert prof.events() == ()


def test_p11_rejected_route_moves_record_nothing():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    p.ab.prepare_hook = lambda request: 42
    with sw.profile() as prof:
        with pytest.raises(TypeError):
            sw.move_async(t, p.B(0, dtype=F32))
        with pytest.raises(ValueError):
            sw.move_async(t, filled(p.B, [0.0]))
    assert prof.move_events() == ()


def test_p11_selection_by_definition_backed_class():
    p = Pair()
    with sw.profile(carriers=[p.B]) as prof:
        sw.move(cpu_tensor([1.0]), sw.FileBacked())
        t, c = p.source([1.0])
        sw.move(t, p.B(0, dtype=F32))
    with sw.profile(carriers=[sw.CPU]) as none:
        t, c = p.source([1.0])
        sw.move(t, p.B(0, dtype=F32))
    assert [e.route_id for e in prof.move_events()] == [p.ab_id, p.ab_id]
    assert none.move_events() == ()


def test_p13_move_event_accepts_a_route_id():
    e = sw.MoveEvent(0, "submit", 1, 2, sw.CPU, sw.CPU, ext.TransferRouteMoveOperation,
                     "my-route", 0, 0, 0, None, 4)
    assert e.route_id == "my-route"


# ---- growth, ownership, grad mode around prepare ------------------------------------------------


class Full(Exception):
    pass


def test_growth_failure_raises_directly_before_submission():
    p = Pair()
    t, c = p.source([1.0, 2.0, 3.0])
    d = p.B(0, dtype=F32)
    err = Full("remote store full")

    def allocate(carrier, slots):
        raise err

    p.sb.override["allocate"] = allocate
    before = state(c)
    with sw.profile() as prof:
        with pytest.raises(Full) as e:
            sw.move_async(t, d)
    assert e.value is err
    assert p.ab.prepare_count == 1 and p.ab.submit_count == 0  # allocation follows prepare
    assert state(c) == before
    assert d.size() == 0 and d.is_mutable() and not d.is_released()
    assert prof.move_events() == ()
    del p.sb.override["allocate"]
    assert sw.move(t, d).tolist() == [1.0, 2.0, 3.0]


def test_growth_to_a_wrong_size_is_refused():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    p.sb.override["allocate"] = lambda carrier, slots: setattr(
        carrier, "buf", bytearray(4 * (slots + 3)))
    with pytest.raises(ValueError, match="requested physical size"):
        sw.move_async(t, d)
    assert p.ab.submit_count == 0 and not c.is_released() and c.is_mutable()


def test_grad_mode_is_restored_after_prepare_fails():
    p = Pair()
    t, c = p.source([1.0])

    def prepare(request):
        assert sw.is_grad_enabled() is False
        raise Full("no")

    p.ab.prepare_hook = prepare
    with pytest.raises(Full):
        sw.move_async(t, p.B(0, dtype=F32))
    assert sw.is_grad_enabled() is True
    p.ab.prepare_hook = lambda request: ext.Unsupported("no")
    with pytest.raises(NotImplementedError):
        sw.move_async(t, p.B(0, dtype=F32))
    assert sw.is_grad_enabled() is True


def test_owned_source_or_destination_is_refused_before_prepare():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    token = c._claim_ownership()
    try:
        with pytest.raises(RuntimeError):
            sw.move_async(t, d)
    finally:
        c._relinquish_ownership(token)
    token = d._claim_ownership()
    try:
        with pytest.raises(RuntimeError):
            sw.move_async(t, d)
    finally:
        d._relinquish_ownership(token)
    assert p.ab.prepare_count == 0 and d.size() == 0
    assert sw.move(t, d).tolist() == [1.0, 2.0]


def test_owned_destination_used_by_its_owner():
    p = Pair()
    t, c = p.source([1.0, 2.0])
    d = p.B(0, dtype=F32)
    token = d._claim_ownership()
    d._begin_owner_access(token)
    try:
        r = sw.move(t, d)
        assert d.is_owned() and d.is_mutable()
        assert r.tolist() == [1.0, 2.0] and c.is_released()
    finally:
        d._end_owner_access(token)
        d._relinquish_ownership(token)


def test_route_to_a_definition_free_python_carrier():
    class Sink(sw.Carrier):
        def __init__(self, n=0):
            self.values = [0] * n

        def size(self):
            return len(self.values)

        def dtype(self):
            return D.Int32

        def get_value(self, i):
            return self.values[i]

        def set_value(self, i, v):
            self.values[i] = v

        def _is_mutable(self):
            return True

        def _allocate(self, n):
            self.values = [0] * n

    A = new_class("RemoteA")
    to_sink = Transfer()
    define(A, routes=[route(A, Sink, to_sink, "remote-to-sink")])
    c = filled(A, [3, 4, 5, 6], D.Int32)
    sink = Sink()
    r = sw.move(sw.Tensor(c, 1, L([2], [2])), sink)  # offset 1, cosize 3
    assert sink.values == [4, 5, 6] and r.tolist() == [4, 6]
    assert to_sink.prepare_count == 1 and c.is_released() and sink.version == 0
