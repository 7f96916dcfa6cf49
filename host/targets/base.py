"""The seam between the run and a device: what every target (local, virtual, adb) provides."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from reference_model.caps import DeviceCaps

if TYPE_CHECKING:
    from ..probe import BatchOutcome, ScenarioTrace


@dataclass(frozen=True, slots=True)
class Device:
    """A prepared device: its serial, the info recorded in results.jsonl, and what the judge needs."""

    serial: str
    info: dict[str, Any]
    caps: DeviceCaps
    notes: tuple[str, ...] = field(default=())
    discovery_failed: str | None = None  # why pair discovery failed: every scenario is then ERROR


class Target(Protocol):
    serial: str
    timeout_multiplier: float  # every time limit of the target's probe runs is multiplied by it

    def discovery_build(self) -> tuple[str, ...] | None:
        """What the device's discovery answer depends on, when it may be kept between runs (host/run/
        discovery_cache.py); None: discover every time."""
        ...

    def failure_context(self, scenario_id: str) -> tuple[str, ...]:
        """Device log lines around a scenario's failure (a result's `logcat`); () when the kind has none."""
        ...

    def prepare(self) -> dict[str, Any]:
        """Make the probe runnable (build or push, check its op table) and return static device info."""
        ...

    def run_batch(
        self,
        program: str,
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
    ) -> BatchOutcome:
        """Run one probe process over a program; hand each scenario's trace to on_trace as it ends."""
        ...
