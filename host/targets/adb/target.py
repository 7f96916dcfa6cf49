"""The adb target: one device behind one adb server, composed of its transport, its deployment and its
batch runner. Real devices, emulators and the kit's virtual devices all go through it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from floor.limits import limit, over

from ...errors import InfraError
from ...probe import BatchOutcome, ScenarioTrace
from ...suite import BUILD_ROOT
from ..adb_clients import Cancel
from ..adb_host import AdbServerAddress
from ..vnpu_profile import VnpuProfile
from .deployment import Deployed, deploy
from .streaming import BatchRunner
from .transport import DeviceTransport, bounded

LOGCAT_LINES: Final = 200


@dataclass
class AdbTarget:
    """One device behind one adb server. `serial` names it in results; `adb_serial` reaches it."""

    server: AdbServerAddress
    adb_serial: str
    serial: str = ""
    profile: VnpuProfile = field(default_factory=VnpuProfile)
    timeout_multiplier: float = 1.0
    settle_ms: int = 1000
    build_root: Path = BUILD_ROOT  # real devices: <build root>/probe-android-<abi>
    host_build: Path | None = None  # virtual devices (host ABI): default build/probe
    # Set for virtual devices the kit started: restarts their adb server and reconnects them.
    restart_server: Callable[[], None] | None = None
    launched_virtual: bool = False  # a virtual device the kit started: its probe is pushed while it is read
    virtual: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.serial = self.serial or self.adb_serial
        self.transport = DeviceTransport(self.server, self.adb_serial, self.serial, self.restart_server)
        self._runner: BatchRunner | None = None
        self._deployed: Deployed | None = None
        self._logcat_stalled = False  # one logcat past its deadline: none is asked for again this run

    def prepare(self) -> dict[str, Any]:
        deployed = self._deployed = deploy(
            self.transport, self.profile, self.build_root, self.host_build, self.launched_virtual
        )
        self.virtual = deployed.virtual
        self._runner = BatchRunner(self.transport, deployed.virtual, self.timeout_multiplier, self.settle_ms)
        return deployed.info

    def discovery_build(self) -> tuple[str, ...] | None:
        """Everything the discovery answer depends on (host/run/discovery_cache.py): the device's build
        fingerprint, the probe installed there (and on a virtual device libvnpu and its profile, by digest),
        how the probe is started and this class. Not the serial nor the server: devices of one build share
        it. None before `prepare`."""
        deployed = self._deployed
        if deployed is None:
            return None
        return (
            f"{type(self).__module__}.{type(self).__qualname__}", "virtual" if deployed.virtual else "adb",
            str(deployed.info.get("fingerprint", "")), *(f"{n}:{d}" for n, d in sorted(deployed.installed.items())),
            f"{self.timeout_multiplier:g}", str(self.settle_ms),
        )  # fmt: skip

    def run_batch(
        self,
        program: str,
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
    ) -> BatchOutcome:
        if self._runner is None:
            raise InfraError(f"{self.serial}: run_batch before prepare")
        return self._runner.run_batch(program, scenario_ids, limits_s, on_trace)

    def failure_context(self, scenario_id: str) -> tuple[str, ...]:
        """The tail of logcat, attached to a failing result on a real device (virtual devices have none)."""
        if self.virtual or self._logcat_stalled or (self._runner is not None and self._runner.lost is not None):
            return ()
        command = f"logcat -d -b main,system,crash -t {LOGCAT_LINES}"
        deadline = float(limit("logcat_seconds"))
        try:
            cancel = Cancel()
            done = bounded(lambda: self.transport.shell_once(command, deadline, cancel), deadline, "logcat", cancel)
        except TimeoutError:
            self._logcat_stalled = True
            return (f"[npuconf: logcat gave no answer; {over('logcat_seconds', 'logcat')}; no more logcat this run]",)
        except Exception:
            return ()
        return tuple(done.output.splitlines()[-LOGCAT_LINES:])
