"""Fixtures for the adb tests: private adb servers and virtual devices, always stopped by PID."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host.targets.virtual_device import DeviceProfile, FleetSupervisor, adb_env, pid_runs, start_fleet, stop_fleet
from tests.conftest import ROOT, jsonl_records


def slow_corpus(directory, count, sleep_ms=150, timeout_ms=5000):
    """A scenario directory of `count` scenarios that each take about sleep_ms on the device."""
    chapter = directory / "requests"
    chapter.mkdir(parents=True, exist_ok=True)
    scenarios = [
        {
            "id": f"requests.slow_{i:02d}",
            "title": "A request created, kept a while, then destroyed",
            "clauses": ["req-create-returns-request", "req-free-destroys"],
            "timeout_ms": timeout_ms,
            "steps": [{"req_create": {"req": "r"}}, {"sleep_ms": {"ms": sleep_ms}}, {"req_free": {"req": "r"}}],
        }
        for i in range(count)
    ]
    (chapter / "slow.yaml").write_text(json.dumps({"scenarios": scenarios}), encoding="utf-8")
    return directory


def device_profile(name, **props):
    """The profile of the virtual device `name` with `props` set: a phone that does not say it is virtual,
    strings a device should never get into a shell."""
    profile = DeviceProfile.default(name)
    return dataclasses.replace(profile, props={**profile.props, **props})


def records(run_dir, kind):
    return jsonl_records(run_dir / "results.jsonl", kind)


def npuconf_popen(*args, cwd=None, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=cwd or ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env or os.environ, PYTHONPATH=str(ROOT)),
    )


def all_pids(state_file):
    state = json.loads(Path(state_file).read_text())
    return [state["adb_server"]["pid"], *(d["pid"] for d in state["devices"])]


def assert_stopped(pids):
    time.sleep(0.1)
    alive = [pid for pid in pids if pid_runs(pid)]
    assert alive == [], f"processes left running: {alive}"


def adb_cli(fleet, *args, input=None, timeout=20):
    return subprocess.run(
        ["adb", *fleet.server.address.adb_option(), *args],
        env=adb_env(fleet.server.address, fleet.server.home),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def fleet_factory(tmp_path, probe_build):
    """Start fleets inside a test; every one is stopped afterwards (by PID, then kill-server)."""
    started = []

    def start(count=1, **kwargs):
        fleet = start_fleet(count, tmp_path / f"fleet{len(started)}", **kwargs)
        supervisor = FleetSupervisor(fleet)
        started.append(supervisor)
        return supervisor

    yield start
    for supervisor in started:
        for device in supervisor.fleet.devices:
            if pid_runs(device.pid):
                os.kill(device.pid, signal.SIGCONT)
        supervisor.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """One adb server with two virtual devices, shared by a module's read-mostly tests."""
    fleet = start_fleet(2, tmp_path_factory.mktemp("fleet"))
    yield fleet
    stop_fleet(fleet)
    assert_stopped([fleet.server.pid, *(d.pid for d in fleet.devices)])


@pytest.fixture(autouse=True)
def _keep_adb_environment():
    """The adb target pins ANDROID_ADB_SERVER_PORT in os.environ; do not leak it into other tests."""
    saved = os.environ.get("ANDROID_ADB_SERVER_PORT")
    yield
    if saved is None:
        os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
    else:
        os.environ["ANDROID_ADB_SERVER_PORT"] = saved
