"""The virtual device: the device side of the adb protocol (docs/adb.md), plus the fleet that runs it."""
