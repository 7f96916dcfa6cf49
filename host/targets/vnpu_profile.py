"""The virtual NPU's device profile (docs/vnpu.md): pairs, capacity, policy, personality, timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from reference_model.profiles import PERSONALITIES as PERSONALITIES
from reports.recorded.plan_options import OPTION

DEFAULT_PAIRS: Final = ((0, 1), (0, 2), (0, 3), (0, 4), (1, 2))
DEFAULT_CAPACITY: Final = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class VnpuProfile:
    pairs: tuple[tuple[int, int], ...] = DEFAULT_PAIRS
    capacity: int = DEFAULT_CAPACITY
    policy: str = str(OPTION["policy"].default)
    personality: str = str(OPTION["personality"].default)
    callback_delay_us: int = 0
    # A late onPreempt (`preempt_late=`) is due once the application has made no API call for this long,
    # at most PREEMPT_LATE_MS after its command; 0: PREEMPT_LATE_MS after it (docs/vnpu.md §2).
    preempt_late_quiet_ms: int = 0
    # A load's onLoad and a late onPreempt are due as soon as the application waits for callbacks (the
    # probe tells the vnpu, `vnpu_waiting`), not after the load's 5 ms or the quiet time (docs/vnpu.md §2).
    due_when_waiting: bool = False
    # `npuconf run --capacity`: the capacity the user declares for every device of the run (also for
    # --impl libraries and adb devices, whose capacity clauses are then judged); None: not declared.
    declared_capacity: int | None = None

    def enforced_capacity(self) -> int | None:
        """The capacity the vnpu holds its buffers to, as the device declares it: none for the aosp-2026
        personality under the budget policy, since the AOSP service has no buffer budget (docs/vnpu.md §5)."""
        if self.personality == "aosp-2026" and self.policy == "budget":
            return None
        return self.capacity

    def render(self) -> str:
        pairs = ",".join(f"{d}:{t}" for d, t in self.pairs)
        return (
            "# written by npuconf for this run\n"
            f"pairs={pairs}\n"
            f"capacity={self.capacity}\n"
            f"policy={self.policy}\n"
            f"personality={self.personality}\n"
            f"callback_delay_us={self.callback_delay_us}\n"
        ) + (f"preempt_late_quiet_ms={self.preempt_late_quiet_ms}\n" if self.preempt_late_quiet_ms else "") + (
            "due_when_waiting=1\n" if self.due_when_waiting else "")


CAPACITY_PROP: Final = "debug.npuconf.capacity"  # a device's own declaration (adb target), in bytes


def declared_capacity(capacity: int | None) -> dict[str, object]:
    """Device-info fields for a capacity the user declares for a device that is not the vnpu: the judge
    then predicts ENOMEM exactly (budget policy) and judges the capacity clauses (docs/model.md §3a)."""
    if capacity is None:
        return {}
    return {"capacity": capacity, "policy": "budget", "capacity_declared": True}
