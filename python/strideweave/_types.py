"""Declarations that must be standard Python types (an Enum, dataclasses,
a Protocol). Only declarations live here: no behaviour.
"""

import dataclasses
import enum
import typing

__all__ = [
    "Node",
    "ProfilerEvent",
    "MoveEvent",
    "ProfilerAggregate",
    "ProviderCompletion",
    "TileState",
    "ResidencyPolicy",
]


class Node(enum.Enum):
    """One marker of Layout.profile, the depth-first walk of a layout's nesting:
    Leaf for a leaf mode, Push and Pop around the children of a nested mode."""

    Leaf = 1
    Push = 2
    Pop = 3


@dataclasses.dataclass(frozen=True)
class ProfilerEvent:
    """One execution of a dispatched operation seen by a profiler."""

    id: typing.Any
    parent_id: typing.Any
    name: typing.Any
    carrier_type: typing.Any
    implementation_type: typing.Any
    input_shapes: typing.Any
    start_time_ns: typing.Any
    duration_ns: typing.Any
    self_time_ns: typing.Any
    thread_id: typing.Any
    succeeded: typing.Any


@dataclasses.dataclass(frozen=True)
class MoveEvent:
    """The submission ("submit") or the outcome ("complete") of one move.
    `bytes` is what the move copies (the same on both records)."""

    id: typing.Any
    phase: typing.Any
    move_id: typing.Any
    request_id: typing.Any
    source_type: typing.Any
    destination_type: typing.Any
    operation_type: typing.Any
    route_id: typing.Any
    start_time_ns: typing.Any
    duration_ns: typing.Any
    thread_id: typing.Any
    succeeded: typing.Any
    bytes: typing.Any


@dataclasses.dataclass(frozen=True)
class ProfilerAggregate:
    """Operation events grouped by name and carrier class (and input shapes)."""

    name: typing.Any
    carrier_type: typing.Any
    input_shapes: typing.Any
    count: typing.Any
    total_time_ns: typing.Any
    self_total_time_ns: typing.Any
    mean_time_ns: typing.Any
    min_time_ns: typing.Any
    max_time_ns: typing.Any


@typing.runtime_checkable
class ProviderCompletion(typing.Protocol):
    """What a transfer provider's submit() may return for work that finishes
    later: `done` tells whether it finished, `wait()` blocks until it has and
    returns None (or raises the transfer's failure). It must not be awaitable.
    """

    @property
    def done(self) -> bool:
        """True once the transfer has finished, successfully or not."""
        ...

    def wait(self) -> None:
        """Block until the transfer has finished; raise its failure, if any."""
        ...


@dataclasses.dataclass(frozen=True)
class TileState:
    """Where one tile of a TiledEvictable lives: location is "primary",
    "secondary", "implicit" or "invalid"; valid is False only for invalid
    tiles; dirty is True for a primary tile written since it got there."""

    location: str
    valid: bool
    dirty: bool


@typing.runtime_checkable
class ResidencyPolicy(typing.Protocol):
    """Decides residency around a projection: plan(required, purpose) gets
    the TileSet the work reads and a purpose string ("projection") and
    returns a ResidencyPlan (tiles to promote, retain, evict afterwards)."""

    def plan(self, required: typing.Any, purpose: str) -> typing.Any:
        """Return a ResidencyPlan for work that reads the tiles of `required`
        (a TileSet); `purpose` says what the work is ("projection"). The
        plan's promote tiles are brought into the primary tier and kept there
        during the work, its retain tiles stay where they are, its evict tiles
        move to the secondary tier afterwards. Returning anything but a
        ResidencyPlan makes the work raise TypeError, and a plan naming tiles
        outside the grid ValueError; an exception raised here propagates. In
        each case the work does not start."""
        ...
