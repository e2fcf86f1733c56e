"""Operations and their profiling: the Operation base, grad mode,
MoveOperation, the profiler and its record types."""

from strideweave._types import ProfilerEvent, MoveEvent, ProfilerAggregate
from strideweave._C import (
    Operation,
    add,
    elementwise_mul,
    reduce_sum,
    MoveOperation,
    is_grad_enabled,
    set_grad_enabled,
    no_grad,
    Profiler,
    profile,
)

__all__ = [
    "Operation",
    "add",
    "elementwise_mul",
    "reduce_sum",
    "MoveOperation",
    "is_grad_enabled",
    "set_grad_enabled",
    "no_grad",
    "Profiler",
    "profile",
    "ProfilerEvent",
    "MoveEvent",
    "ProfilerAggregate",
]
