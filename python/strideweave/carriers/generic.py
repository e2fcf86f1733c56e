"""The Generic carrier (contract-carriers)."""

from strideweave._C import Generic

__all__ = ["Generic"]
