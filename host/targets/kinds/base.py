"""What a kind of target is (local, virtual, adb): the seam the CLI, the pytest layer, lanes, resume and
fuzz use instead of naming a kind. Each kind is a module of this package with a `KIND`; `kinds/__init__.py`
lists them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from reports.recorded.plan_options import OPTIONS, PlanOptions

from ..base import Target
from ..vnpu_profile import VnpuProfile

# Lanes per device on a kind whose lanes share nothing (each loads its own vnpu), when -j is not given.
# Measured on the 2-core host (bench/README.md, "Lanes"): verdicts identical to -j 1 up to 32 lanes on
# the local target and 16 on a virtual device; past 8 the wall time gains little and every lane is a
# probe process with its own memory.
DEFAULT_LANES: Final = 8


class LaunchedDevices(Protocol):
    """Virtual devices the kit starts for a run (host/run/head_start.py VirtualFleet, or the pytest layer's
    fleet): their targets once connected, and their stop."""

    def targets(self) -> Sequence[Target]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Opening:
    """What opening a kind's targets takes: the run's options and directory, the vnpu profile, the host
    probe build (--build-dir), whether the options' adb servers are the user's own word, the devices the
    kit launches (called only by a kind that launches its devices), and where to put the thread that
    stops them (None: stopped on exit, then and there)."""

    options: PlanOptions
    work_dir: Path
    profile: VnpuProfile
    build_dir: Path | None = None
    adb_servers_named: bool = True
    launch: Callable[[], LaunchedDevices] | None = None
    stopping: list[threading.Thread] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Resumed:
    """How a kind opens a planned run's devices again: its options, and the names its launched devices
    are given."""

    options: PlanOptions
    device_names: tuple[str, ...] = ()


class TargetKind(Protocol):
    """A kind of target: its name (`--target`), the table's options that are its own, its devices."""

    @property
    def name(self) -> str: ...

    @property
    def shared_devices(self) -> bool:
        """Lanes on one device share its NPU service (host/run/lanes.py runs device-wide scenarios alone)."""
        ...

    @property
    def launches_devices(self) -> bool:
        """The kit starts this kind's devices for the run (and gives them a head start)."""
        ...

    def default_lanes(self, devices: int) -> int:
        """Lanes per device without -j, with `devices` devices in the run."""
        ...

    def chosen_by(self, options: PlanOptions) -> bool:
        """Whether options given without --target choose this kind (`auto`)."""
        ...

    def check(self, options: PlanOptions) -> None:
        """The options of other kinds given for this one: usage errors."""
        ...

    def open(self, opening: Opening) -> AbstractContextManager[list[Target]]:
        """The kind's targets, closed (launched devices stopped) on exit."""
        ...

    def resumed(self, options: PlanOptions, devices: tuple[str, ...]) -> Resumed:
        """The options and names that open the planned `devices` again (a resume)."""
        ...


def own_options(name: str) -> tuple[str, ...]:
    """The option keys of the table that belong to the kind `name`."""
    return tuple(o.key for o in OPTIONS if o.target == name)


def launched_targets(opening: Opening) -> Iterator[list[Target]]:
    """The launched devices' targets; they stop on exit, on a thread in `opening.stopping` when given."""
    assert opening.launch is not None, "a kind that launches devices is opened with `launch`"
    launched = opening.launch()
    try:
        yield list(launched.targets())
    finally:
        if opening.stopping is None:
            launched.stop()
        else:
            stopper = threading.Thread(target=launched.stop, name="stop-fleet")
            stopper.start()
            opening.stopping.append(stopper)
