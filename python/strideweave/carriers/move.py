"""Moving Tensors between carriers: move, move_async, the handles, the move
operations and the registry of operations by exact carrier-class pair."""

from strideweave._C import (
    AwaitResult,
    AwaitMove,
    move,
    move_async,
    MoveOperation,
    ElementwiseMoveOperation,
    CpuToFileBackedMoveOperation,
    FileBackedToCpuMoveOperation,
    CpuToMetalMoveOperation,
    MetalToCpuMoveOperation,
    MetalToMetalMoveOperation,
    dispatch_move,
    register_move_operation,
    unregister_move_operation,
    registered_move_operation,
)

__all__ = [
    "AwaitResult",
    "AwaitMove",
    "move",
    "move_async",
    "MoveOperation",
    "ElementwiseMoveOperation",
    "CpuToFileBackedMoveOperation",
    "FileBackedToCpuMoveOperation",
    "CpuToMetalMoveOperation",
    "MetalToCpuMoveOperation",
    "MetalToMetalMoveOperation",
    "dispatch_move",
    "register_move_operation",
    "unregister_move_operation",
    "registered_move_operation",
]
