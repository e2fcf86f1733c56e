"""Evictable: values that live in one of two carriers it owns, a fast
primary and a large secondary; evict() and promote() move them between."""

from strideweave._C import Evictable

__all__ = ["Evictable"]
