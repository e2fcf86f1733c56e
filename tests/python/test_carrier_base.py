"""The Carrier base (contract-carriers C-1 .. C-5, C-13 .. C-18):
construction, dynamic hooks, framework-owned checks, ownership, closed
carriers."""

import gc
import threading
import weakref

import pytest

import strideweave as sw
from strideweave.carriers import base
from carriers_for_tests import Foreign
from moves_for_tests import BIG, BlockedCopy, held

D = sw.DType


class Plain(sw.Carrier):
    """A definition-free carrier defining no hooks at all."""


class ListCarrier(sw.Carrier):
    """A writable Python carrier over a list (C-2 hooks)."""

    def __init__(self, values, mutable=True):
        super().__init__()
        self.values = list(values)
        self.mutable = mutable
        self.released_calls = 0
        self.set_calls = []

    def size(self):
        return len(self.values)

    def dtype(self):
        return D.Float32

    def get_value(self, index):
        return self.values[index]

    def set_value(self, index, value):
        self.set_calls.append((index, value))
        self.values[index] = value

    def _is_mutable(self):
        return self.mutable

    def _release(self):
        self.released_calls += 1
        self.values = []


class NoSuper(sw.Carrier):
    """Never calls super().__init__(): framework state still exists (C-1)."""

    def __init__(self, cpu):
        self.cpu = cpu

    def size(self):
        return self.cpu.size()

    def dtype(self):
        return self.cpu.dtype()

    def get_value(self, i):
        return self.cpu[i]


# ---- import paths ---------------------------------------------------------


def test_import_paths_identical():
    assert sw.Carrier is sw.carriers.Carrier is base.Carrier
    assert sw.DependentCarrier is sw.carriers.DependentCarrier is base.DependentCarrier
    assert base.CLOSED_CARRIER_MESSAGE is sw._C.CLOSED_CARRIER_MESSAGE
    assert base.reject_carrier_subclass is sw._C.reject_carrier_subclass
    for name in ("Generic", "CPU", "FileBacked"):
        assert getattr(sw, name) is getattr(sw.carriers, name)
    assert sw.carriers.generic.Generic is sw.Generic
    assert sw.carriers.cpu.CPU is sw.CPU
    assert sw.carriers.file_backed.FileBacked is sw.FileBacked


# ---- C-1 construction -----------------------------------------------------


def test_c1_state_exists_without_super_init():
    c = NoSuper(sw.CPU(3))
    assert c.version == 0
    assert not c.is_released()
    assert not c.is_owned()
    assert c[2] == 0.0
    c.release()
    assert c.is_released()


def test_c1_definition_free_no_arguments_ok():
    p = Plain()
    assert isinstance(p, sw.Carrier)
    assert p.version == 0
    Plain(None, dtype=None, mutable=True)  # every argument at its default


@pytest.mark.parametrize(
    "args, kwargs",
    [((4,), {}), ((), {"slots": 0}), ((), {"dtype": D.Float32}), ((), {"mutable": False})],
)
def test_c1_definition_free_non_default_argument_type_error(args, kwargs):
    with pytest.raises(TypeError, match="definition-free Carrier construction"):
        Plain(*args, **kwargs)
    with pytest.raises(TypeError, match="definition-free Carrier construction"):
        sw.Carrier(*args, **kwargs)


def test_c1_dtype_keyword_only():
    with pytest.raises(TypeError):
        Plain(None, D.Float32)


def test_c1_tp_new_ignores_arguments_own_init():
    cpu = sw.CPU(2)
    c = NoSuper(cpu)  # Carrier.__new__ receives `cpu` and ignores it
    assert c.cpu is cpu
    assert c.size() == 2


def test_c1_weak_references():
    c = ListCarrier([1.0])
    r = weakref.ref(c)
    assert r() is c
    del c
    gc.collect()
    assert r() is None
    cpu = sw.CPU(1)
    r2 = weakref.ref(cpu)
    assert r2() is cpu
    del cpu
    assert r2() is None
    for obj in (sw.Generic([1.0]), sw.FileBacked()):
        assert weakref.ref(obj)() is obj


def test_c1_subclass_gets_instance_dict():
    c = Plain()
    c.anything = 5
    assert c.anything == 5


# ---- C-2 hooks ------------------------------------------------------------


@pytest.mark.parametrize("hook, call", [
    ("size", lambda c: c.size()),
    ("dtype", lambda c: c.dtype()),
    ("get_value", lambda c: c.get_value(0)),
    ("new_like", lambda c: c.new_like([1.0])),
    ("allocate_like", lambda c: c.allocate_like(1)),
])
def test_c2_missing_hook_not_implemented_naming_it(hook, call):
    with pytest.raises(NotImplementedError, match=hook):
        call(Plain())


def test_c2_getitem_without_size_hook_names_size():
    with pytest.raises(NotImplementedError, match="size"):
        Plain()[0]


def test_c2_set_value_default_runtime_error():
    class ReadOnly(NoSuper):
        def _is_mutable(self):
            return True

    c = ReadOnly(sw.CPU(2))
    with pytest.raises(RuntimeError):
        c.set_value(0, 1.0)
    with pytest.raises(RuntimeError):
        c[0] = 1.0
    assert c.version == 0


def test_c2_is_mutable_default_false():
    c = NoSuper(sw.CPU(1))
    assert c._is_mutable() is False
    assert c.is_mutable() is False
    with pytest.raises(RuntimeError, match="not mutable"):
        c[0] = 1.0


def test_c2_supports_storage_dtype_default_is_own_dtype():
    c = NoSuper(sw.CPU(1, dtype=D.Int32))
    assert c.supports_storage_dtype(D.Int32) is True
    assert c.supports_storage_dtype(D.Float32) is False
    assert c._supports_storage_dtype(D.Int32) is True


def test_c2_supports_storage_dtype_override_used():
    class Wide(NoSuper):
        def _supports_storage_dtype(self, dtype):
            return dtype in (D.Float32, D.Float64)

    c = Wide(sw.CPU(1))
    assert c.supports_storage_dtype(D.Float64) is True
    assert c.supports_storage_dtype(D.Bool) is False


def test_c2_release_default_noop_and_hook_called_once():
    c = NoSuper(sw.CPU(1))
    assert c._release() is None
    lc = ListCarrier([1.0, 2.0])
    assert lc.release() is None
    assert lc.release() is None
    assert lc.released_calls == 1
    assert lc.is_released()


def test_c2_release_hook_failure_keeps_carrier_live():
    class Failing(ListCarrier):
        def _release(self):
            raise OSError("boom")

    c = Failing([1.0])
    with pytest.raises(OSError, match="boom"):
        c.release()
    assert not c.is_released()
    assert c[0] == 1.0


def test_c2_no_allocate_hook_on_base():
    # C-12: only a callable _allocate makes a user carrier allocatable-empty.
    assert not hasattr(sw.Carrier, "_allocate")
    assert not hasattr(Plain(), "_allocate")


def test_c2_dlpack_opt_in_hook_overridable():
    cpu = sw.CPU(3)
    f = Foreign(cpu)
    assert f.dlpack_info()["pointer"] == cpu.pointer()
    assert f[1] == 0.0


# ---- C-3, C-4 reads --------------------------------------------------------


def test_c4_read_user_class():
    c = ListCarrier([1.5, 2.5])
    assert c[0] == 1.5
    assert c[1] == 2.5


def test_c4_released_first():
    c = ListCarrier([1.0])
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        c[0]
    with pytest.raises(RuntimeError, match="released"):
        c["not an index"]  # released wins over the index type


@pytest.mark.parametrize("bad", ["0", 0.0, None, slice(0, 1), True])
def test_c4_index_type_error(bad):
    with pytest.raises(TypeError, match="integer"):
        ListCarrier([1.0])[bad]


@pytest.mark.parametrize("bad", [-1, 2, 10**30, -(10**30)])
def test_c4_range_index_error_no_wraparound(bad):
    with pytest.raises(IndexError):
        ListCarrier([1.0, 2.0])[bad]


def test_c4_index_objects_accepted():
    class Idx:
        def __index__(self):
            return 1

    assert ListCarrier([1.0, 2.0])[Idx()] == 2.0


def test_c4_user_get_value_not_prevalidated():
    c = ListCarrier([1.0, 2.0])
    assert c.get_value(-1) == 2.0  # the user's own hook, called directly


@pytest.mark.parametrize("bad_size, exc", [("3", TypeError), (-1, ValueError), (1.0, TypeError)])
def test_c3_bad_size_hook_result(bad_size, exc):
    class Bad(ListCarrier):
        def size(self):
            return bad_size

    with pytest.raises(exc):
        Bad([1.0])[0]


# ---- C-5 writes ------------------------------------------------------------


def test_c5_write_user_class_bumps_version():
    c = ListCarrier([1.0, 2.0])
    c[1] = 5.0
    assert c.values == [1.0, 5.0]
    assert c.set_calls == [(1, 5.0)]
    assert c.version == 1


def test_c5_hook_that_advances_version_counts_once():
    class Bumping(ListCarrier):
        def set_value(self, index, value):
            super().set_value(index, value)
            self._increment_version()

    c = Bumping([1.0])
    c[0] = 2.0
    assert c.version == 1
    c[0] = 3.0
    assert c.version == 2


def test_c5_hook_failure_no_version():
    class Failing(ListCarrier):
        def set_value(self, index, value):
            raise ValueError("refused")

    c = Failing([1.0])
    with pytest.raises(ValueError, match="refused"):
        c[0] = 2.0
    assert c.version == 0


def test_c5_check_order_user_class():
    c = ListCarrier([1.0], mutable=False)
    with pytest.raises(TypeError):
        c["x"] = 1.0  # (2) type before (3) mutability
    with pytest.raises(RuntimeError, match="not mutable"):
        c[99] = 1.0  # (3) mutability before (4) range
    m = ListCarrier([1.0])
    with pytest.raises(IndexError):
        m[99] = 1.0
    m.release()
    with pytest.raises(RuntimeError, match="released"):
        m["x"] = 1.0  # (1) released first
    assert c.set_calls == [] and m.set_calls == []
    assert c.version == 0 and m.version == 0


def test_c5_delete_slot_type_error():
    c = ListCarrier([1.0])
    with pytest.raises(TypeError):
        del c[0]


def test_c2_framework_methods_ignore_overrides():
    class Liar(ListCarrier):
        def is_mutable(self):  # overriding a framework method changes nothing
            return True

        def is_released(self):
            return False

    c = Liar([1.0], mutable=False)
    with pytest.raises(RuntimeError, match="not mutable"):
        c[0] = 2.0  # the framework predicate, not the override
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        c[0]


# ---- C-6 supports_storage_dtype --------------------------------------------


@pytest.mark.parametrize("bad", [None, "Float32", 1, sw.CPU])
def test_c6_non_dtype_type_error(bad):
    with pytest.raises(TypeError, match="DType"):
        ListCarrier([]).supports_storage_dtype(bad)


# ---- C-13 ownership ------------------------------------------------------------


def test_c13_claim_and_relinquish():
    c = sw.CPU(2)
    assert c.is_mutable() and not c.is_owned()
    token = c._claim_ownership()
    assert isinstance(token, int)
    assert c.is_owned()
    assert c.is_mutable() is False
    assert c._has_owner_access() is False
    c._relinquish_ownership(token)
    assert not c.is_owned()
    assert c.is_mutable()


def test_c13_owned_reads_work_writes_fail():
    c = sw.CPU(2)
    c[0] = 1.0
    token = c._claim_ownership()
    assert c[0] == 1.0
    with pytest.raises(RuntimeError, match="owned"):
        c[0] = 2.0
    with pytest.raises(RuntimeError, match="owned"):
        c.set_value(0, 2.0)
    with pytest.raises(RuntimeError, match="owned"):
        c._increment_version()
    with pytest.raises(RuntimeError, match="owned"):
        c.release()
    assert c[0] == 1.0 and c.version == 1 and not c.is_released()
    c._relinquish_ownership(token)


def test_c13_owner_access_allows_writes_and_release():
    c = sw.CPU(2)
    token = c._claim_ownership()
    c._begin_owner_access(token)
    assert c._has_owner_access()
    assert c.is_mutable() and c.is_owned()
    c[0] = 3.0
    c._increment_version()
    assert c.version == 2
    c._end_owner_access(token)
    assert not c._has_owner_access()
    assert not c.is_mutable()
    c._begin_owner_access(token)
    c.release()
    assert c.is_released()
    c._end_owner_access(token)
    with pytest.raises(RuntimeError):
        c.release()  # owned without access still refuses


def test_c13_owner_access_reentrant():
    c = sw.Generic([0.0])
    token = c._claim_ownership()
    c._begin_owner_access(token)
    c._begin_owner_access(token)
    c._end_owner_access(token)
    assert c._has_owner_access()
    c[0] = 1.0
    c._end_owner_access(token)
    assert not c._has_owner_access()
    with pytest.raises(RuntimeError):
        c._end_owner_access(token)  # nothing left to end


def test_c13_intrinsic_immutability_kept_under_access():
    c = sw.CPU(1, mutable=False)
    token = c._claim_ownership()
    c._begin_owner_access(token)
    assert c.is_mutable() is False
    c._end_owner_access(token)


def test_c13_wrong_token_runtime_error():
    c = sw.CPU(1)
    token = c._claim_ownership()
    for call in (c._relinquish_ownership, c._begin_owner_access, c._end_owner_access):
        with pytest.raises(RuntimeError, match="token"):
            call(token + 1)
    with pytest.raises(TypeError):
        c._begin_owner_access("token")
    assert c.is_owned()


def test_c13_not_owned_token_calls_runtime_error():
    c = sw.CPU(1)
    for call in (c._relinquish_ownership, c._begin_owner_access, c._end_owner_access):
        with pytest.raises(RuntimeError, match="not owned"):
            call(1)


def test_c13_claim_refusals():
    c = sw.CPU(1)
    c._claim_ownership()
    with pytest.raises(RuntimeError, match="already owned"):
        c._claim_ownership()
    r = sw.CPU(1)
    r.release()
    with pytest.raises(RuntimeError, match="released"):
        r._claim_ownership()
    assert not r.is_owned()


def test_c13_tokens_distinct():
    a, b = sw.CPU(1), sw.CPU(1)
    assert a._claim_ownership() != b._claim_ownership()


def test_c13_owner_access_thread_bound():
    c = sw.CPU(1)
    token = c._claim_ownership()
    c._begin_owner_access(token)
    seen = {}

    def other():
        seen["has"] = c._has_owner_access()
        seen["mutable"] = c.is_mutable()
        try:
            c[0] = 1.0
        except RuntimeError as e:
            seen["write"] = str(e)
        for name in ("_begin_owner_access", "_end_owner_access"):
            try:
                getattr(c, name)(token)
            except RuntimeError as e:
                seen[name] = str(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["has"] is False and seen["mutable"] is False
    assert "owned" in seen["write"]
    assert "thread" in seen["_begin_owner_access"]
    assert "thread" in seen["_end_owner_access"]
    assert c._has_owner_access()
    c._end_owner_access(token)


def test_c13_user_class_ownership():
    c = ListCarrier([1.0])
    token = c._claim_ownership()
    with pytest.raises(RuntimeError, match="owned"):
        c[0] = 2.0
    assert c.set_calls == []
    c._begin_owner_access(token)
    c[0] = 2.0
    c._end_owner_access(token)
    c._relinquish_ownership(token)
    assert c.values == [2.0]


# ---- C-14 version, C-15 release ---------------------------------------------------


def test_c14_version_read_only():
    c = sw.CPU(1)
    with pytest.raises(AttributeError):
        c.version = 5
    assert c.version == 0


def test_c14_increment_version():
    c = ListCarrier([1.0])
    assert c._increment_version() is None
    assert c.version == 1
    c.release()
    with pytest.raises(RuntimeError, match="released"):
        c._increment_version()
    assert c.version == 1


def test_c15_release_returns_none_idempotent():
    c = ListCarrier([1.0])
    assert c.release() is None
    assert c.release() is None
    assert c.is_released()
    assert c.version == 0


# ---- C-16, C-17 -------------------------------------------------------------


def test_c16_base_dlpack_refusal():
    with pytest.raises(BufferError, match="DLPack is not supported"):
        ListCarrier([1.0]).dlpack_info()


@pytest.mark.parametrize("make", [lambda: ListCarrier([1.0]), lambda: sw.CPU(1),
                                  lambda: sw.Generic([1.0]), lambda: sw.FileBacked()])
def test_c17_scatter_not_implemented(make):
    c = make()
    with pytest.raises(NotImplementedError, match="scatter"):
        c.scatter(c, c, None)
    with pytest.raises(NotImplementedError):
        c.scatter(c, c, None, mapping_offset=3)


# ---- C-18 closed carriers ---------------------------------------------------------


CLOSED = [sw.Generic, sw.CPU, sw.FileBacked]


def test_c18_message_format_string():
    msg = base.CLOSED_CARRIER_MESSAGE
    assert "{name}" in msg
    assert "closed carrier implementation" in msg.format(name="X")


@pytest.mark.parametrize("cls", CLOSED)
def test_c18_subclass_rejected_at_class_creation(cls):
    expected = base.CLOSED_CARRIER_MESSAGE.format(name=cls.__name__)
    with pytest.raises(TypeError) as info:
        type("Sub", (cls,), {})
    assert str(info.value) == expected
    assert "closed carrier implementation" in str(info.value)


@pytest.mark.parametrize("cls", CLOSED)
def test_c18_subclass_with_class_kwargs_rejected(cls):
    with pytest.raises(TypeError, match="closed carrier implementation"):
        exec("class Sub(cls, flavor=1): pass", {"cls": cls})


@pytest.mark.parametrize("cls", CLOSED)
def test_c18_tp_new_backstop_for_mixins_skipping_super(cls):
    class Mixin:
        def __init_subclass__(cls, **kwargs):  # swallows the chain: no super()
            pass

    Sneaky = type("Sneaky", (Mixin, cls), {})  # class creation slips through
    args = {sw.CPU: (1,), sw.Generic: ([1.0],), sw.FileBacked: ()}[cls]
    with pytest.raises(TypeError, match="closed carrier implementation") as info:
        Sneaky(*args)
    assert str(info.value) == base.CLOSED_CARRIER_MESSAGE.format(name=cls.__name__)


@pytest.mark.parametrize("name", ["CPU", "Whatever"])
def test_c18_reject_carrier_subclass_always_raises(name):
    with pytest.raises(TypeError) as info:
        base.reject_carrier_subclass(name)
    assert str(info.value) == base.CLOSED_CARRIER_MESSAGE.format(name=name)


def test_c18_closed_types_keep_basetype_flag():
    # The error is ours, not CPython's "not an acceptable base type".
    with pytest.raises(TypeError) as info:
        type("Sub", (sw.CPU,), {})
    assert "acceptable base type" not in str(info.value)


def test_c18_carrier_and_dependent_carrier_open():
    class Dep(sw.DependentCarrier):
        pass

    assert issubclass(sw.DependentCarrier, sw.Carrier)
    assert issubclass(Dep, sw.Carrier)
    assert isinstance(Dep(), sw.DependentCarrier)
    for cls in CLOSED:
        assert issubclass(cls, sw.Carrier)
        assert not issubclass(cls, sw.DependentCarrier)


def test_c1_user_carriers_in_cycles_collected():
    refs = []
    for _ in range(100):
        c = NoSuper(sw.CPU(4))
        c.self_ref = c  # a cycle through the instance dict
        refs.append(weakref.ref(c))
    del c
    gc.collect()
    assert all(r() is None for r in refs)


# ---- C-12 allocatable-empty (through the C API the movement code uses) ----------


def test_c12_allocatable_empty_predicate():
    is_empty = sw._C._carrier_is_allocatable_empty
    assert is_empty(sw.FileBacked()) is True  # the only shipped one
    grown = sw.FileBacked()
    grown._allocate(1)
    assert is_empty(grown) is False
    assert is_empty(sw.CPU(0)) is False
    assert is_empty(sw.Generic([])) is False

    class Growable(ListCarrier):
        def _allocate(self, size):
            self.values = [0.0] * size

    class NotCallable(ListCarrier):
        _allocate = 5

    assert is_empty(Growable([])) is True
    assert is_empty(Growable([1.0])) is False
    assert is_empty(ListCarrier([])) is False
    assert is_empty(NotCallable([])) is False


def test_c12_allocate_growth_and_non_none_result():
    class Growable(ListCarrier):
        def _allocate(self, size):
            self.values = [0.0] * size

    class Bad(ListCarrier):
        def _allocate(self, size):
            self.values = [0.0] * size
            return size

    g = Growable([])
    assert sw._C._carrier_allocate(g, 3) is None
    assert g.size() == 3
    with pytest.raises(TypeError, match="must return None"):
        sw._C._carrier_allocate(Bad([]), 2)
    f = sw.FileBacked()
    sw._C._carrier_allocate(f, 2)
    assert f.size() == 2 and f[1] == 0.0


# ---- pending guard (architecture.md "Pending guard", C-13) ------------------------
# Observed through real moves: a built-in route held queued by
# _C._hold_moves(True), or a Python _copy blocked on an event on another thread.


def _pending_source_checks(c):
    assert c.is_mutable() is False
    assert c.is_owned() is False
    assert c[1] == 0.0
    with pytest.raises(RuntimeError, match="pending"):
        c[0] = 1.0
    with pytest.raises(RuntimeError, match="pending"):
        c.release()
    with pytest.raises(RuntimeError, match="pending"):
        c._increment_version()
    with pytest.raises(RuntimeError, match="pending"):
        c._claim_ownership()
    assert c.version == 0 and not c.is_released() and not c.is_owned()


@pytest.mark.parametrize("make", [lambda: sw.CPU(BIG), lambda: sw.Generic([0.0] * BIG)],
                         ids=["CPU", "Generic"])
def test_pending_source_blocks_mutation_allows_reads(make):
    c = make()
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([BIG]), sw.Stride([1])))
    with held():
        h = sw.move_async(t, sw.FileBacked())
        assert not h.done
        _pending_source_checks(c)
    h.wait()
    assert c.is_released() and c.version == 0


def test_pending_python_source_blocks_mutation_allows_reads():
    c = ListCarrier([0.0, 0.0])
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))
    with BlockedCopy(t, sw.CPU(2)) as b:
        _pending_source_checks(c)
    assert b.error is None, b.error
    assert c.is_released() and c.set_calls == []


def test_pending_state_ends_with_a_failed_move():
    # After a failed move the source is mutable again and writes advance the version.
    c = ListCarrier([0.0, 0.0])
    t = sw.Tensor(c, 0, sw.Layout(sw.Shape([2]), sw.Stride([1])))

    def fail(tensor, destination, output):
        raise LookupError("stop")

    with BlockedCopy(t, sw.CPU(2), inside=fail) as b:
        assert c.is_mutable() is False
    assert isinstance(b.error, LookupError)
    assert c.is_mutable() and not c.is_released()
    c[0] = 1.0
    assert c.version == 1


def test_pending_destination_refuses_reads():
    c = sw.CPU(BIG)
    src = sw.Tensor(sw.Generic([2.0] * BIG), 0, sw.Layout(sw.Shape([BIG]), sw.Stride([1])))
    with held():
        h = sw.move_async(src, c)
        with pytest.raises(RuntimeError, match="pending"):
            c[0]
        with pytest.raises(RuntimeError, match="pending"):
            c.get_value(0)
    h.wait()
    assert c[0] == 2.0


def test_pending_does_not_change_ownership():
    # An owned destination, moved into by its owner (owner access on this thread).
    c = sw.CPU(BIG)
    token = c._claim_ownership()
    c._begin_owner_access(token)
    src = sw.Tensor(sw.CPU(BIG), 0, sw.Layout(sw.Shape([BIG]), sw.Stride([1])))
    try:
        with held():
            h = sw.move_async(src, c)
            assert c.is_owned() and c.is_mutable() is False
            with pytest.raises(RuntimeError, match="pending"):
                c[0] = 1.0
        h.wait()
        assert c.is_owned() and c.is_mutable()
    finally:
        c._end_owner_access(token)
        c._relinquish_ownership(token)
