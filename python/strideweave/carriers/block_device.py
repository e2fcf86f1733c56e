"""Block devices as carrier storage: BlockDevice opens a block-special node
and allocates BlockDeviceCarrier extents of Float32 slots on it; values move
between them and CPU carriers."""

from strideweave._C import (
    BlockDevice,
    BlockDeviceCarrier,
    CpuToBlockDeviceMoveOperation,
    BlockDeviceToCpuMoveOperation,
)

__all__ = [
    "BlockDevice",
    "BlockDeviceCarrier",
    "CpuToBlockDeviceMoveOperation",
    "BlockDeviceToCpuMoveOperation",
]
