"""Persistent, chunked tensors on local disk or object storage (S3, GCS, ...).

`TensorStoreCarrier` keeps a carrier's slots in a 1-D zarr v3 array that
Google's TensorStore engine reads and writes, so Tensors can be moved to and
from a bucket, saved and loaded by another process, and used as the slow tier
of an `Evictable` or a `TiledEvictable`. Install with
``pip install 'strideweave[tensorstore]'``.
"""

try:
    import tensorstore as _engine  # noqa: F401  (the engine must be importable)
except ImportError as _missing:
    raise ImportError(
        "strideweave.tensorstore needs the TensorStore package, which is not installed; "
        "install it with: pip install 'strideweave[tensorstore]'") from _missing

from strideweave.tensorstore._carrier import (
    TensorStoreCarrier,
    CpuToTensorStoreMoveOperation,
    TensorStoreToCpuMoveOperation,
    save,
    load,
)

__all__ = [
    "TensorStoreCarrier",
    "CpuToTensorStoreMoveOperation",
    "TensorStoreToCpuMoveOperation",
    "save",
    "load",
]
