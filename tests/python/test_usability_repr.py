"""str(t), repr(t) and the carriers' repr (issue 10 item 2, issue 18 item 2).
str(t) shows the values as NumPy prints the same array (leaf-mode shape,
summarized past 1000 elements), then dtype, carrier class and layout.
repr(t) (T-14, revised) is Tensor(values, dtype=..., carrier=..., offset=...,
layout=...), reading values only when the carrier can serve them now; else
the reason (released, pending move, evicted, non-resident tiles). Neither
raises. A tensor whose values cannot be read prints a marker."""
import numpy as np
import pytest

import strideweave as sw
from strideweave import CPU, Evictable, FileBacked, Generic, TileSet
from extension_for_tests import define, filled, new_class
from loop_device import loop_device  # noqa: F401
from moves_for_tests import held
from tiled_helpers import full_tensor, numbered, states

D = sw.DType


def L(shape, stride):
    return sw.Layout(sw.Shape(shape), sw.Stride(stride))


def values_part(t):
    return str(t).rsplit("\n", 1)[0]


def tensor_of(arr):
    """A CPU Tensor whose leaf-mode view equals `arr` (column-major)."""
    dt = {np.dtype(np.float32): D.Float32, np.dtype(np.int32): D.Int32,
          np.dtype(np.bool_): D.Bool}[arr.dtype]
    flat = arr.reshape(-1, order="F")
    c = CPU(flat.size, dtype=dt)
    t = sw.Tensor(c, 0, sw.Layout.canonical(sw.Shape(list(arr.shape))))
    for k, v in enumerate(flat.tolist()):
        t[k] = v
    return t


RNG = np.random.default_rng(1234)
SHAPES = [(1,), (5,), (2, 3), (3, 1, 2), (2, 2, 2, 2), (40, 30), (1001,), (10, 10, 11),
          (3, 400), (8, 8, 8, 8)]


def sample(kind, n):
    if kind == "int":
        return RNG.integers(-1000, 1000, n).astype(np.int32)
    if kind == "bool":
        return RNG.integers(0, 2, n).astype(bool)
    if kind == "whole":
        return RNG.integers(-50, 50, n).astype(np.float32)
    if kind == "normal":
        return RNG.standard_normal(n).astype(np.float32)
    if kind == "tiny":
        return (RNG.standard_normal(n) * 1e-6).astype(np.float32)
    if kind == "huge":
        return (RNG.standard_normal(n) * 1e9).astype(np.float32)
    a = RNG.standard_normal(n).astype(np.float32)
    a[0] = np.nan
    if n > 1:
        a[-1] = -np.inf
    return a


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("kind", ["int", "bool", "whole", "normal", "tiny", "huge", "nonfinite"])
def test_str_values_match_numpy(shape, kind):
    arr = sample(kind, int(np.prod(shape))).reshape(shape, order="F")
    t = tensor_of(arr)
    assert values_part(t) == str(arr)
    assert values_part(t) == str(np.asarray(t))


@pytest.mark.parametrize("vals", [[0.0], [0.0, 0.0], [-0.0, 1.0], [np.inf], [np.nan, 1.0],
                                  [0.000123456, 0.1], [1e8], [99999999.0], [1 / 3, 2 / 3, 100],
                                  [123456.789, 1.5], [1e-30, 1.0], [3.4e38, -3.4e38]])
def test_str_float_edge_values_match_numpy(vals):
    arr = np.array(vals, dtype=np.float32)
    assert values_part(tensor_of(arr)) == str(arr)


def test_str_layout_views_match_numpy():
    c = CPU(24)
    base = sw.Tensor(c, 0, L([24], [1]))
    for k in range(24):
        base[k] = k * 0.5
    for t in (sw.Tensor(c, 1, L([3, 4], [4, 1])),         # row-major (a permute)
              sw.Tensor(c, 0, L([[2, 3], 2], [[1, 2], 6])),  # hierarchical: 3 leaf modes
              sw.Tensor(c, 2, L([4, 3], [1, 0])),         # broadcast (stride 0)
              base[2:9]):                                 # slice
        assert values_part(t) == str(np.asarray(t))


def test_str_tail_names_dtype_carrier_and_layout():
    t = sw.friendly.tensor([[1, 2], [3, 4]], dtype=D.Int32)
    text = str(t)
    assert text == ("[[1 2]\n [3 4]]\ndtype=Int32, carrier=CPU, layout="
                    + repr(t.layout))
    assert print_of(t) == text + "\n"


def print_of(t):
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(t)
    return out.getvalue()


def test_str_summarizes_and_reads_only_edges():
    reads = []

    class Counting(sw.Carrier):
        def size(self):
            return 10_000

        def dtype(self):
            return D.Int32

        def get_value(self, i):
            reads.append(i)
            return i

    t = sw.Tensor(Counting(), 0, L([100, 100], [1, 100]))
    text = values_part(t)
    assert "..." in text
    assert len(reads) == 36  # 6 x 6 edge elements, nothing else
    assert text == str(np.arange(10_000, dtype=np.int32).reshape(100, 100, order="F"))


def test_str_of_a_large_tensor_is_summarized():
    # speed is measured in bench/repr.py; here, what it shows
    t = sw.friendly.arange(10 ** 6, dtype=D.Int32)
    assert values_part(t) == "[     0      1      2 ... 999997 999998 999999]"
    assert values_part(t) == str(np.arange(10 ** 6, dtype=np.int32))


def repr_of_values(t):
    """What repr(t) must be when the values are shown: str's values block,
    continuation lines under the first, then the metadata."""
    first, *rest = values_part(t).split("\n")
    values = "\n".join([first] + [("       " + line) if line else "" for line in rest])
    return (f"Tensor({values}, dtype={t.dtype().name}, carrier={type(t.carrier).__name__}, "
            f"offset={t.offset}, layout={t.layout!r})")


@pytest.mark.parametrize("shape", [(1,), (5,), (2, 3), (3, 1, 2), (2, 2, 2, 2), (1001,),
                                   (40, 30)], ids=str)
@pytest.mark.parametrize("kind", ["int", "bool", "normal", "nonfinite"])
def test_t14_repr_shows_the_values_then_the_metadata(shape, kind):
    arr = sample(kind, int(np.prod(shape))).reshape(shape, order="F")
    t = tensor_of(arr)
    assert repr(t) == repr_of_values(t)
    assert repr(t).startswith("Tensor(" + str(arr).split("\n")[0])


def test_t14_repr_issue_example():
    t = sw.friendly.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert repr(t) == ("Tensor([[1. 2.]\n        [3. 4.]], dtype=Float32, carrier=CPU, "
                       "offset=0, layout=Layout(Shape([2, 2]), Stride([1, 2])))")
    three = sw.friendly.tensor(np.arange(8, dtype=np.int32).reshape(2, 2, 2))
    assert repr(three).split(", dtype")[0] == (
        "Tensor([[[0 1]\n         [2 3]]\n\n        [[4 5]\n         [6 7]]]")


def test_t14_repr_of_a_large_tensor_reads_only_the_edges():
    reads = []

    class Counting(sw.Carrier):
        def size(self):
            return 10_000

        def dtype(self):
            return D.Int32

        def get_value(self, i):
            reads.append(i)
            return i

    t = sw.Tensor(Counting(), 0, L([100, 100], [1, 100]))
    assert "..." in repr(t) and len(reads) == 36
    assert repr(t) == repr_of_values(t)


def test_t14_repr_never_raises_for_hooks_that_raise():
    class Flaky(sw.Carrier):
        broken = False

        def size(self):
            if self.broken:
                raise LookupError("remote store offline")
            return 4

        def dtype(self):
            if self.broken:
                raise LookupError("remote store offline")
            return D.Float32

        def get_value(self, i):
            raise LookupError("remote store offline")

        def is_released(self):
            if self.broken:
                raise LookupError("remote store offline")
            return False

    c = Flaky()
    t = sw.Tensor(c, 0, L([4], [1]))
    tail = ", dtype=Float32, carrier=Flaky, offset=0, layout=" + repr(t.layout) + ")"
    assert repr(t) == "Tensor(<values unavailable: remote store offline>" + tail
    c.broken = True
    assert repr(t).startswith("Tensor(<values unavailable: ") and repr(t).endswith(tail)


def test_t14_repr_of_released_pending_and_evicted_names_the_reason():
    c = CPU(3)
    t = sw.Tensor(c, 1, L([2], [1]))
    c.release()
    assert repr(t) == ("Tensor(<values unavailable: released>, dtype=Float32, carrier=CPU, "
                       "offset=1, layout=" + repr(t.layout) + ")")
    e = Evictable(CPU(2), FileBacked())
    te = sw.Tensor(e, 0, L([2], [1]))
    assert repr(te).startswith("Tensor([0. 0.], ")
    e.evict()
    assert repr(te).startswith("Tensor(<values unavailable: evicted>, dtype=Float32")
    assert e.is_evicted()  # repr promoted nothing
    n = 1 << 16
    d = CPU(n)
    with held():
        h = sw.move_async(sw.friendly.zeros(n), d)
        r = repr(sw.Tensor(d, 0, L([n], [1])))  # returns without waiting for the move
        assert r.startswith("Tensor(<values unavailable: pending move>, dtype=Float32")
        assert not h.done
    h.wait()
    assert repr(sw.Tensor(d, 0, L([n], [1]))).startswith("Tensor([0. 0. 0. ... 0. 0. 0.]")


def test_t14_repr_of_tiled_evictable_with_non_resident_tiles():
    te = numbered((2, 2), (2, 3), secondary=CPU(0))
    t = full_tensor(te)
    assert repr(t) == repr_of_values(t)
    te.evict(TileSet([(1, 0)]))
    before = states(te)
    r = repr(t)
    assert r.startswith("Tensor(<values unavailable: non-resident tiles: 1 of 4 in the "
                        "secondary tier; promote them to see values>, dtype=Float32, "
                        "carrier=TiledEvictable")
    assert states(te) == before  # repr moved no tile
    te.promote(TileSet([(1, 0)]))
    assert repr(t) == repr_of_values(t)


def test_tiled_evictable_repr_shows_grid_tile_tiers_and_tiles():
    te = numbered((2, 3), (4, 1), secondary=FileBacked())
    assert repr(te) == ("TiledEvictable(size=24, dtype=Float32, grid=(2, 3), tile=(4, 1), "
                        "tiers=CPU/FileBacked, tiles: 6 primary, 0 secondary, 0 implicit, "
                        "0 invalid)")
    te.evict(TileSet([(0, 0), (1, 2)]))
    assert "tiles: 4 primary, 2 secondary," in repr(te)
    one = numbered((3,), (2,))
    assert "grid=(3,), tile=(2,)" in repr(one)


def test_block_device_carrier_repr_shows_device_and_extent(loop_device):
    dev = sw.BlockDevice(loop_device)
    try:
        c = dev.allocate(10)
        start = c.device_offset_bytes
        assert repr(c) == (f"BlockDeviceCarrier(size=10, dtype=Float32, "
                           f"device={loop_device!r}, extent=[{start}, "
                           f"{start + c.extent_bytes}) bytes)")
        t = sw.Tensor(c, 0, L([10], [1]))
        assert repr(t).startswith("Tensor([0. 0. 0. 0. 0. 0. 0. 0. 0. 0.], dtype=Float32")
        c.release()
        assert "released" in repr(c) and "values unavailable: released" in repr(t)
        del c, t
    finally:
        import gc
        gc.collect()
        dev.close()


def test_str_marker_for_a_hook_that_raises():
    class Failing(sw.Carrier):
        def size(self):
            return 2

        def dtype(self):
            return D.Float32

        def get_value(self, i):
            raise LookupError("remote store offline")

    text = str(sw.Tensor(Failing(), 0, L([2], [1])))
    assert text.startswith("<values unavailable: remote store offline>\ndtype=Float32")


@pytest.mark.parametrize("kind", ["CPU", "Generic", "FileBacked"])
def test_str_of_released_tensor_prints_a_marker(kind):
    c = CPU(3) if kind == "CPU" else Generic([1.0, 2.0, 3.0]) if kind == "Generic" else None
    if c is None:
        c = FileBacked()
        sw.move(sw.friendly.tensor([1.0, 2.0, 3.0]), c)
    t = sw.Tensor(c, 0, L([3], [1]))
    c.release()
    text = str(t)
    assert text.startswith("<values unavailable: ") and "released" in text.split("\n")[0]
    assert text.endswith("carrier=" + kind + ", layout=" + repr(t.layout))
    assert "released" in repr(c)


def test_str_of_evicted_and_pending_tensors_print_markers():
    e = Evictable(CPU(2), FileBacked())
    t = sw.Tensor(e, 0, L([2], [1]))
    assert values_part(t) == "[0. 0.]"
    e.evict()
    assert values_part(t).startswith("<values unavailable: ") and "evicted" in values_part(t)
    n = 1 << 16
    src = sw.friendly.zeros(n)
    d = CPU(n)
    with held():
        h = sw.move_async(src, d)
        text = str(sw.Tensor(d, 0, L([n], [1])))
        assert text.startswith("<values unavailable: ") and "pending" in text.split("\n")[0]
        assert "pending" in repr(d)
    h.wait()
    assert "pending" not in repr(d)


def test_str_of_scaled_int32_prints_a_marker():
    t = sw.friendly.scaled_int32([1, 2], scale=0.5)
    assert str(t).startswith("<values not shown: ")
    assert "ScaledInt32" in str(t)


def test_carrier_reprs():
    c = CPU(24)
    assert repr(c) == "CPU(size=24, dtype=Float32)"
    assert repr(CPU(3, dtype=D.Int32, mutable=False)) == "CPU(size=3, dtype=Int32, immutable)"
    assert repr(Generic([True, False], dtype=D.Bool)) == "Generic(size=2, dtype=Bool)"
    token = c._claim_ownership()
    assert repr(c) == "CPU(size=24, dtype=Float32, owned)"
    c._relinquish_ownership(token)
    c.release()
    assert repr(c) == "CPU(size=0, dtype=Float32, released)"
    f = FileBacked(dtype=D.Int32)
    assert repr(f) == f"FileBacked(size=0, dtype=Int32, path={str(f.path)!r})"


def test_evictable_repr_shows_residency():
    e = Evictable(CPU(4), FileBacked())
    assert repr(e) == "Evictable(size=4, dtype=Float32, resident in CPU)"
    e.evict()
    assert repr(e) == "Evictable(size=4, dtype=Float32, evicted to FileBacked)"
    e.promote()
    assert repr(e) == "Evictable(size=4, dtype=Float32, resident in CPU)"
    assert "owned" in repr(e.primary)


def test_python_carrier_reprs():
    class Plain(sw.Carrier):
        def size(self):
            return 5

        def dtype(self):
            return D.Int32

    class Own(Plain):
        def __repr__(self):
            return "Own<5>"

    class Broken(sw.Carrier):
        def size(self):
            raise LookupError("no size")

    assert repr(Plain()) == "Plain(size=5, dtype=Int32)"
    assert repr(Own()) == "Own<5>"
    assert repr(Broken()).startswith("Broken(size=?")
    cls = new_class("Remote")
    define(cls)
    c = filled(cls, [1.0, 2.0])
    assert repr(c) == "Remote(size=2, dtype=Float32)"
    assert values_part(sw.Tensor(c, 0, L([2], [1]))) == "[1. 2.]"


def test_str_hook_releasing_midway_prints_a_marker():
    class Releasing(sw.Carrier):
        def size(self):
            return 4

        def dtype(self):
            return D.Float32

        def get_value(self, i):
            if i == 1:
                self.release()
            return float(i)

    c = Releasing()
    text = str(sw.Tensor(c, 0, L([4], [1])))
    assert text.startswith("<values unavailable: ") and "released" in text.split("\n")[0]
    assert c.is_released()
