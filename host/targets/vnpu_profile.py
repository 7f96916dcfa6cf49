"""The virtual NPU's device profile (docs/vnpu.md): pairs, capacity, policy, personality."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PERSONALITIES: Final = ("published", "aosp-2026")
POLICIES: Final = ("budget",)
DEFAULT_PAIRS: Final = ((0, 1), (0, 2), (0, 3), (0, 4), (1, 2))
DEFAULT_CAPACITY: Final = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class VnpuProfile:
    pairs: tuple[tuple[int, int], ...] = DEFAULT_PAIRS
    capacity: int = DEFAULT_CAPACITY
    policy: str = "budget"
    personality: str = "published"
    callback_delay_us: int = 0

    def render(self) -> str:
        pairs = ",".join(f"{d}:{t}" for d, t in self.pairs)
        return (
            "# written by npuconf for this run\n"
            f"pairs={pairs}\n"
            f"capacity={self.capacity}\n"
            f"policy={self.policy}\n"
            f"personality={self.personality}\n"
            f"callback_delay_us={self.callback_delay_us}\n"
        )
