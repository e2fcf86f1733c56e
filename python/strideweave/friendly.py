"""Friendly CPU tensor creation and access (contract-core F-1..F-5, V-10)."""

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
