"""A fuzz harness over the public API: adversarial values thrown at every
public constructor and method. The only property: each call returns or
raises one of the exception types the API documents -- never SystemError,
never a crash (under the sanitizer build in CI, never a memory error).

Hostile values include objects whose __index__ / __float__ / __bool__ /
__iter__ raise, or release the carrier under test, or return absurd
values; deep, huge, negative, bool and float numbers; keys of every shape.

The number of examples per target comes from STRIDEWEAVE_FUZZ_EXAMPLES
(default 60, about a minute for the whole file); `make fuzz` runs many
more.
"""

import gc
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import strideweave as sw
from strideweave import CPU, FileBacked, Generic, Layout, Shape, Stride, Tensor
from strideweave.carriers import extension as ext
from strideweave.carriers import move as mv
from strideweave import friendly

EXAMPLES = int(os.environ.get("STRIDEWEAVE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

# What the API documents it may raise for bad input.
DOCUMENTED = (TypeError, ValueError, IndexError, KeyError, OverflowError, RuntimeError,
              NotImplementedError, BufferError, OSError, MemoryError, AttributeError,
              ZeroDivisionError, LookupError, RecursionError)


class Boom(Exception):
    """Raised by hostile hooks: must propagate unchanged."""


# The carrier hostile values act on (reset per example).
VICTIM = {"carrier": None}


def _release_victim():
    c = VICTIM["carrier"]
    if c is not None and not c.is_released() and not c.is_owned():
        try:
            c.release()
        except RuntimeError:
            pass  # pending in a move: refusing is fine


class RaisingIndex:
    def __index__(self):
        raise Boom("index")

    def __float__(self):
        raise Boom("float")

    def __bool__(self):
        raise Boom("bool")


class ReleasingNumber:
    def __init__(self, value):
        self.value = value

    def __index__(self):
        _release_victim()
        return self.value

    def __float__(self):
        _release_victim()
        return float(self.value)

    def __bool__(self):
        _release_victim()
        return bool(self.value)


class HostileIterable:
    def __init__(self, n, fail_at):
        self.n, self.fail_at = n, fail_at

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail_at:
                _release_victim()
                raise Boom("iter")
            yield float(i)

    def __len__(self):
        return 10**3


class LyingLen(list):
    def __len__(self):
        return 10**3


scalars = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70),
    st.integers(min_value=-3, max_value=40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.just(object()),
    st.builds(RaisingIndex),
    st.builds(ReleasingNumber, st.integers(min_value=-2, max_value=8)),
    st.builds(HostileIterable, st.integers(0, 6), st.integers(0, 6)),
    st.just(np.float32(1.5)),
    st.just(np.int64(3)),
    st.just(slice(None)),
    st.just(slice(1, None, 2)),
    st.just(Ellipsis),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.builds(LyingLen, st.lists(inner, max_size=3))),
    max_leaves=12)
arg_lists = st.lists(values, max_size=4)


def small_layout():
    return st.sampled_from([
        Layout(Shape(4), Stride(1)),
        Layout(Shape(2, 3), Stride(1, 2)),
        Layout(Shape([2, 2], 2), Stride([1, 2], 4)),
        Layout(Shape(3), Stride(0)),
        Layout(Shape(2, 2), Stride(2, 5)),
        Layout(Shape(), Stride()),
    ])


def make_victim(kind):
    if kind == "cpu":
        c = CPU(16)
    elif kind == "generic":
        c = Generic([float(i) for i in range(16)])
    elif kind == "file":
        c = FileBacked()
        c._allocate(16)
    else:
        c = CPU(16, dtype=sw.DType.Int32)
    VICTIM["carrier"] = c
    return c


CALLS = [0]


@pytest.fixture(scope="module", autouse=True)
def _report_calls():
    yield
    print(f"\nfuzz: {CALLS[0]} calls, {EXAMPLES} examples per target")


def call(fn, *args, **kwargs):
    CALLS[0] += 1
    try:
        return fn(*args, **kwargs)
    except Boom:
        return None
    except SystemError:  # pragma: no cover - this is the bug we look for
        raise
    except DOCUMENTED:
        return None


carrier_kinds = st.sampled_from(["cpu", "generic", "file", "int"])


# ---- layouts ------------------------------------------------------------------------


@FUZZ
@given(arg_lists, arg_lists)
def test_fuzz_shape_stride_layout_construction(a, b):
    s = call(Shape, *a)
    t = call(Stride, *b)
    call(Layout, s, t)
    call(Layout, *a)
    if isinstance(s, Shape):
        call(lambda: (s.top_level, s.depth, s.size, len(s), repr(s), hash(s)))
        call(Layout.canonical, s)


@FUZZ
@given(small_layout(), values, values)
def test_fuzz_layout_methods(layout, x, y):
    call(layout, x)
    call(lambda: layout[x])
    call(layout.append, x)
    call(layout.concat, x) if hasattr(layout, "concat") else None
    call(sw.permute, x, y)
    call(lambda: layout.infix())
    call(lambda: layout == x)


# ---- carriers ----------------------------------------------------------------------------


@FUZZ
@given(values, values, values, values)
def test_fuzz_carrier_constructors(a, b, c, d):
    VICTIM["carrier"] = None
    call(CPU, a, dtype=b if isinstance(b, sw.DType) else sw.DType.Float32, mutable=c, empty=d)
    call(CPU, a, mutable=b)
    call(Generic, a, dtype=sw.DType.Int32)
    call(Generic, a, mutable=c)
    call(FileBacked, a if isinstance(a, str) else None, mutable=c)
    call(FileBacked, a)


@FUZZ
@given(carrier_kinds, values, values, values)
def test_fuzz_carrier_access(kind, i, v, w):
    c = make_victim(kind)
    call(lambda: c[i])
    call(c.__setitem__, i, v)
    call(c.get_value, i)
    call(c.set_value, i, w)
    call(c.new_like, v, mutable=w)
    call(c.allocate_like, i, mutable=w, empty=v)
    call(c.supports_storage_dtype, v)
    call(c._claim_ownership) if isinstance(v, bool) and v else None
    call(c.release)
    call(lambda: c[0])


# ---- tensors, views, export --------------------------------------------------------------


@FUZZ
@given(carrier_kinds, small_layout(), values, values, values)
def test_fuzz_tensor_construction_and_access(kind, layout, off, key, v):
    c = make_victim(kind)
    call(Tensor, c, off, layout)
    t = call(Tensor, c, 0, layout)
    if t is None:
        return
    call(lambda: t[key])
    call(t.__setitem__, key, v)
    call(t.tolist)
    call(sw.reshape, t, key)
    call(sw.broadcast_to, t, key)
    call(sw.permute, t, key)


@FUZZ
@given(carrier_kinds, small_layout(), values, values, values, values)
def test_fuzz_dlpack_export(kind, layout, stream, max_version, dl_device, copy):
    c = make_victim(kind)
    t = call(Tensor, c, 0, layout)
    if t is None:
        return
    cap = call(t.__dlpack__, stream=stream, max_version=max_version, dl_device=dl_device,
               copy=copy)
    call(t.__dlpack_device__)
    if cap is not None:
        call(np.from_dlpack, t)
    del cap
    gc.collect()


@FUZZ
@given(values, values, values, values)
def test_fuzz_friendly_factories(v, dtype, layout, n):
    VICTIM["carrier"] = None
    call(friendly.tensor, v, dtype=dtype if isinstance(dtype, sw.DType) else sw.DType.Float32)
    call(friendly.tensor, v, layout=layout)
    call(friendly.zeros, n)
    call(friendly.full, n, v)
    call(friendly.arange, n)


# ---- movement, tiers, extension ----------------------------------------------------------


@FUZZ
@given(carrier_kinds, carrier_kinds, small_layout(), values)
def test_fuzz_move(src_kind, dst_kind, layout, junk):
    src = make_victim(src_kind)
    t = call(Tensor, src, 0, layout)
    dst = {"cpu": CPU(0), "generic": Generic([0.0] * 8), "file": FileBacked(),
           "int": CPU(16, dtype=sw.DType.Int32)}[dst_kind]
    if t is not None:
        h = call(sw.move_async, t, dst)
        if h is not None:
            call(h.wait)
    call(sw.move, junk, dst)
    call(sw.move, t, junk)
    call(mv.dispatch_move, junk, junk)
    call(mv.register_move_operation, junk, CPU, sw.MoveOperation)


@FUZZ
@given(values, values)
def test_fuzz_evictable(a, b):
    VICTIM["carrier"] = None
    call(sw.Evictable, a, b)
    e = call(sw.Evictable, CPU(4), FileBacked())
    if e is not None:
        call(e.evict)
        call(lambda: e[a])
        call(e.promote)
        call(e.__setitem__, a, b)
        call(e.new_like, a)
        call(e.release)


@FUZZ
@given(arg_lists)
def test_fuzz_extension_values(args):
    for cls in (ext.Unsupported, ext.StorageProvider, ext.TransferProvider, ext.TransferRoute,
                ext.TransferRequest, ext.PreparedTransfer, ext.CarrierDefinition):
        call(cls, *args)
    call(sw.register_carrier_definition, *args[:2])
