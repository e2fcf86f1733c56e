"""Helpers that check which dtypes a carrier can store."""

from strideweave._C import (
    DType,
    validate_storage_dtype,
    accepts_storage_dtype,
    storage_zero,
)

__all__ = ["DType", "validate_storage_dtype", "accepts_storage_dtype", "storage_zero"]
