"""Block devices as carrier storage (contract-carriers, section 4)."""

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
