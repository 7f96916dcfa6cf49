"""`npuconf fuzz` as a run: every device of the target fuzzed in parallel with its own share of the
seed's program stream, a device lost mid-run ending only its own part, Ctrl-C leaving fuzz.json,
fuzz.html and fuzz.jsonl with what was found, and `--until-found` stopping at the first divergence.
Real subprocesses, real virtual devices and real defect builds of the vnpu."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import jsonl_records, npuconf, npuconf_interruptible, wait_until
from tests.vnpu_builds import build_defective_vnpu

DEFECT = "VNPU_DEFECT_KEEP_REPLACED_COOKIE"
# The defect leaks the replaced cookie: its divergences name one of these (a replaced NULL cookie's deleter
# and a cleared cookie have sentences of their own).
CLAUSES = ("cookie-replace-deletes-previous", "cookie-deleter-called", "cookie-deleter-null-cookie", "cookie-clear")


def popen(*args):
    return npuconf_interruptible(*args)


def records(out: Path, kind: str) -> list[dict]:
    return jsonl_records(out / "fuzz.jsonl", kind)


def finish(process: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    try:
        return process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_two_virtual_devices_are_both_fuzzed_each_with_its_share_of_the_stream(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--target", "virtual", "--devices", "2", "--seed", "5", "--budget", "160",
                   "--out", out, "-q", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    devices = {d["device"]: d for d in summary["devices"]}
    assert sorted(devices) == ["virtual-1", "virtual-2"]
    # a count budget is the whole run's: programs 0..159 of the seed, even ones on one device, odd on the other
    assert [devices[n]["programs"] for n in ("virtual-1", "virtual-2")] == [80, 80]
    assert summary["programs"] == 160 and summary["verdicts"] == {"PASS": 160}
    for device in devices.values():
        assert device["status"] == "complete" and device["divergences"] == 0, device
        assert device["programs_per_s"] > 0 and device["verdicts"] == {"PASS": 80}
    assert devices["virtual-1"]["stream"].startswith("programs 0, 2,")
    assert devices["virtual-2"]["stream"].startswith("programs 1, 3,")
    assert "virtual-1:" in done.stdout and "virtual-2:" in done.stdout
    html = (out / "fuzz.html").read_text()
    assert 'id="devices"' in html and "virtual-1" in html and "virtual-2" in html
    (start,) = records(out, "start")
    assert [(d["device"], d["position"], d["stride"]) for d in start["devices"]] == [
        ("virtual-1", 0, 2), ("virtual-2", 1, 2)]
    assert sorted(r["device"] for r in records(out, "device")) == ["virtual-1", "virtual-2"]
    assert records(out, "end")[0]["exit_code"] == 0


@pytest.mark.slow
def test_a_device_lost_mid_run_ends_only_its_own_part(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    process = popen("fuzz", "--target", "virtual", "--devices", "2", "--seed", "5", "--budget", "15s", "--out", out,
                    "-q")
    try:
        state = out / "virtual-devices" / "virtual-devices.json"
        wait_until(lambda: records(out, "start"), 60, "the devices prepared")
        time.sleep(3)  # both devices are fuzzing
        victim = next(d for d in json.loads(state.read_text())["devices"] if d["name"] == "virtual-2")
        os.kill(victim["pid"], signal.SIGKILL)
        stdout, stderr = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2, stdout + stderr  # nothing diverged, and a device's part ended early
    summary = json.loads((out / "fuzz.json").read_text())
    devices = {d["device"]: d for d in summary["devices"]}
    # the 15 s are the whole command's, the devices' preparation included
    assert devices["virtual-1"]["status"] == "complete" and devices["virtual-1"]["fuzzing_s"] >= 10
    lost = devices["virtual-2"]
    assert lost["status"] == "lost" and lost["detail"] and lost["programs"] > 0, lost
    assert summary["divergences"] == [] and set(summary["verdicts"]) == {"PASS"}, summary
    assert "virtual-2:" in stdout and "LOST, its part ended:" in stdout
    assert "lost" in (out / "fuzz.html").read_text()


def test_sigterm_ends_a_fuzz_run_as_ctrl_c_does(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    process = popen("fuzz", "--seed", "1", "--budget", "60s", "--out", out, "-q")
    try:
        wait_until(lambda: records(out, "start"), 60, "fuzzing started")
        process.send_signal(signal.SIGTERM)
        stdout, stderr = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2, stdout + stderr
    assert "interrupted after" in stderr and "Traceback" not in stderr, stderr
    summary = json.loads((out / "fuzz.json").read_text())
    # SIGTERM may come before the first batch ends (a loaded CI machine): the reports are written either way
    assert summary["status"] == "interrupted" and summary["exit_code"] == 2, summary
    assert records(out, "end")[0]["status"] == "interrupted"


@pytest.mark.slow
def test_ctrl_c_after_a_divergence_keeps_it_in_the_reports(tmp_path, probe_build):
    library = build_defective_vnpu(tmp_path, DEFECT)
    out = tmp_path / "fuzz"
    process = popen("fuzz", "--impl", library, "--seed", "1", "--budget", "60s", "--out", out, "-q")
    try:
        (found,) = wait_until(lambda: records(out, "found"), 60, "a divergence found")
        assert '"ev":"begin"' in found["trace"][0] and any('"ev":"deleter"' in line for line in found["trace"])
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, stderr = finish(process)
        stopped_s = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2, stdout + stderr  # interrupted, as `npuconf run`'s Ctrl-C
    assert "interrupted after" in stderr and "fuzz.json" in stderr, stderr
    assert stopped_s < 15, stopped_s
    clause = found["clause"]
    assert clause in CLAUSES and Path(found["scenario"]).is_file()
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 2
    (divergence,) = [d for d in summary["divergences"] if d["signature"] == clause]
    scenario = Path(divergence["scenario"])
    assert scenario.is_file() and clause in scenario.read_text()
    if not divergence["shrunk"]:  # Ctrl-C came while it was being shrunk: the program as generated
        assert divergence["steps_after"] == divergence["steps_before"] and scenario.parent.parent.name == "found"
    # the replay line runs every divergence kept, shrunk or as generated
    assert (out / "scenarios" / "fuzz" / f"{divergence['scenario_id']}.yaml").is_file()
    assert str(out / "scenarios") in summary["replay"], summary["replay"]
    html = (out / "fuzz.html").read_text()
    assert "Interrupted" in html and clause in html
    assert ("not shrunk" in html) == (not divergence["shrunk"])
    assert records(out, "end")[0]["status"] == "interrupted"
    # the program as generated replays to the same clause
    replay = tmp_path / "replay"
    done = npuconf("run", "--target", "local", "--impl", library, "--scenarios", out / "found", "--out", replay, "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    results = [json.loads(line) for line in (replay / "results.jsonl").read_text().splitlines()]
    assert [r["divergence"]["clause"] for r in results if r["kind"] == "result"] == [clause]


@pytest.mark.slow
def test_until_found_stops_once_the_first_divergence_is_shrunk(tmp_path, probe_build):
    library = build_defective_vnpu(tmp_path, DEFECT)
    out = tmp_path / "fuzz"
    started = time.monotonic()
    # 0: no fuzzing past the first divergence (by default 20 s, in which this defect shows under three more
    # sentences, each shrunk once: the run then takes its whole budget)
    done = npuconf("fuzz", "--impl", library, "--seed", "1", "--budget", "120s", "--until-found", "0", "--out", out,
                   "-q", timeout=600)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < 100, took  # not the 120 s budget
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["status"] == "found" and summary["until_found"] and summary["exit_code"] == 1
    assert summary["config"]["after_find_s"] == 0
    first = summary["divergences"][0]
    assert first["shrunk"] and first["replays"] and first["steps_after"] <= 12, first
    assert summary["fuzzing_s"] < 60
    (device,) = summary["devices"]
    assert device["status"] == "found"
    # the first group is shrunk up to GROUP_SHRINKS times; a group of another clause found meanwhile once
    shrunk = [r["signature"] for r in records(out, "shrunk")]
    assert shrunk[0] == first["signature"], shrunk
    assert all(shrunk.count(s) == 1 for s in shrunk if s != first["signature"]), shrunk
    assert "--until-found" in done.stdout


@pytest.mark.slow
def test_coverage_prints_what_the_campaign_reached_and_judged(tmp_path, probe_build):
    """`--coverage`: the grammar's cells reached and missed (per op and context), and the clauses x outcomes
    judged, on stdout and in fuzz.jsonl's coverage line."""
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--seed", "3", "--budget", "60", "--coverage", "--out", out, "-q", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (coverage,) = records(out, "coverage")
    assert coverage["programs"] == 60 and 0 < coverage["cells_reached"] < coverage["cells_allowed"]
    assert coverage["cells_reached"] + len(coverage["cells_missed"]) == coverage["cells_allowed"]
    assert coverage["cells_outside_grammar"] == [] and coverage["judged"]["shown"] == coverage["clauses_judged"]
    lines = done.stdout.splitlines()
    head = f"coverage: {coverage['cells_reached']} of {coverage['cells_allowed']} grammar cells"
    assert any(line.startswith(head) for line in lines), done.stdout
    assert any(line.startswith("  buf_map  main: ") for line in lines)
    missed = next(line for line in lines if line.startswith("missed: "))
    assert "/".join(coverage["cells_missed"][0]) in missed
    judged = next(line for line in lines if line.startswith("judged: "))
    assert f"{coverage['clauses_judged']} of {coverage['clauses_testable']} testable clauses" in judged
