"""Carriers: where a Tensor's slots live (contract-carriers)."""

from strideweave._C import (
    DType,
    DTypeCategory,
    SimpleDType,
    CompoundDType,
    Carrier,
    DependentCarrier,
    Generic,
    CPU,
    FileBacked,
)
from strideweave.carriers import base, dtype, generic, cpu, file_backed

__all__ = [
    "DType",
    "DTypeCategory",
    "SimpleDType",
    "CompoundDType",
    "Carrier",
    "DependentCarrier",
    "Generic",
    "CPU",
    "FileBacked",
    "base",
    "dtype",
    "generic",
    "cpu",
    "file_backed",
]
