"""strideweave: hierarchical-layout tensors on pluggable carriers.

Everything here is implemented in C (``strideweave._C``); this module only
re-exports it.
"""

from strideweave._types import Node
from strideweave._C import (
    Shape,
    Stride,
    Layout,
    DType,
    DTypeCategory,
    SimpleDType,
    CompoundDType,
    Carrier,
    DependentCarrier,
    Generic,
    CPU,
    FileBacked,
    Tensor,
    permute,
    reshape,
    broadcast_to,
)
from strideweave import layout, carriers, friendly

__all__ = [
    "Node",
    "Shape",
    "Stride",
    "Layout",
    "DType",
    "DTypeCategory",
    "SimpleDType",
    "CompoundDType",
    "Carrier",
    "DependentCarrier",
    "Generic",
    "CPU",
    "FileBacked",
    "Tensor",
    "permute",
    "reshape",
    "broadcast_to",
    "layout",
    "carriers",
    "friendly",
]
