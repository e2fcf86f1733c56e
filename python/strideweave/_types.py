"""Declarations the contracts require to be standard Python types.

Only declarations live here (architecture.md): no behaviour.
"""

import enum

__all__ = ["Node"]


class Node(enum.Enum):
    """Profile marker of a layout's depth-first walk (contract-core L-7)."""

    Leaf = 1
    Push = 2
    Pop = 3
