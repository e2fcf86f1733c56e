"""Carriers: where a Tensor's values live (host memory, files, Python-defined
storage), and the dtypes they store."""

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
    Metal,
    Evictable,
    BlockDevice,
    BlockDeviceCarrier,
    TiledEvictable,
)
from strideweave.carriers import base, dtype, generic, cpu, file_backed, metal, move, extension, evictable
from strideweave.carriers import block_device, tiled_evictable

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
    "Metal",
    "Evictable",
    "base",
    "dtype",
    "generic",
    "move",
    "cpu",
    "file_backed",
    "metal",
    "extension",
    "evictable",
    "BlockDevice",
    "BlockDeviceCarrier",
    "block_device",
    "TiledEvictable",
    "tiled_evictable",
]
