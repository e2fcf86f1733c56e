"""The Metal carrier (contract-carriers)."""

from strideweave._C import Metal

__all__ = ["Metal"]
