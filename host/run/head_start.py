"""The kit's virtual devices get a head start: their fleet (the private adb server and the device processes)
is started on a thread of its own and, for a new run, each device is prepared there too (probe pushed,
pairs discovered) as soon as it is connected, while the command loads the corpus and writes the plan. A
virtual run's own fixed cost then overlaps the run's start-up instead of following it.

`start_ahead` is called by `npuconf run` first thing;
`start_run` takes what it started (the run's id, its directory and the devices) or, on any error before
the devices are in use, stops them and removes what was created for nothing (docs/architecture.md, "A run,
step by step"). `open_targets` starts a `VirtualFleet` on the spot for the commands that give no head start
(`--resume`, `npuconf fuzz`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import output_dir, shared_default
from reports.recorded.outputs import REPORT_FILES, RESULTS_FILE, present

from ..errors import UsageError
from ..targets import Device, Target, VnpuProfile
from ..targets.adb import AdbTarget
from ..targets.kinds import fleet_targets, resolve_kind
from ..targets.virtual_device import FleetSupervisor, start_fleet
from .discovery_cache import BuildDiscoveries
from .plan import RunRequest, new_run_id
from .prepared_device import prepare_device
from .target_choice import VIRTUAL_STATE_DIR


class VirtualFleet:
    """A run's virtual devices, being started on a thread (and, with `prepare`, each device prepared there
    as soon as it is connected). Whoever uses the devices stops them with `stop`."""

    def __init__(self, request: RunRequest, state_dir: Path, profile: VnpuProfile, prepare: bool = False) -> None:
        self._request = request
        self._state_dir = state_dir
        self._profile = profile
        self._prepare = prepare
        self._supervisor: FleetSupervisor | None = None
        self._targets: list[AdbTarget] = []
        self._error: BaseException | None = None
        self._prepared: dict[str, concurrent.futures.Future[Device]] = {}
        self._lock = threading.Lock()
        # Daemon: after Ctrl-C the command must not wait here; a fleet it leaves is reaped by the next run.
        self._thread = threading.Thread(target=self._start, name="start-fleet", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            request = self._request
            count = int(request.options.given("devices"))
            names = request.device_names or tuple(f"virtual-{i + 1}" for i in range(count))
            supervisor = FleetSupervisor(start_fleet(len(names), self._state_dir, names=names))
            with self._lock:
                self._supervisor = supervisor
            self._targets = fleet_targets(
                supervisor.fleet,
                self._profile,
                float(request.options.given("timeout_multiplier")),
                request.build_dir,
                supervisor.restart_server,
            )
            if self._prepare:
                self._prepare_all(self._targets)
        except BaseException as exc:
            self._error = exc

    def _prepare_all(self, targets: Sequence[AdbTarget]) -> None:
        builds = BuildDiscoveries()  # the devices of one build discover once
        for target in targets:
            future: concurrent.futures.Future[Device] = concurrent.futures.Future()
            self._prepared[target.serial] = future
            threading.Thread(
                target=_prepare, args=(target, builds, future), name=f"prepare-{target.serial}", daemon=True
            ).start()

    def targets(self) -> list[AdbTarget]:
        """The devices, once connected; raises what stopped the fleet from starting."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return list(self._targets)

    def prepared(self, target: Target) -> Device:
        """The device as it was prepared ahead (raises what its preparation raised), else prepared now."""
        self._thread.join()
        future = self._prepared.get(target.serial)
        if future is None:
            return prepare_device(target)
        return future.result()

    def stop(self) -> None:
        """Stop the devices and their adb server (once the start has ended); any later call does nothing."""
        self._thread.join()
        with self._lock:
            supervisor, self._supervisor = self._supervisor, None
        for future in self._prepared.values():  # a device is stopped only once its preparation let go
            with contextlib.suppress(BaseException):
                future.exception()
        if supervisor is not None:
            supervisor.stop()


def _prepare(target: Target, builds: BuildDiscoveries, future: concurrent.futures.Future[Device]) -> None:
    try:
        future.set_result(prepare_device(target, builds))
    except BaseException as exc:
        future.set_exception(exc)


@dataclass
class HeadStart:
    """What `start_ahead` started for a new run: its id and directory (made for it, with the parents it
    made, innermost first), and its virtual devices."""

    run_id: str
    out_dir: Path
    created: list[Path]
    fleet: VirtualFleet
    target_name: str  # the kind whose devices the fleet is
    taken: bool = False  # the run uses the devices now (open_targets stops them)

    def abandon(self, discard: bool) -> None:
        """The run stopped: stop the devices unless the run had taken them (it stops them itself); with
        `discard`, remove what was made for the run, unless it recorded something there."""
        if not self.taken:
            self.fleet.stop()
        if discard and not (self.out_dir / RESULTS_FILE).exists():
            shutil.rmtree(self.out_dir / VIRTUAL_STATE_DIR, ignore_errors=True)  # start_ahead found none there
            remove_created(self.created, self.out_dir)


def start_ahead(request: RunRequest) -> HeadStart | None:
    """Start a new run's virtual devices now, when the run will use them and its directory can be used; None
    otherwise (the run then finds what is wrong, if anything, and says so as it always does)."""
    run_id = new_run_id()
    try:
        out_dir = request.out or default_out_dir(run_id)
        kind = resolve_kind(request.target, request.options)
        if not kind.launches_devices:
            return None
        kind.check(request.options)
        if present(out_dir, (RESULTS_FILE,)) is not None or present(out_dir, REPORT_FILES) is not None:
            return None
        if os.path.lexists(out_dir / VIRTUAL_STATE_DIR):  # not made for this run: never removed by it
            return None
        created = missing_ancestors(out_dir)
        output_dir(out_dir)
    except Exception:
        return None
    fleet = VirtualFleet(request, out_dir / VIRTUAL_STATE_DIR, request.vnpu_profile(), prepare=True)
    return HeadStart(run_id, out_dir, created, fleet, kind.name)


DEFAULT_OUT: Final = Path("out")


def default_out_dir(run_id: str) -> Path:
    """out/<run id> in the working directory, when only this user could have made what `out` is: a default
    in a directory other users can write (the shared temporary directory) is theirs to plant."""
    problem = shared_default(Path(os.path.abspath(DEFAULT_OUT)))
    if problem is not None:
        raise UsageError(f"the default output directory {DEFAULT_OUT}/ is not used: {problem}; name one with --out DIR")
    return DEFAULT_OUT / run_id


def remove_created(created: Sequence[Path], out_dir: Path) -> bool:
    """Remove `out_dir` and the parents made with it (`created`, innermost first, as `missing_ancestors`
    found them) when it was made for the run, the parents only when left empty; whether it was."""
    if not created or created[0] != out_dir:
        return False
    shutil.rmtree(out_dir, ignore_errors=True)
    for parent in created[1:]:
        with contextlib.suppress(OSError):
            parent.rmdir()
    return True


def missing_ancestors(directory: Path) -> list[Path]:
    """`directory` and those of its parents that do not exist yet, innermost first."""
    missing: list[Path] = []
    for path in (directory, *directory.parents):
        if path.exists() or path.is_symlink():
            break
        missing.append(path)
    return missing
