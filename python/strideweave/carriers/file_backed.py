"""The FileBacked carrier (contract-carriers)."""

from strideweave._C import FileBacked

__all__ = ["FileBacked"]
