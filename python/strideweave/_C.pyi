"""Type stubs for strideweave._C (filled in as the API lands)."""
