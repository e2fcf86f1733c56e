"""The CPU carrier: contiguous host memory that DLPack can export."""

from strideweave._C import CPU

__all__ = ["CPU"]
