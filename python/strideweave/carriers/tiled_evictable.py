"""TiledEvictable: a grid of equal tiles, each in a primary carrier, a
secondary carrier, an implicit zero, or invalid; promote/evict move tiles
and project copies a product of tiles out."""

from strideweave._C import (
    TiledEvictable,
    TileSelection,
    TileSet,
    ResidencyPlan,
    AwaitProjection,
    AwaitResidency,
)
from strideweave._types import ResidencyPolicy, TileState

__all__ = [
    "TiledEvictable",
    "TileSelection",
    "TileSet",
    "ResidencyPlan",
    "ResidencyPolicy",
    "TileState",
    "AwaitProjection",
    "AwaitResidency",
]
