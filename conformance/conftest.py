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
from host.targets import (
    AdbServerAddress,
    AdbTarget,
    Fleet,
    FleetSupervisor,
    LocalTarget,
    VnpuProfile,
    check_impl,
    discover_targets,
    start_fleet,
)
from reference_model.errors import KitError

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
    if config.getoption("--npu-target", "local") != "virtual" or _is_worker(config):
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


@pytest.fixture(scope="session")
def npu_device(request, tmp_path_factory, npu_catalogue):
    config = request.config
    target_name = config.getoption("--npu-target")
    multiplier = config.getoption("--npu-timeout-multiplier")
    profile = VnpuProfile(personality=config.getoption("--npu-personality"))
    if target_name == "virtual":
        if _is_worker(config):
            supervisor = None
            fleet = Fleet.from_json(json.loads(config.workerinput[_FLEET_KEY]))
        else:
            supervisor = config._npuconf_supervisor
            fleet = supervisor.fleet
        device = fleet.devices[_worker_index(config) % len(fleet.devices)]
        target = AdbTarget(
            fleet.server.address,
            device.adb_serial,
            serial=device.name,
            profile=profile,
            timeout_multiplier=multiplier,
            restart_server=supervisor.restart_server if supervisor is not None else None,
        )
    elif target_name == "adb":
        servers = [AdbServerAddress.parse(s) for s in config.getoption("--npu-adb-server")] or [
            AdbServerAddress.default()
        ]

        def make(server, adb_serial, name):
            return AdbTarget(server, adb_serial, serial=name, profile=profile, timeout_multiplier=multiplier)

        targets = discover_targets(servers, config.getoption("--npu-serial"), make)
        target = targets[_worker_index(config) % len(targets)]
    else:
        impl = config.getoption("--npu-impl")
        target = LocalTarget(
            profile=profile,
            work_dir=tmp_path_factory.mktemp("npu-device"),
            impl=impl,
            timeout_multiplier=multiplier,
        )
    return PreparedDevice.open(target, dict(npu_catalogue.quotes()), config.getoption("--npu-profile"))
