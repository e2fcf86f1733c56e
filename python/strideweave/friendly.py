"""Friendly creation of CPU Tensors (tensor, zeros, ones, full, arange,
scaled_int32), the common layouts, and reading values back (item, to_list)."""

from strideweave._C import (
    tensor,
    zeros,
    ones,
    full,
    arange,
    scaled_int32,
    column_major,
    row_major,
    item,
    to_list,
)

__all__ = [
    "tensor",
    "zeros",
    "ones",
    "full",
    "arange",
    "scaled_int32",
    "column_major",
    "row_major",
    "item",
    "to_list",
]
