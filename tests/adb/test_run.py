"""`npuconf run` over adb: the virtual target end to end, device loss, resume, hangs, server restarts."""

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

import pytest
from junitparser import JUnitXml

from host.probe import Pairs, compile_program, compile_scenario
from host.run import prepare_device
from host.suite import load_catalogue, load_corpus
from host.targets.adb import AdbServerAddress, AdbTarget
from host.targets.adb_host import server_answers
from reports.recorded.results import load_results
from tests.adb.conftest import adb_cli, all_pids, assert_stopped, device_profile, npuconf_popen, records, slow_corpus
from tests.conftest import npuconf, wait_until

pytestmark = pytest.mark.slow


def test_virtual_run_passes_the_corpus_on_two_devices(tmp_path, probe_build):
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "virtual", "--devices", "2", "--out", run_dir, "-q", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    corpus = load_corpus(known_clauses=load_catalogue().ids())
    results = records(run_dir, "result")
    assert len(results) == 2 * len(corpus)
    other_policy = {s.id for s in corpus if any(n.startswith("policy-") and n != "policy-budget" for n in s.requires)}
    assert {r["verdict"] for r in results if r["scenario"] not in other_policy} == {"PASS"}
    assert {r["verdict"] for r in results if r["scenario"] in other_policy} == {"NOT_APPLICABLE"}
    assert records(run_dir, "plan")[0]["devices"] == ["virtual-1", "virtual-2"]
    assert records(run_dir, "plan")[0]["target"] == "virtual"

    xml = JUnitXml.fromfile(str(run_dir / "junit.xml"))
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == ["virtual-1", "virtual-2"]
    for name, suite in suites.items():
        properties = {p.name: p.value for p in suite.properties()}
        assert properties["device.serial"] == name
        assert properties["device.sdk"] == "37"
        assert properties["device.npu_feature"] == "true"
        assert properties["device.model"] == "vNPU"
        assert properties["device.fingerprint"].startswith("npuconf/vnpu_")
        assert len(list(suite)) == len(corpus)
    assert_stopped(all_pids(run_dir / "virtual-devices" / "virtual-devices.json"))


def test_device_killed_mid_run_then_resume_completes_the_plan(tmp_path, probe_build):
    scenarios = slow_corpus(tmp_path / "scenarios", count=10, sleep_ms=150)
    run_dir = tmp_path / "run"
    run = npuconf_popen(
        "run", "--target", "virtual", "--devices", "2", "--scenarios", scenarios, "--out", run_dir, "-q"
    )
    try:
        state = run_dir / "virtual-devices" / "virtual-devices.json"
        wait_until(lambda: sum(r["device"] == "virtual-2" for r in records(run_dir, "result")) >= 2, 30, "2 results")
        victim = next(d for d in json.loads(state.read_text())["devices"] if d["name"] == "virtual-2")
        os.kill(victim["pid"], signal.SIGKILL)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 2, out + err
    results = records(run_dir, "result")
    first = [r for r in results if r["device"] == "virtual-1"]
    second = [r for r in results if r["device"] == "virtual-2"]
    assert len(first) == 10 and {r["verdict"] for r in first} == {"PASS"}
    assert len(second) == 10 and len({r["scenario"] for r in second}) == 10
    passed = [r for r in second if r["verdict"] == "PASS"]
    rest = [r for r in second if r["verdict"] != "PASS"]
    assert len(passed) >= 2 and rest and {r["verdict"] for r in rest} == {"NOT_EXECUTED"}
    assert all(r["trace"][-1].startswith('{"ev":"exit"') for r in passed)
    assert_stopped(all_pids(run_dir / "virtual-devices" / "virtual-devices.json"))

    done = npuconf("run", "--resume", run_dir, "-q", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = load_results(run_dir)
    assert len(resumed.results) == 20 and {r.verdict.value for r in resumed.results} == {"PASS"}
    lines = records(run_dir, "result")
    assert len(lines) == 20 + len(rest)  # earlier records are kept; only the missing pairs ran again
    assert {r["scenario"] for r in lines[20:]} == {r["scenario"] for r in rest}
    assert len(records(run_dir, "plan")) == 1 and "exit_code" not in records(run_dir, "end")[-1]
    assert 'testsuite name="virtual-2"' in (run_dir / "junit.xml").read_text()


def test_hung_device_times_out_within_twice_the_deadline_then_is_lost(tmp_path, probe_build):
    scenarios = slow_corpus(tmp_path / "scenarios", count=8, sleep_ms=100, timeout_ms=1000)
    run_dir = tmp_path / "run"
    multiplier = 0.5
    limit_s = (1000 / 1000 + 2.0) * multiplier  # the runner's limit: timeout plus settle allowance
    # One lane: with N lanes each lane's scenario in flight times out too (up to N TIMEOUTs, not 3).
    run = npuconf_popen(
        "run", "--target", "virtual", "--scenarios", scenarios, "--timeout-multiplier", multiplier,
        "--out", run_dir, "-q", "-j", "1",
    )
    pid = None
    try:
        wait_until(lambda: len(records(run_dir, "result")) >= 1, 30, "a first result")
        state = run_dir / "virtual-devices" / "virtual-devices.json"
        pid = json.loads(state.read_text())["devices"][0]["pid"]
        os.kill(pid, signal.SIGSTOP)
        out, err = run.communicate(timeout=60)
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 2, out + err
    results = records(run_dir, "result")
    verdicts = [r["verdict"] for r in results]
    assert len(results) == 8
    timeouts = [r for r in results if r["verdict"] == "TIMEOUT"]
    assert len(timeouts) == 3, verdicts  # three in a row: the device is declared lost
    assert all(r["duration_ms"] <= 2 * limit_s * 1000 for r in timeouts), [r["duration_ms"] for r in timeouts]
    assert "unresponsive" in timeouts[0]["reason"]
    assert verdicts[-1] == "NOT_EXECUTED" and "lost" in results[-1]["reason"]
    assert_stopped(all_pids(run_dir / "virtual-devices" / "virtual-devices.json"))


def test_adb_server_restarted_mid_session_keeps_working(fleet_factory, tmp_path):
    supervisor = fleet_factory(1)
    fleet = supervisor.fleet
    device = fleet.devices[0]
    target = AdbTarget(
        fleet.server.address, device.adb_serial, serial=device.name,
        restart_server=supervisor.restart_server,
    )
    scenarios = slow_corpus(tmp_path / "scenarios", count=6, sleep_ms=200)
    corpus = load_corpus(scenarios, known_clauses=load_catalogue().ids())
    prepare_device(target)
    program = compile_program([compile_scenario(s, Pairs(None, None)) for s in corpus])
    ids = [s.id for s in corpus]
    traces = []
    outcome = {}

    def run():
        outcome["value"] = target.run_batch(program, ids, [7.0] * len(ids), traces.append)

    worker = threading.Thread(target=run)
    worker.start()
    wait_until(lambda: len(traces) >= 2, 20, "two scenarios")
    killed = adb_cli(fleet, "kill-server")
    assert killed.returncode == 0
    worker.join(timeout=40)
    assert not worker.is_alive()
    assert outcome["value"].error is None
    assert [t.scenario_id for t in traces] == ids  # the interrupted scenario ran again, nothing twice
    assert all(t.infra_error is None and t.timed_out is None for t in traces)
    assert all(json.loads(t.lines[-1])["status"] == "ok" for t in traces)
    assert server_answers(fleet.server.address)
    # and between batches: the server killed again, the next batch still runs
    adb_cli(fleet, "kill-server")
    again = []
    assert target.run_batch(program, ids, [7.0] * len(ids), again.append).error is None
    assert len(again) == len(ids)


def test_device_strings_never_reach_a_shell(tmp_path, fleet_factory):
    marks = [tmp_path / f"mark{i}" for i in range(4)]
    profile = device_profile(
        "virtual-1",
        **{
            "ro.product.model": f"vNPU;$(touch {marks[0]})",
            "ro.build.fingerprint": f"npuconf/`touch {marks[1]}`/x:17",
            "ro.product.manufacturer": f"a'; touch {marks[2]}; '",
            "ro.serialno": f'x"; touch {marks[3]}; "',
        },
    )
    supervisor = fleet_factory(1, profiles=[profile])
    server = supervisor.fleet.server.address
    run_dir = tmp_path / "run dir; $(touch x)"
    done = npuconf("run", "--target", "adb", "--adb-server", server, "-k", "requests",
                   "--out", run_dir, "-q", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    info = records(run_dir, "device")[0]["info"]
    assert info["model"] == f"vNPU;$(touch {marks[0]})"
    assert info["manufacturer"] == f"a'; touch {marks[2]}; '"
    assert [m for m in marks if m.exists()] == []
    assert not (tmp_path / "x").exists()


def test_virtual_device_start_and_stop_commands(tmp_path, probe_build):
    state = tmp_path / "state" / "virtual-devices.json"
    started = npuconf("virtual-device", "start", "--count", "2", "--state", state, timeout=60)
    try:
        assert started.returncode == 0, started.stderr
        data = json.loads(state.read_text())
        serials = [d["serial"] for d in data["devices"]]
        assert all(s in started.stdout for s in serials)
        server = AdbServerAddress.parse(data["adb_server"]["address"])
        assert server.is_unix and f"export ADB_SERVER_SOCKET={server}" in started.stdout
        assert all(not 5555 <= d["port"] <= 5585 for d in data["devices"])
        listing = subprocess.run(
            ["adb", "devices"], capture_output=True, text=True, timeout=20, check=False,
            env=dict(os.environ, HOME=data["adb_server"]["home"], ADB_SERVER_SOCKET=str(server)),
        ).stdout
        assert all(f"{s}\tdevice" in listing for s in serials)
        again = npuconf("virtual-device", "start", "--state", state)
        assert again.returncode == 3 and "already exists" in again.stderr
    finally:
        pids = all_pids(state) if state.exists() else []
        stopped = npuconf("virtual-device", "stop", "--state", state, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert_stopped(pids)
    assert not state.exists()
    time.sleep(0.1)
    assert not server_answers(server)
    assert not os.path.exists(os.path.dirname(server.path))  # the private socket directory is gone too


def test_virtual_device_start_on_a_port_when_asked(tmp_path, probe_build):
    from host.targets.virtual_device import free_port

    state = tmp_path / "state" / "virtual-devices.json"
    port = free_port()
    started = npuconf("virtual-device", "start", "--adb-port", port, "--state", state, timeout=60)
    try:
        assert started.returncode == 0, started.stderr
        assert f"export ANDROID_ADB_SERVER_PORT={port}" in started.stdout
        assert server_answers(AdbServerAddress("127.0.0.1", port))
    finally:
        stopped = npuconf("virtual-device", "stop", "--state", state, timeout=60)
    assert stopped.returncode == 0, stopped.stderr


def test_default_target_is_adb_when_devices_are_attached_else_virtual(fleet_factory, monkeypatch):
    from host.run import RunRequest, resolve_target
    from host.targets.virtual_device import free_port
    from reports.recorded.plan_options import PlanOptions

    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(free_port()))  # nothing listens there
    monkeypatch.delenv("ADB_SERVER_SOCKET", raising=False)
    assert resolve_target(RunRequest(target="auto")) == "virtual"
    assert resolve_target(RunRequest(target="auto", options=PlanOptions(cross="aarch64"))) == "local"
    supervisor = fleet_factory(1)
    monkeypatch.setenv("ADB_SERVER_SOCKET", str(supervisor.fleet.server.address))  # as adb reads it
    assert resolve_target(RunRequest(target="auto")) == "adb"
    assert resolve_target(RunRequest(target="virtual")) == "virtual"


def test_user_errors_are_one_line(tmp_path):
    for args, expected in [
        (("run", "--resume", tmp_path / "nothing"), "no results.jsonl"),
        (("run", "--target", "adb", "--adb-server", "nonsense"), "expected HOST:PORT"),
        (("run", "--target", "virtual", "--devices", "0"), "--devices 0"),
        (("virtual-device", "stop", "--state", tmp_path / "none.json"), "no virtual device state file"),
        (("virtual-device", "start", "--adb-port", "5037", "--state", tmp_path / "s.json"), "other than 5037"),
    ]:
        done = npuconf(*args, timeout=60)
        assert done.returncode == 3, (args, done.stderr)
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
