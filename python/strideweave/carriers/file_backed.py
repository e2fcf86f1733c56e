"""The FileBacked carrier: slots stored in a raw temporary file."""

from strideweave._C import FileBacked

__all__ = ["FileBacked"]
