"""G-1 import paths, the carriers contract's import table, build facts."""

import importlib
import subprocess
import sys

import pytest

import strideweave as sw

TOP = ["Shape", "Stride", "Layout", "Node", "DType", "DTypeCategory", "SimpleDType",
       "CompoundDType", "Tensor", "permute", "reshape", "broadcast_to",
       "Carrier", "DependentCarrier", "Generic", "CPU", "FileBacked"]

PATHS = [
    ("strideweave.layout", ["Shape", "Stride", "Layout", "Node"]),
    ("strideweave.carriers", ["DType", "DTypeCategory", "SimpleDType", "CompoundDType",
                              "Carrier", "DependentCarrier", "Generic", "CPU", "FileBacked"]),
    ("strideweave.carriers.base", ["Carrier", "DependentCarrier"]),
    ("strideweave.carriers.generic", ["Generic"]),
    ("strideweave.carriers.cpu", ["CPU"]),
    ("strideweave.carriers.file_backed", ["FileBacked"]),
    ("strideweave.carriers.dtype", ["DType"]),
]


def test_G1_top_level_names_exist():
    for name in TOP:
        assert hasattr(sw, name), name


@pytest.mark.parametrize("module,names", PATHS)
def test_G1_every_path_yields_the_identical_object(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert getattr(mod, name) is getattr(sw, name), (module, name)


def test_G1_friendly_names():
    from strideweave import friendly
    for name in ["tensor", "zeros", "ones", "full", "arange", "scaled_int32",
                 "column_major", "row_major", "item", "to_list"]:
        assert callable(getattr(friendly, name)), name


def test_carrier_helper_paths():
    from strideweave.carriers import base, dtype
    assert "closed carrier implementation" in base.CLOSED_CARRIER_MESSAGE
    assert callable(base.reject_carrier_subclass)
    for name in ["validate_storage_dtype", "accepts_storage_dtype", "storage_zero"]:
        assert callable(getattr(dtype, name)), name


def test_types_are_implemented_in_C():
    # Behaviour lives in the extension: the public classes are its types.
    for name in ["Shape", "Layout", "DType", "Carrier", "CPU", "Tensor"]:
        assert getattr(sw, name).__module__.startswith("strideweave"), name
        assert type(getattr(sw, name)).__name__ == "type"
    assert sw.permute.__class__.__name__ == "builtin_function_or_method"


def test_import_loads_no_optional_package():
    code = ("import sys, strideweave\n"
            "bad = [m for m in ('torch', 'numpy', 'jax') if m in sys.modules]\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_no_dlpack_import_path():
    # Seed: "DLPack is export-only" -- no adoption path anywhere.
    for mod in [sw, sw.carriers, sw.friendly, sw.layout, sw._C]:
        for name in dir(mod):
            assert "from_dlpack" not in name.lower(), (mod, name)


def test_live_bytes_and_fault_switch_are_exposed():
    assert isinstance(sw._C._live_bytes(), int)
    assert sw._C._fault_injection_enabled() is True  # `make test` builds it on
    with pytest.raises(ValueError):
        sw._C._fault_inject("a-name-far-too-long-for-the-fault-table-slot")
