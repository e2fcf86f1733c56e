"""Hierarchical layouts: Shape, Stride, and the Layout that maps coordinates
to slot indices."""

from strideweave._types import Node
from strideweave._C import Shape, Stride, Layout

__all__ = ["Shape", "Stride", "Layout", "Node"]
