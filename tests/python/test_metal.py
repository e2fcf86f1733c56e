"""Metal on a host without Apple's MPS device (contract M-2, M-4, M-5, M-6,
C-6, C-18): argument checks in order, then an unavailability RuntimeError;
the class facts hold everywhere."""

import pytest

import strideweave as sw
from strideweave import DType as D


def test_m2_size_checks_come_first():
    with pytest.raises(TypeError, match="size"):
        sw.Metal(2.5)
    with pytest.raises(TypeError, match="size"):
        sw.Metal(True, dtype="not a dtype")  # bool is not a size; size is checked first
    with pytest.raises(ValueError, match="size"):
        sw.Metal(-1)


def test_m2_dtype_checks_after_size():
    with pytest.raises(TypeError, match="DType"):
        sw.Metal(4, dtype="Float32")
    with pytest.raises(ValueError):
        sw.Metal(4, dtype=D.Float64)
    with pytest.raises(ValueError):
        sw.Metal(4, dtype=D.ScaledInt32)


@pytest.mark.parametrize("dtype", [D.Float32, D.Int32, D.Bool])
@pytest.mark.parametrize("empty", [False, True])
def test_m4_construction_always_fails_naming_what_is_missing(dtype, empty):
    with pytest.raises(RuntimeError, match="MPS") as info:
        sw.Metal(4, dtype=dtype, empty=empty, mutable=False)
    assert "CPU" in str(info.value)  # says what to use instead


def test_m2_keywords_are_keyword_only():
    with pytest.raises(TypeError):
        sw.Metal(4, True)


def test_c18_metal_is_closed():
    with pytest.raises(TypeError, match="closed carrier implementation"):
        class Mine(sw.Metal):
            pass


def test_c6_supported_storage_dtypes():
    assert sw.Metal._supports_storage_dtype(D.Float32) is True
    assert sw.Metal._supports_storage_dtype(D.Int32) is True
    assert sw.Metal._supports_storage_dtype(D.Bool) is True
    assert sw.Metal._supports_storage_dtype(D.Float64) is False
    with pytest.raises(TypeError):
        sw.Metal._supports_storage_dtype("Float32")


def test_m5_no_dlpack_opt_in():
    # Metal keeps the base refusal: it defines no dlpack_info of its own.
    assert sw.Metal.dlpack_info is sw.Carrier.dlpack_info
    assert "dlpack_info" not in vars(sw.Metal)


def test_m6_metal_operations_refuse_other_carriers_before_copying():
    src = sw.CPU(3)
    t = sw.Tensor(src, 0, sw.Layout(sw.Shape(3), sw.Stride(1)))
    dst = sw.CPU(3)
    with pytest.raises(TypeError, match="Metal"):
        sw.CpuToMetalMoveOperation().forward(t, dst)
    with pytest.raises(TypeError, match="Metal"):
        sw.MetalToCpuMoveOperation().forward(t, dst)
    assert not src.is_released() and src.version == 0 and dst.version == 0
