"""The Carrier base type and the closed-carrier rule (C-1, C-18)."""

from strideweave._C import (
    Carrier,
    DependentCarrier,
    CLOSED_CARRIER_MESSAGE,
    reject_carrier_subclass,
)

__all__ = ["Carrier", "DependentCarrier", "CLOSED_CARRIER_MESSAGE", "reject_carrier_subclass"]
