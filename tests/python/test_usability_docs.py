"""What a user reads: every public class, function, method and property has a
plain docstring and a signature inspect can read; neither docstrings nor error
messages quote internal requirement ids or talk about the "seed" or the
"contract"; strideweave.__version__ is meson.build's version."""

import inspect
import pathlib
import re
import tomllib
import types

import pytest

import strideweave as sw
from strideweave import carriers, friendly
from strideweave import _C
from strideweave.carriers import extension as ext
from strideweave.carriers import move as mv

ROOT = pathlib.Path(__file__).resolve().parents[2]
ID = re.compile(r"\b[A-Z]{1,2}-\d+")
WORDS = re.compile(r"\b(seed|contract)s?\b", re.IGNORECASE)


def public_modules():
    mods = [sw, friendly, sw.layout, sw.operation, carriers]
    mods += [getattr(carriers, n) for n in carriers.__all__
             if isinstance(getattr(carriers, n), types.ModuleType)]
    return mods


def public_objects():
    """(qualified name, object) for every name in a public module's __all__."""
    seen, out = set(), []
    for mod in public_modules():
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            seen.add(id(obj))
            out.append((f"{mod.__name__}.{name}", obj))
    return out


C_METHOD_KINDS = (types.MethodDescriptorType, types.ClassMethodDescriptorType,
                  types.BuiltinFunctionType, staticmethod)
DATA_DESCRIPTORS = (property, types.GetSetDescriptorType, types.MemberDescriptorType)


def members(cls):
    """(name, raw attribute) for the methods and properties a class defines.

    Methods written in C count whatever their name (hooks such as _copy and
    protocol methods such as __dlpack__ are part of what users call or
    override); the dunder methods Python writes for dataclasses, enums and
    Protocols carry no docstring of ours and are left out, as are class
    attributes that hold data (DType.Float32, MoveOperation.source_class)."""
    for name, raw in vars(cls).items():
        if name in ("__doc__", "__new__", "__init__", "__module__", "__signature__"):
            continue
        if isinstance(raw, C_METHOD_KINDS) or isinstance(raw, DATA_DESCRIPTORS):
            if isinstance(raw, DATA_DESCRIPTORS) and name.startswith("__"):
                continue
            yield name, raw
        elif isinstance(raw, (types.FunctionType, classmethod)) and not name.startswith("_"):
            yield name, raw


def public_callables_and_docs():
    """(qualified name, object, must_have_signature) for everything checked."""
    out = [(m.__name__, m, False) for m in public_modules()]
    for qual, obj in public_objects():
        out.append((qual, obj, callable(obj)))
        if isinstance(obj, type):
            for name, raw in members(obj):
                attr = getattr(obj, name)
                is_data = isinstance(raw, DATA_DESCRIPTORS)
                out.append((f"{qual}.{name}", raw if is_data else attr, not is_data))
    return out


CHECKED = public_callables_and_docs()


def not_constructible(cls):
    """Classes users never call: their instances come from strideweave."""
    return cls in (sw.DType, sw.DTypeCategory, sw.SimpleDType, sw.CompoundDType,
                   sw.AwaitResult, sw.AwaitMove, sw.AwaitResidency, sw.AwaitProjection,
                   sw.BlockDeviceCarrier)


def test_the_walk_covers_the_api():
    names = {q for q, _, _ in CHECKED}
    for expected in ["strideweave.Tensor.__dlpack__", "strideweave.CPU.allocate_like",
                     "strideweave.Layout.cosize", "strideweave.friendly.zeros",
                     "strideweave.carriers.extension.TransferRequest",
                     "strideweave.carriers.move.dispatch_move", "strideweave.Profiler.__exit__",
                     "strideweave.carriers.dtype.validate_storage_dtype"]:
        assert expected in names
    assert len(CHECKED) > 250


@pytest.mark.parametrize("qual, obj, needs_signature", CHECKED, ids=[q for q, _, _ in CHECKED])
def test_docstring_is_plain_and_present(qual, obj, needs_signature):
    doc = inspect.getdoc(obj) if not isinstance(obj, DATA_DESCRIPTORS) else obj.__doc__
    assert doc and doc.strip(), f"{qual} has no docstring"
    assert not ID.search(doc), f"{qual} docstring quotes an internal id: {doc!r}"
    assert not WORDS.search(doc), f"{qual} docstring says seed/contract: {doc!r}"


@pytest.mark.parametrize("qual, obj, needs_signature",
                         [c for c in CHECKED if c[2]], ids=[q for q, _, n in CHECKED if n])
def test_signature_is_readable(qual, obj, needs_signature):
    if isinstance(obj, type) and not_constructible(obj):
        with pytest.raises(TypeError):
            obj()
        return
    sig = inspect.signature(obj)
    assert isinstance(sig, inspect.Signature)


def test_object_defaults_read_as_the_objects():
    # dtype=DType.Float32 cannot be written as a plain text signature; the
    # signature still shows the real default.
    for f in [sw.CPU, sw.Generic, sw.FileBacked, sw.Metal, friendly.zeros, friendly.ones,
              friendly.full, friendly.arange, friendly.tensor]:
        assert inspect.signature(f).parameters["dtype"].default is sw.DType.Float32, f
    assert str(inspect.signature(friendly.full)) == \
        f"(*extents, value, dtype={sw.DType.Float32!r})"
    assert list(inspect.signature(sw.CPU).parameters) == ["size", "mutable", "dtype", "empty"]


def test_functions_with_object_defaults_still_behave_as_builtins():
    z = friendly.zeros
    assert z.__name__ == "zeros" and z.__module__ == "strideweave._C"
    assert z(2, 3).tolist() == [0.0] * 6
    assert z(2, dtype=sw.DType.Int32).tolist() == [0, 0]
    assert repr(z) == "<built-in function zeros>"
    assert "zeros" in z.__doc__ and z.__text_signature__.startswith("(*extents")

    class Holder:
        make = friendly.arange   # does not bind, like a builtin function
    assert Holder().make(2).tolist() == [0.0, 1.0]
    with pytest.raises(TypeError):
        z(2, colour=1)


# ---- error messages -------------------------------------------------------------


def _closed_subclass():
    class Mine(sw.CPU):
        pass


def _nested_shape_item():
    sw.Shape(2, sw.Shape(3))


def _released_read():
    c = sw.CPU(2)
    c.release()
    c[0]


def _immutable_write():
    sw.CPU(2, mutable=False)[0] = 1.0


def _evicted_read():
    e = sw.Evictable(sw.CPU(2), sw.Generic([0.0, 0.0]))
    e.evict()
    e[0]


def _dlpack(**kw):
    return lambda: friendly.arange(4).__dlpack__(**kw)


def _move_released():
    t = friendly.arange(2)
    t.carrier.release()
    sw.move(t, sw.CPU(2))


def _register_twice():
    class A(sw.Carrier):
        pass
    mv.register_move_operation(sw.CPU, A, sw.ElementwiseMoveOperation)
    try:
        mv.register_move_operation(sw.CPU, A, sw.ElementwiseMoveOperation)
    finally:
        mv.unregister_move_operation(sw.CPU, A)


def _define_twice():
    class B(sw.Carrier):
        pass
    storage = ext.StorageProvider(lambda c, d: True, lambda c: 0, lambda c, n: None,
                                  lambda c: None, lambda c, i: 0.0, lambda c, i, v: None)
    definition = ext.CarrierDefinition(storage)
    ext.register_carrier_definition(B, definition)
    ext.register_carrier_definition(B, definition)


def _hookless_size():
    class Bare(sw.Carrier):
        pass
    Bare().size()


def _grad_of_int():
    friendly.arange(2, dtype=sw.DType.Int32).grad


F = sw.DType.Float32
ERRORS = [
    # layouts
    ("shape extent", ValueError, lambda: sw.Shape(0)),
    ("shape item kind", ValueError, lambda: sw.Shape(2.5)),
    ("nested shape", ValueError, _nested_shape_item),
    ("empty nested", ValueError, lambda: sw.Shape(2, [])),
    ("negative stride", ValueError, lambda: sw.Stride(-1)),
    ("layout not congruent", ValueError,
     lambda: sw.Layout(sw.Shape([2, [3, 4]]), sw.Stride([1, 2, 6]))),
    ("layout shape type", ValueError, lambda: sw.Layout((2,), sw.Stride(1))),
    ("index range", ValueError, lambda: friendly.column_major(2, 3).index(6)),
    ("index kind", TypeError, lambda: friendly.column_major(2).index("x")),
    ("permute", ValueError, lambda: friendly.column_major(2, 3).permute(0, 0)),
    ("broadcast", ValueError, lambda: friendly.column_major(2).broadcast_to(sw.Shape(3))),
    ("shape immutable", AttributeError, lambda: setattr(sw.Shape(2), "x", 1)),
    # dtypes
    ("dtype unknown", LookupError, lambda: sw.DType.from_name("Float16")),
    ("dtype construct", TypeError, lambda: sw.DType()),
    ("dtype kind", TypeError, lambda: sw.CPU(1, dtype="Float32")),
    ("dtype unsupported", ValueError, lambda: sw.CPU(1, dtype=sw.DType.Float64)),
    ("dtype compound", ValueError, lambda: sw.CPU(1, dtype=sw.DType.ScaledInt32)),
    # carriers
    ("size kind", TypeError, lambda: sw.CPU("2")),
    ("size negative", ValueError, lambda: sw.CPU(-1)),
    ("closed class", TypeError, _closed_subclass),
    ("released read", RuntimeError, _released_read),
    ("immutable write", RuntimeError, _immutable_write),
    ("slot range", IndexError, lambda: sw.CPU(2)[2]),
    ("slot value", TypeError, lambda: sw.CPU(2).__setitem__(0, "x")),
    ("int overflow", OverflowError, lambda: sw.CPU(1, dtype=sw.DType.Int32).__setitem__(0, 2**40)),
    ("generic values", TypeError, lambda: sw.Generic(3)),
    ("file name", ValueError, lambda: sw.FileBacked("a/b")),
    ("file name kind", TypeError, lambda: sw.FileBacked(3)),
    ("metal", RuntimeError, lambda: sw.Metal(2)),
    ("scatter", NotImplementedError, lambda: sw.CPU(1).scatter(None, None, None)),
    ("dispatch op", NotImplementedError, lambda: sw.CPU(1).dispatch_op("nope")),
    ("hookless", NotImplementedError, _hookless_size),
    ("evicted", RuntimeError, _evicted_read),
    ("evictable same", ValueError, lambda: (lambda c: sw.Evictable(c, c))(sw.CPU(1))),
    ("base dlpack", BufferError, lambda: sw.Generic([1.0]).dlpack_info()),
    # tensors and friendly
    ("tensor carrier", TypeError, lambda: sw.Tensor(3, 0, friendly.column_major(2))),
    ("tensor offset", ValueError, lambda: sw.Tensor(sw.CPU(2), -1, friendly.column_major(2))),
    ("tensor span", ValueError, lambda: sw.Tensor(sw.CPU(2), 1, friendly.column_major(2))),
    ("item", ValueError, lambda: friendly.arange(2).item()),
    ("ragged", ValueError, lambda: friendly.tensor([[1.0], [1.0, 2.0]])),
    ("empty values", ValueError, lambda: friendly.tensor([])),
    ("extents", ValueError, lambda: friendly.zeros()),
    ("arange bool", ValueError, lambda: friendly.arange(2, dtype=sw.DType.Bool)),
    ("tensor index", ValueError, lambda: friendly.arange(2)[5]),
    ("reshape", ValueError, lambda: sw.reshape(friendly.arange(6), sw.Shape(4))),
    ("grad of int", RuntimeError, _grad_of_int),
    ("reduce description", ValueError,
     lambda: sw.reduce_sum(friendly.zeros(2, 2), "a b -> c")),
    ("add shapes", ValueError, lambda: sw.add(friendly.zeros(2), friendly.zeros(3))),
    ("backward", RuntimeError, lambda: friendly.arange(2, dtype=sw.DType.Int32).backward()),
    ("grad mode", TypeError, lambda: sw.set_grad_enabled(1)),
    # DLPack
    ("dlpack copy", BufferError, _dlpack(copy=True)),
    ("dlpack device", BufferError, _dlpack(dl_device=(2, 0))),
    ("dlpack version kind", TypeError, _dlpack(max_version=3)),
    ("dlpack version length", ValueError, _dlpack(max_version=(1, 0, 0))),
    ("dlpack dtype", BufferError, lambda: friendly.zeros(2, dtype=sw.DType.Bool).__dlpack__()),
    ("dlpack carrier", BufferError, lambda: sw.move(friendly.arange(2), sw.FileBacked())
     .__dlpack__()),
    ("dlpack multi-plane", NotImplementedError,
     lambda: friendly.scaled_int32([1, 2]).__dlpack__()),
    # movement
    ("move destination", TypeError, lambda: sw.move(friendly.arange(2), 3)),
    ("move dtype", TypeError,
     lambda: sw.move(friendly.arange(2), sw.CPU(2, dtype=sw.DType.Int32))),
    ("move small", ValueError, lambda: sw.move(friendly.arange(4), sw.CPU(2))),
    ("move released", RuntimeError, _move_released),
    ("registered twice", ValueError, _register_twice),
    ("unregister missing", KeyError,
     lambda: mv.unregister_move_operation(sw.Generic, sw.Metal)),
    ("handle construct", TypeError, lambda: sw.AwaitMove()),
    ("residency handle construct", TypeError, lambda: sw.AwaitResidency()),
    ("projection handle construct", TypeError, lambda: sw.AwaitProjection()),
    # block devices and tiles
    ("block carrier construct", TypeError, lambda: sw.BlockDeviceCarrier()),
    ("block device path kind", TypeError, lambda: sw.BlockDevice(3)),
    ("block device not a device", ValueError, lambda: sw.BlockDevice(str(ROOT))),
    ("tile set kind", TypeError, lambda: sw.TileSet([(0.5,)])),
    ("tile set ranks", ValueError, lambda: sw.TileSet([(0,), (0, 1)])),
    ("tile selection empty axis", ValueError, lambda: sw.TileSelection(([],))),
    ("plan overlap", ValueError,
     lambda: sw.ResidencyPlan(promote=sw.TileSet([(0,)]), evict=sw.TileSet([(0,)]))),
    ("tiled closed class", TypeError,
     lambda: type("Mine", (sw.TiledEvictable,), {})),
    ("tiled grid", ValueError,
     lambda: sw.TiledEvictable(sw.CPU(4), sw.CPU(0), (2,), (2,)).promote(sw.TileSet([(3,)]))),
    # the extension interface
    ("provider callable", TypeError, lambda: ext.StorageProvider(*([1] * 6))),
    ("definition storage", TypeError, lambda: ext.CarrierDefinition(3)),
    ("unsupported reason", TypeError, lambda: ext.Unsupported(3)),
    ("route class", TypeError,
     lambda: ext.TransferRoute(int, sw.CPU, "r", ext.TransferProvider(lambda r: None))),
    ("defined twice", TypeError, _define_twice),
    ("definition-free args", TypeError, lambda: type("P", (sw.Carrier,), {})(3)),
]


def test_block_device_carrier_construction_points_to_allocate():
    with pytest.raises(TypeError, match=r"BlockDevice\(path\)\.allocate"):
        sw.BlockDeviceCarrier()


def _message(exc_type, action):
    with pytest.raises(exc_type) as info:
        action()
    return str(info.value)


@pytest.mark.parametrize("what, exc_type, action", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_message_is_plain(what, exc_type, action):
    msg = _message(exc_type, action)
    assert msg.strip(), f"{what}: empty message"
    assert not ID.search(msg), f"{what}: message quotes an internal id: {msg!r}"
    assert not WORDS.search(msg), f"{what}: message says seed/contract: {msg!r}"


def test_the_scan_itself_can_fail():
    assert ID.search("raises ValueError (C-11)") and ID.search("per TE-3")
    assert WORDS.search("the Seed says") and WORDS.search("contract")
    assert not ID.search("a 2-D layout, float32, x-1") and not WORDS.search("seeding")


# ---- version ---------------------------------------------------------------------


def meson_version():
    text = (ROOT / "meson.build").read_text()
    m = re.search(r"project\(\s*'strideweave'.*?version\s*:\s*'([^']+)'", text, re.S)
    assert m, "meson.build declares no project version"
    return m.group(1)


def test_version_is_the_one_meson_declares():
    assert sw.__version__ == meson_version() == _C.__version__
    assert isinstance(sw.__version__, str) and re.fullmatch(r"\d+\.\d+\.\d+\S*", sw.__version__)


def test_pyproject_takes_the_version_from_meson():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project.get("dynamic", [])
