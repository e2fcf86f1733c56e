"""The CPU carrier (contract-carriers)."""

from strideweave._C import CPU

__all__ = ["CPU"]
