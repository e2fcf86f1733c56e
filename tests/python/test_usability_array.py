"""Tensor.__array__ (issue 10 item 1): numpy.asarray / numpy.array on every
carrier kind and dtype, the DLPack view for exportable tensors, the one-pass
copy for the rest, NumPy's copy= protocol, and the read-only guarantees
(no version change, no autograd node, read errors as a read raises them)."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, Evictable, FileBacked, Generic
from extension_for_tests import define, filled, new_class
from carriers_for_tests import Foreign
from moves_for_tests import held

D = sw.DType
NP = {D.Float32: np.float32, D.Int32: np.int32, D.Bool: np.bool_}


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def values(dtype, n):
    if dtype is D.Float32:
        return [k * 1.5 - 7.25 for k in range(n)]
    if dtype is D.Int32:
        return [k * 7 - 30 for k in range(n)]
    return [k % 3 != 1 for k in range(n)]


def expected(t):
    """[t[i] for i in ordinal order] laid out in the leaf-mode shape, first
    mode fastest."""
    vals = [t[i] for i in range(t.size())]
    return np.array(vals, dtype=NP[t.dtype()]).reshape(leaf_shape(t.layout), order="F")


def leaf_shape(layout):
    # leaf modes, depth first: the DLPack shape
    out = []

    def walk(s):
        if isinstance(s, int):
            out.append(s)
        else:
            for x in s:
                walk(x)
    walk(layout.shape.top_level)
    return tuple(out)


def fill(carrier, dtype, n):
    for k, v in enumerate(values(dtype, n)):
        carrier[k] = v
    return carrier


def make(kind, dtype, n):
    if kind == "CPU":
        return fill(CPU(n, dtype=dtype), dtype, n)
    if kind == "Generic":
        return Generic(values(dtype, n), dtype=dtype)
    if kind == "FileBacked":
        c = FileBacked(dtype=dtype)
        sw.move(sw.Tensor(fill(CPU(n, dtype=dtype), dtype, n), 0, L([n], [1])), c)
        return c
    if kind == "Evictable":
        return Evictable(fill(CPU(n, dtype=dtype), dtype, n), FileBacked(dtype=dtype))
    if kind == "Evictable-evicted-promoted":
        e = Evictable(fill(CPU(n, dtype=dtype), dtype, n), FileBacked(dtype=dtype))
        e.evict()
        e.promote()
        return e
    if kind == "Defined":
        cls = new_class()
        define(cls)
        return filled(cls, values(dtype, n), dtype=dtype)
    raise AssertionError(kind)


KINDS = ["CPU", "Generic", "FileBacked", "Evictable", "Evictable-evicted-promoted", "Defined"]
DTYPES = [D.Float32, D.Int32, D.Bool]
# (layout, slots): flat, hierarchical, a slice-like offset stride, a permute
# (row-major) and a broadcast (stride 0) view.
LAYOUTS = [
    (L([12], [1]), 12),
    (L([[2, 3], 2], [[1, 2], 6]), 12),
    (L([3, 2], [2, 6]), 12),
    (L([3, 4], [4, 1]), 12),
    (L([4, 3], [1, 0]), 4),
]


def supported(kind, dtype):
    return not (kind.startswith(("FileBacked", "Evictable")) and dtype is D.Bool)


# FileBacked (and so an Evictable's FileBacked tier) stores Float32 and Int32 only.
COMBOS = [(k, d) for k in KINDS for d in DTYPES if supported(k, d)]


@pytest.mark.parametrize("kind,dtype", COMBOS, ids=[f"{k}-{d!r}" for k, d in COMBOS])
@pytest.mark.parametrize("li", range(len(LAYOUTS)))
def test_asarray_matches_ordinal_values_on_every_carrier_and_dtype(kind, dtype, li):
    layout, slots = LAYOUTS[li]
    c = make(kind, dtype, slots)
    t = sw.Tensor(c, 0, layout)
    want = expected(t)
    v = c.version
    for got in (np.asarray(t), np.array(t)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert c.version == v and t.autograd_ctx is None


@pytest.mark.parametrize("dtype", [D.Float32, D.Int32])
@pytest.mark.parametrize("li", range(len(LAYOUTS)))
def test_exportable_tensor_gives_what_from_dlpack_gives(dtype, li):
    layout, slots = LAYOUTS[li]
    t = sw.Tensor(make("CPU", dtype, slots), 0, layout)
    a, b = np.asarray(t), np.from_dlpack(t)
    assert a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    assert a.flags.writeable == b.flags.writeable


def test_cpu_array_aliases_the_carrier():
    c = make("CPU", D.Float32, 12)
    t = sw.Tensor(c, 2, L([3, 2], [1, 3]))
    a = np.asarray(t)
    a[1, 1] = 99.0
    assert t[1, 1] == 99.0 and c[2 + 1 + 3] == 99.0
    assert np.shares_memory(a, np.asarray(t))
    c[2] = -1.0
    assert a[0, 0] == -1.0


def test_owned_carrier_gives_read_only_array():
    src = make("CPU", D.Float32, 4)
    t = sw.Tensor(src, 0, L([4], [1]))
    token = src._claim_ownership()
    try:
        a = np.asarray(t)
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 1.0
    finally:
        src._relinquish_ownership(token)
    assert np.asarray(t).flags.writeable


def test_immutable_cpu_gives_read_only_array():
    c = CPU(1).new_like(values(D.Float32, 3), mutable=False)
    t = sw.Tensor(c, 0, L([3], [1]))
    a = np.asarray(t)
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, np.float32(values(D.Float32, 3)))
    b = np.array(t)  # copy=True: a writable copy
    assert b.flags.writeable and not np.shares_memory(a, b)


def test_copy_true_gives_a_fresh_writable_array():
    c = make("CPU", D.Float32, 6)
    t = sw.Tensor(c, 0, L([2, 3], [1, 2]))
    a = np.array(t, copy=True)
    assert not np.shares_memory(a, np.asarray(t))
    a[0, 0] = 123.0
    assert t[0, 0] == values(D.Float32, 6)[0]
    b = t.__array__(copy=True)
    assert b.flags.writeable and not np.shares_memory(b, np.asarray(t))


@pytest.mark.parametrize("kind", ["Generic", "FileBacked", "Evictable", "Defined"])
def test_copy_false_raises_value_error_when_a_copy_is_needed(kind):
    c = make(kind, D.Float32, 4)
    t = sw.Tensor(c, 0, L([4], [1]))
    v = c.version
    with pytest.raises(ValueError, match="without copying"):
        np.asarray(t, copy=False)
    with pytest.raises(ValueError, match="without copying"):
        t.__array__(copy=False)
    assert c.version == v


def test_copy_false_on_cpu_is_the_view():
    t = sw.Tensor(make("CPU", D.Int32, 4), 0, L([4], [1]))
    a = np.asarray(t, copy=False)
    a[0] = 5
    assert t[0] == 5


def test_dtype_converts_and_copy_false_refuses_a_conversion():
    t = sw.Tensor(make("CPU", D.Int32, 4), 0, L([2, 2], [1, 2]))
    a = np.asarray(t, dtype=np.float64)
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, expected(t).astype(np.float64))
    assert t.__array__(np.int64).dtype == np.int64
    with pytest.raises(ValueError):
        t.__array__(np.float64, copy=False)
    g = sw.Tensor(make("Generic", D.Bool, 3), 0, L([3], [1]))
    np.testing.assert_array_equal(np.asarray(g, dtype=np.int8), np.int8([1, 0, 1]))


def test_argument_errors():
    t = sw.Tensor(make("CPU", D.Float32, 2), 0, L([2], [1]))
    with pytest.raises(TypeError):
        t.__array__(None, None, None)
    with pytest.raises(TypeError):
        t.__array__(order="F")
    with pytest.raises(TypeError):
        t.__array__(None, dtype=None)


def test_scaled_int32_raises_not_implemented_like_an_element_read():
    t = sw.friendly.scaled_int32([1, 2, 3], scale=0.5)
    with pytest.raises(NotImplementedError):
        t[0]
    with pytest.raises(NotImplementedError, match="ScaledInt32.*one by one"):
        np.asarray(t)


@pytest.mark.parametrize("kind", ["CPU", "Generic", "FileBacked", "Evictable", "Defined"])
def test_released_carrier_raises_what_a_read_raises(kind):
    c = make(kind, D.Float32, 4)
    t = sw.Tensor(c, 0, L([4], [1]))
    c.release()
    with pytest.raises(RuntimeError) as read:
        t[0]
    with pytest.raises(type(read.value), match="released"):
        np.asarray(t)
    assert c.is_released()


def test_evicted_evictable_raises_what_a_read_raises():
    e = make("Evictable", D.Float32, 4)
    t = sw.Tensor(e, 0, L([4], [1]))
    e.evict()
    with pytest.raises(RuntimeError, match="evicted"):
        t[0]
    with pytest.raises(RuntimeError, match="evicted"):
        np.asarray(t)
    assert e.is_evicted()


def test_pending_destination_raises_what_a_read_raises():
    n = 1 << 16
    src = sw.Tensor(make("CPU", D.Float32, n), 0, L([n], [1]))
    d = CPU(n)
    t = sw.Tensor(d, 0, L([n], [1]))
    with held():
        h = sw.move_async(src, d)
        with pytest.raises(RuntimeError, match="pending") as read:
            t[0]
        with pytest.raises(RuntimeError, match="pending") as conv:
            np.asarray(t)
        assert str(conv.value) == str(read.value)
    r = h.wait()
    np.testing.assert_array_equal(np.asarray(r), np.float32(values(D.Float32, n)))


def test_pending_source_is_readable_and_read_only():
    n = 1 << 16
    c = make("CPU", D.Float32, n)
    t = sw.Tensor(c, 0, L([n], [1]))
    with held():
        h = sw.move_async(t, FileBacked())
        a = np.asarray(t)
        assert not a.flags.writeable
        np.testing.assert_array_equal(a[:3], np.float32(values(D.Float32, 3)))
        del a
    h.wait()


def test_copy_flag_hook_runs_before_the_carrier_is_read():
    c = make("CPU", D.Float32, 4)
    t = sw.Tensor(c, 0, L([4], [1]))

    class Releases:
        def __bool__(self):
            c.release()
            return True

    with pytest.raises(RuntimeError, match="released"):
        t.__array__(copy=Releases())
    assert c.is_released()


def test_dropped_arrays_leave_no_reference_behind():
    import gc
    import sys
    t = sw.Tensor(make("CPU", D.Float32, 8), 0, L([8], [1]))
    g = sw.Tensor(make("Generic", D.Float32, 8), 0, L([8], [1]))
    for x in (t, g):
        for _ in range(5):
            np.asarray(x)
        gc.collect()
        before = sys.getrefcount(x)
        for _ in range(200):
            np.asarray(x)
            np.array(x, dtype=np.float64)
        gc.collect()
        assert sys.getrefcount(x) == before


def test_no_version_change_and_no_autograd_node():
    c = make("CPU", D.Float32, 6)
    t = sw.Tensor(c, 0, L([6], [1]))
    view = t[1:4]  # grad mode is on: the view records its node
    node = view.autograd_ctx
    assert node is not None
    v = c.version
    a = np.asarray(view)
    b = np.array(view, copy=True)
    g = np.asarray(sw.Tensor(make("Generic", D.Float32, 6), 0, L([6], [1])))
    np.testing.assert_array_equal(a, b)
    assert g.shape == (6,)
    assert c.version == v
    assert view.autograd_ctx is node and t.autograd_ctx is None and t.grad is None


def test_python_carrier_without_dlpack_is_copied_with_its_own_reads():
    class PyList(sw.Carrier):
        def __init__(self, vals):
            super().__init__()
            self.vals = list(vals)
            self.reads = 0

        def size(self):
            return len(self.vals)

        def dtype(self):
            return D.Float32

        def get_value(self, i):
            self.reads += 1
            return self.vals[i]

    c = PyList([1.0, 2.0, 3.0, 4.0])
    t = sw.Tensor(c, 0, L([2, 2], [2, 1]))
    np.testing.assert_array_equal(np.asarray(t), np.float32([[1, 2], [3, 4]]))
    assert c.reads == 4


def test_python_carrier_exporting_cpu_memory_is_a_view():
    cpu = make("CPU", D.Float32, 4)
    f = Foreign(cpu, info=lambda s: {"pointer": s.cpu.pointer(), "device_type": 1,
                                     "device_id": 0})
    t = sw.Tensor(f, 0, L([4], [1]))
    a = np.asarray(t)
    cpu[0] = 42.0
    assert a[0] == 42.0


def test_python_carrier_on_another_device_is_copied():
    cpu = make("CPU", D.Float32, 4)
    t = sw.Tensor(Foreign(cpu), 0, L([4], [1]))  # reports device (2, 0)
    a = np.asarray(t)
    np.testing.assert_array_equal(a, np.float32(values(D.Float32, 4)))
    cpu[0] = 42.0
    assert a[0] != 42.0


def test_hook_releasing_the_carrier_midway_raises():
    class Releasing(sw.Carrier):
        def size(self):
            return 4

        def dtype(self):
            return D.Float32

        def get_value(self, i):
            if i == 2:
                self.release()
            return float(i)

    c = Releasing()
    with pytest.raises(RuntimeError, match="released"):
        np.asarray(sw.Tensor(c, 0, L([4], [1])))


def test_large_file_backed_copy():
    # one pread of the span, then the strided gather
    n = 100_000
    c = make("FileBacked", D.Int32, n)
    t = sw.Tensor(c, 1, L([10, n // 20], [2, 20]))
    full = np.int32(values(D.Int32, n))
    want = np.lib.stride_tricks.as_strided(full[1:], shape=(10, n // 20), strides=(8, 80))
    np.testing.assert_array_equal(np.asarray(t), want)


def test_copy_flag_whose_truth_raises_propagates_before_any_read():
    class Bad:
        def __bool__(self):
            raise LookupError("no truth")

    c = make("CPU", D.Float32, 2)
    t = sw.Tensor(c, 0, L([2], [1]))
    v = c.version
    with pytest.raises(LookupError, match="no truth"):
        t.__array__(copy=Bad())
    assert c.version == v and not c.is_released()
