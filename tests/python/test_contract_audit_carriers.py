"""Contract audit of the shipped carriers (contract-carriers C-1 .. C-23):
cases the per-carrier test files did not reach."""

import numbers

import pytest

import strideweave as sw

D = sw.DType


def _cpu(dtype):
    return sw.CPU(3, dtype=dtype)


def _generic(dtype):
    return sw.Generic([0, 0, 0], dtype=dtype)


def _file_backed(dtype):
    c = sw.FileBacked(dtype=dtype)
    c._allocate(3)
    return c


MAKERS = [_cpu, _generic, _file_backed]


class _IndexHook:
    """An Int32 value whose __index__ runs `action` first (C-9 conversion
    runs Python code after C-5 checks 1-4 passed)."""

    def __init__(self, action, value=7):
        self.action = action
        self.value = value

    def __index__(self):
        self.action()
        return self.value


class _RealHook(numbers.Real):
    """A Float32 value (numbers.Real) whose __float__ runs `action` first."""

    def __init__(self, action):
        self.action = action

    def __float__(self):
        self.action()
        return 2.5

    def __lt__(self, other):
        return 2.5 < other

    def __le__(self, other):
        return 2.5 <= other

    # numbers.Real's other abstract methods; never called here.
    def _no(self, *args):
        raise AssertionError("not used")

    __abs__ = __add__ = __ceil__ = __eq__ = __floor__ = __floordiv__ = _no
    __mod__ = __mul__ = __neg__ = __pos__ = __pow__ = _no
    __radd__ = __rfloordiv__ = __rmod__ = __rmul__ = __round__ = _no
    __rpow__ = __rtruediv__ = __truediv__ = __trunc__ = _no
    __hash__ = object.__hash__


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("how", ["setitem", "set_value"])
def test_c5_release_during_normalization_refused(make, how):
    # C-5/C-15: a value whose conversion releases the carrier must not be
    # written into freed storage (or a closed descriptor); the write fails
    # RuntimeError (released) and the version does not move.
    c = make(D.Int32)
    v = _IndexHook(c.release)
    with pytest.raises(RuntimeError, match="released"):
        if how == "setitem":
            c[1] = v
        else:
            c.set_value(1, v)
    assert c.is_released()
    assert c.version == 0


@pytest.mark.parametrize("make", MAKERS)
def test_c5_release_during_float_normalization_refused(make):
    c = make(D.Float32)
    with pytest.raises(RuntimeError, match="released"):
        c[0] = _RealHook(c.release)
    assert c.version == 0


@pytest.mark.parametrize("make", MAKERS)
def test_c13_claim_during_normalization_refused(make):
    # C-13: owned outside owner access, writes fail RuntimeError -- also when
    # the claim happens while the value is being converted.
    c = make(D.Int32)
    tokens = []
    with pytest.raises(RuntimeError, match="owned"):
        c[2] = _IndexHook(lambda: tokens.append(c._claim_ownership()))
    assert c.is_owned()
    assert c.version == 0
    c._begin_owner_access(tokens[0])
    assert c[2] == 0
    c[2] = 5  # with owner access the same write works
    c._end_owner_access(tokens[0])
    assert c[2] == 5
    assert c.version == 1


def test_c5_normalization_still_checked_last():
    # C-5: normalization remains check 5 -- an index out of range wins over a
    # bad value, and a bad value on a valid index is TypeError / OverflowError.
    c = sw.CPU(2, dtype=D.Int32)
    with pytest.raises(IndexError):
        c[5] = "x"
    with pytest.raises(TypeError):
        c[0] = "x"
    with pytest.raises(OverflowError):
        c[0] = 2**31
    assert c.version == 0


class _ReleasingIndex:
    """An index whose __index__ releases `carrier` (C-4/C-5 check 2 runs
    Python code after check 1 passed)."""

    def __init__(self, carrier):
        self.carrier = carrier

    def __index__(self):
        self.carrier.release()
        return 0


@pytest.mark.parametrize("make", MAKERS)
def test_c4_c5_release_inside_index_conversion_reads_as_released(make):
    # C-4/C-5 check 1: a carrier released while its index is converted fails
    # RuntimeError (released), not IndexError from its new size 0.
    c = make(D.Float32)
    with pytest.raises(RuntimeError, match="released"):
        c[_ReleasingIndex(c)]
    c = make(D.Float32)
    with pytest.raises(RuntimeError, match="released"):
        c.get_value(_ReleasingIndex(c))
    c = make(D.Float32)
    with pytest.raises(RuntimeError, match="released"):
        c[_ReleasingIndex(c)] = 1.0
    assert c.version == 0


def test_c4_release_inside_index_conversion_user_class():
    # The framework's __getitem__ never reaches a user hook on a carrier
    # released during the index conversion (C-4 check 1, C-15).
    calls = []

    class Keeps(sw.Carrier):
        def size(self):
            return 4  # a user hook need not report 0 after release

        def dtype(self):
            return D.Float32

        def get_value(self, i):
            calls.append(i)
            return 0.0

    k = Keeps()
    with pytest.raises(RuntimeError, match="released"):
        k[_ReleasingIndex(k)]
    assert calls == []


SUPPORTED = {
    _cpu: (D.Float32, D.Int32, D.Bool),
    _generic: (D.Float32, D.Int32, D.Bool),
    _file_backed: (D.Float32, D.Int32),
}


@pytest.mark.parametrize("make", MAKERS)
def test_c14_version_unchanged_by_everything_but_writes(make):
    # C-14: construction, reads, ownership changes, factories, failed writes
    # (each numbered check), release and queries after it leave the version.
    c = make(D.Int32)
    assert c.version == 0
    c[0], c.get_value(1)
    c.new_like([1, 2]), c.allocate_like(2)
    token = c._claim_ownership()
    with pytest.raises(RuntimeError):
        c[0] = 1  # owned, no owner access
    c._begin_owner_access(token)
    c._begin_owner_access(token)
    c._end_owner_access(token)
    c._end_owner_access(token)
    c._relinquish_ownership(token)
    for index, value, exc in [("0", 1, TypeError), (9, 1, IndexError),
                              (0, "x", TypeError), (0, 2**40, OverflowError)]:
        with pytest.raises(exc):
            c[index] = value
    assert c.version == 0
    c[0] = 3
    c.set_value(1, 4)
    assert c.version == 2
    c.release()
    c.release()
    assert c.version == 2
    with pytest.raises(RuntimeError, match="released"):
        c[0] = 1
    assert c.version == 2


@pytest.mark.parametrize("make", MAKERS)
def test_c3_c6_c15_queries_independent_of_state(make):
    # C-6: the answer depends on the class only -- not on dtype, ownership,
    # release; C-3: dtype() never changes and size() is 0 after release.
    c = make(D.Int32)
    everything = sw.DType.registered()
    expected = [d in SUPPORTED[make] for d in everything]

    def answers():
        return [c.supports_storage_dtype(d) for d in everything]

    assert answers() == expected
    token = c._claim_ownership()
    assert answers() == expected
    c._relinquish_ownership(token)
    c.release()
    assert answers() == expected
    assert c.dtype() is D.Int32 and c.size() == 0
    assert c.is_released() and c.is_mutable() and not c.is_owned()


@pytest.mark.parametrize("make", MAKERS)
def test_c13_c15_owned_release_refused_then_allowed_with_access(make):
    # C-13/C-15: owned without owner access, release() fails RuntimeError and
    # changes nothing; with owner access it releases.
    c = make(D.Float32)
    c[0] = 1.5
    token = c._claim_ownership()
    with pytest.raises(RuntimeError, match="owner access"):
        c.release()
    assert not c.is_released() and c.size() == 3 and c[0] == 1.5
    c._begin_owner_access(token)
    assert c.release() is None
    c._end_owner_access(token)
    assert c.is_released() and c.is_owned()


@pytest.mark.parametrize("make", MAKERS)
def test_c12_only_file_backed_is_allocatable_empty(make):
    # C-12: among shipped carriers only FileBacked (size 0 and `_allocate`).
    c = make(D.Float32).allocate_like(0)
    assert sw._C._carrier_is_allocatable_empty(c) is (make is _file_backed)
    assert sw._C._carrier_is_allocatable_empty(make(D.Float32)) is False


def test_c13_concurrent_claims_one_winner_distinct_tokens():
    # C-13: claiming is atomic -- of threads racing for one carrier exactly
    # one gets a token, the others RuntimeError; tokens are never reused.
    import threading

    carriers = [sw.CPU(1) for _ in range(50)]
    barrier = threading.Barrier(8)
    won, lost = [], []
    lock = threading.Lock()

    def claim_all():
        barrier.wait()
        for c in carriers:
            try:
                t = c._claim_ownership()
            except RuntimeError:
                with lock:
                    lost.append(c)
            else:
                with lock:
                    won.append((c, t))

    threads = [threading.Thread(target=claim_all) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(id(c) for c, _ in won) == sorted(id(c) for c in carriers)
    assert len(lost) == 7 * len(carriers)
    assert len({t for _, t in won}) == len(carriers)
    for c, t in won:
        c._relinquish_ownership(t)
    again = carriers[0]._claim_ownership()
    assert again not in {t for _, t in won}


class _BadTruth:
    def __bool__(self):
        raise ValueError("no truth value")


@pytest.mark.parametrize(
    "call",
    [
        lambda it: sw.Generic(it, dtype=D.Float64),
        lambda it: sw.Generic(it, dtype="Float32"),
        lambda it: sw.Generic(it, mutable=_BadTruth()),
        lambda it: sw.CPU(1).new_like(it, dtype=D.Any),
        lambda it: sw.Generic([0.0]).new_like(it, mutable=_BadTruth()),
        lambda it: sw.FileBacked().new_like(it, dtype=D.Bool),
        lambda it: sw.FileBacked().new_like(it, mutable=_BadTruth()),
    ],
)
def test_c10_c19_failed_argument_checks_leave_the_iterator_unconsumed(call):
    # C-19/C-10 check order: values must be iterable first, then dtype (C-7);
    # a call failing there has no observable effect -- the caller's iterator
    # is not drained.
    it = iter([1.0, 2.0, 3.0])
    with pytest.raises((TypeError, ValueError)):
        call(it)
    assert list(it) == [1.0, 2.0, 3.0]
