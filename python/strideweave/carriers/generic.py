"""The Generic carrier: fixed-size host storage copied from Python values."""

from strideweave._C import Generic

__all__ = ["Generic"]
