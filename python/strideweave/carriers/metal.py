"""The Metal carrier: storage on Apple's MPS device (unavailable in this build)."""

from strideweave._C import Metal

__all__ = ["Metal"]
