"""Operations and their profiling: MoveOperation, the profiler and its
record types."""

from strideweave._types import ProfilerEvent, MoveEvent, ProfilerAggregate
from strideweave._C import MoveOperation, Profiler, profile

__all__ = [
    "MoveOperation",
    "Profiler",
    "profile",
    "ProfilerEvent",
    "MoveEvent",
    "ProfilerAggregate",
]
