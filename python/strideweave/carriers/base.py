"""The Carrier base class, and the rule that the shipped carrier classes
cannot be subclassed."""

from strideweave._C import (
    Carrier,
    DependentCarrier,
    CLOSED_CARRIER_MESSAGE,
    reject_carrier_subclass,
)

__all__ = ["Carrier", "DependentCarrier", "CLOSED_CARRIER_MESSAGE", "reject_carrier_subclass"]
