"""Carriers written in Python: a CarrierDefinition gives a Carrier subclass
its storage (StorageProvider) and its exact moves to other carrier classes
(TransferRoute)."""

from strideweave._C import (
    CarrierDefinition,
    StorageProvider,
    TransferProvider,
    TransferRoute,
    TransferRequest,
    PreparedTransfer,
    Unsupported,
    TransferRouteMoveOperation,
    register_carrier_definition,
)
from strideweave._types import ProviderCompletion

__all__ = [
    "CarrierDefinition",
    "StorageProvider",
    "TransferProvider",
    "TransferRoute",
    "TransferRequest",
    "PreparedTransfer",
    "Unsupported",
    "ProviderCompletion",
    "TransferRouteMoveOperation",
    "register_carrier_definition",
]
