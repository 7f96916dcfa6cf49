"""What the judge needs to know about a device (its info record: docs/formats.md §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .vocabulary import VNPU_POLICIES

# The allocation policies a device profile may declare (vocabulary.yaml: the virtual NPU offers each), the
# default first: under the byte budget the model predicts no ENOMEM exactly, under each of the others it does.
DEVICE_POLICIES: Final = VNPU_POLICIES
BUDGET: Final = DEVICE_POLICIES[0]
EXACT_POLICIES: Final = DEVICE_POLICIES[1:]
if BUDGET != "budget":
    raise ImportError(f"vocabulary.yaml's first vnpu policy is {BUDGET!r}: the model's default is the byte budget")


@dataclass(frozen=True, slots=True)
class DeviceCaps:
    """Capabilities of the device a trace came from.

    supported_pairs: (device number, buffer type) pairs isSupported reported true for at run start;
    None when discovery did not run (the judge then accepts either answer for valid requests).
    capacity_bytes / policy: declared by a vnpu device profile; None on real devices, where an
    allocation of a supported pair may also fail with ENOMEM. With a capacity, the policy (budget,
    acl, caching, arena) says which allocations succeed and which buffers the device preempts; the
    model then predicts them exactly (docs/model.md §3, §7).
    vnpu_control: the implementation exports the vnpu control entry point.
    pointer_bits: 32 or 64 from the device's ABI (None: unknown); a 64-bit raw cookie needs 64.
    """

    supported_pairs: frozenset[tuple[int, int]] | None = None
    capacity_bytes: int | None = None
    policy: str | None = None
    personality: str | None = None
    vnpu_control: bool = False
    pointer_bits: int | None = None
