"""Fixtures for running the corpus as plain pytest: one prepared device per session (per xdist worker).

With `--npu-target virtual` the main process starts the private adb server and `--npu-devices`
virtual devices once, hands their addresses to the xdist workers, and stops them at the end; worker
N binds device N modulo the device count. With `--npu-target adb` every worker discovers the devices
on the `--npu-adb-server`s (filtered by `--npu-serial`) and binds one the same way.
"""

import json
import os
from pathlib import Path

import pytest

from host.run import PreparedDevice
from host.suite import load_catalogue
from host.targets import VnpuProfile
from host.targets.impl_check import check_impl
from host.targets.kinds import DEFAULT_KIND, Opening, fleet_targets, target_kind
from host.targets.virtual_device import Fleet, FleetSupervisor, start_fleet
from reference_model.errors import KitError
from reports.recorded.plan_options import PlanOptions

_FLEET_KEY = "npuconf_fleet"


def _is_worker(config):
    return hasattr(config, "workerinput")


def pytest_configure(config):
    impl = config.getoption("--npu-impl", None)
    if impl and not _is_worker(config):
        # One usage error before the session starts, not one setup error per scenario.
        try:
            check_impl(impl)
        except KitError as exc:
            raise pytest.UsageError(str(exc).replace("--impl", "--npu-impl", 1)) from None
    if not target_kind(config.getoption("--npu-target", DEFAULT_KIND)).launches_devices or _is_worker(config):
        return
    import tempfile

    count = config.getoption("--npu-devices")
    if count < 1:
        raise pytest.UsageError(f"--npu-devices {count}: expected at least one virtual device")
    state_dir = Path(tempfile.mkdtemp(prefix="npuconf-pytest-devices-"))
    config._npuconf_supervisor = FleetSupervisor(start_fleet(count, state_dir))


def pytest_unconfigure(config):
    supervisor = getattr(config, "_npuconf_supervisor", None)
    if supervisor is not None:
        supervisor.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist: give each worker the fleet the main process started."""
    supervisor = getattr(node.config, "_npuconf_supervisor", None)
    if supervisor is not None:
        node.workerinput[_FLEET_KEY] = json.dumps(supervisor.fleet.to_json())


def _worker_index(config):
    worker = getattr(config, "workerinput", {}).get("workerid", os.environ.get("PYTEST_XDIST_WORKER", "gw0"))
    digits = "".join(ch for ch in worker if ch.isdigit())
    return int(digits) if digits else 0


@pytest.fixture(scope="session")
def npu_catalogue():
    return load_catalogue()


class _SessionFleet:
    """The virtual devices the main process started for the session: each worker binds one; the main
    process stops them at the end (pytest_unconfigure)."""

    def __init__(self, config, profile, multiplier):
        self.config, self.profile, self.multiplier = config, profile, multiplier

    def targets(self):
        if _is_worker(self.config):
            fleet, restart = Fleet.from_json(json.loads(self.config.workerinput[_FLEET_KEY])), None
        else:
            supervisor = self.config._npuconf_supervisor
            fleet, restart = supervisor.fleet, supervisor.restart_server
        return fleet_targets(fleet, self.profile, self.multiplier, restart_server=restart)

    def stop(self):
        return None


@pytest.fixture(scope="session")
def npu_device(request, tmp_path_factory, npu_catalogue):
    config = request.config
    multiplier = config.getoption("--npu-timeout-multiplier")
    impl = config.getoption("--npu-impl")
    profile = VnpuProfile(personality=config.getoption("--npu-personality"))
    options = PlanOptions(
        impl=str(impl) if impl else None,
        timeout_multiplier=multiplier,
        serials=tuple(config.getoption("--npu-serial")),
        adb_servers=tuple(config.getoption("--npu-adb-server")),
    )
    opening = Opening(
        options,
        tmp_path_factory.mktemp("npu-device"),
        profile,
        launch=lambda: _SessionFleet(config, profile, multiplier),
    )
    with target_kind(config.getoption("--npu-target")).open(opening) as targets:
        target = targets[_worker_index(config) % len(targets)]
    return PreparedDevice.open(target, dict(npu_catalogue.quotes()), config.getoption("--npu-profile"))
