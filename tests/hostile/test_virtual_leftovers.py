"""What a virtual run or fleet leaves behind (issue 39): a refused run leaves no directory (its fleet's adb key
would stay in it), and nothing a shell on a virtual device started outlives the device."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.hostile.conftest import cli, text


def test_a_virtual_run_refused_for_its_waiver_file_leaves_no_directory(tmp_path):
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("waivers:\n  - scenario: free.empty_list\n    reason: no device glob\n    expires: 2099-01-01\n")
    run = tmp_path / "runs" / "run"
    done = cli("run", "--target", "virtual", "--waivers", waivers, "--out", run, "-q",
               env={"NPUCONF_STATE_DIR": str(tmp_path / "state")}, timeout=120)
    assert done.returncode == 3, text(done)
    assert "waivers[0].device" in text(done) and len(text(done).strip().splitlines()) == 1
    assert not run.exists() and not (tmp_path / "runs").exists()  # no adb key, no fleet state, no marker


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_setsid_process_a_devices_shell_started_dies_with_virtual_device_stop(tmp_path, probe_build):
    """Issue 39: a process a shell command put in a session of its own outlived `virtual-device stop`."""
    state = tmp_path / "state" / "virtual-devices.json"
    started = cli("virtual-device", "start", "--state", state, timeout=60)
    assert started.returncode == 0, text(started)
    try:
        data = json.loads(state.read_text())
        env = dict(os.environ, HOME=data["adb_server"]["home"], ADB_SERVER_SOCKET=data["adb_server"]["address"])
        shell = subprocess.run(
            ["adb", "-s", data["devices"][0]["serial"], "shell",
             "setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!'; sleep 0.2"],
            env=env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        escaped = int(shell.stdout.split()[0])
        assert _alive(escaped), shell.stdout + shell.stderr  # the shell command ended; the sleeper did not
    finally:
        stopped = cli("virtual-device", "stop", "--state", state, timeout=60)
    assert stopped.returncode == 0, text(stopped)
    deadline = time.monotonic() + 5
    while _alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(escaped)
