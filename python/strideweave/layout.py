"""Hierarchical layouts (contract-core section 1)."""

from strideweave._types import Node
from strideweave._C import Shape, Stride, Layout

__all__ = ["Shape", "Stride", "Layout", "Node"]
