"""`npuconf run --shard` on virtual devices: each scenario once per build, device loss, two adb servers."""

import json
import os
import signal
from collections import Counter

import junitparser
import pytest

from host.suite import load_catalogue, load_corpus
from host.targets.virtual_device import pid_runs
from reports.answers.claim import claim_of
from reports.recorded.results import load_results
from tests.adb.conftest import all_pids, assert_stopped, npuconf_popen, records, slow_corpus
from tests.conftest import npuconf, wait_until

pytestmark = pytest.mark.slow


def _one_group(run_dir):
    devices = records(run_dir, "device")
    groups = {d["group"] for d in devices}
    assert len(groups) == 1, groups
    (group,) = groups
    assert group == devices[0]["info"]["fingerprint"] and group.startswith("npuconf/vnpu_")
    return devices


def test_sharded_run_on_four_devices_runs_each_scenario_exactly_once(tmp_path, probe_build):
    run_dir = tmp_path / "runs" / "run"
    done = npuconf("run", "--target", "virtual", "--devices", "4", "--shard", "--out", run_dir, "-q", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    corpus = load_corpus(known_clauses=load_catalogue().ids())
    results = records(run_dir, "result")
    assert Counter(r["scenario"] for r in results) == Counter(s.id for s in corpus)  # once each, none missing
    # Everything passes but the scenarios of allocation policies the virtual devices do not run.
    by_id = {s.id: s for s in corpus}
    assert {r["verdict"] for r in results} <= {"PASS", "NOT_APPLICABLE"}
    not_applicable = [r["scenario"] for r in results if r["verdict"] == "NOT_APPLICABLE"]
    assert all(any(need.startswith("policy-") for need in by_id[i].requires) for i in not_applicable), not_applicable
    per_device = Counter(r["device"] for r in results)
    assert sorted(per_device) == ["virtual-1", "virtual-2", "virtual-3", "virtual-4"], per_device
    assert min(per_device.values()) >= len(corpus) // 10, per_device  # every device took a real share
    plan = records(run_dir, "plan")[0]
    assert plan["shard"] is True and plan["options"]["shard"] is True
    _one_group(run_dir)

    run = load_results(run_dir)  # the union: one result per scenario for the build
    assert len(run.results) == len(corpus) and claim_of(run).level.value == "conformant"
    assert set(run.groups.values()) == {records(run_dir, "device")[0]["group"]}
    html = (run_dir / "report.html").read_text()
    assert "Shard groups" in html and "virtual-3" in html
    group = records(run_dir, "device")[0]["group"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["groups"] == {group: ["virtual-1", "virtual-2", "virtual-3", "virtual-4"]}
    suites = list(junitparser.JUnitXml.fromfile(str(run_dir / "junit.xml")))
    assert {s.name: {p.name: p.value for p in s.properties()}["shard_group"] for s in suites} == dict.fromkeys(
        ["virtual-1", "virtual-2", "virtual-3", "virtual-4"], group)

    # The run recorded itself with its durations; a second sharded run balances with them.
    from reports.store.runs import measured_durations

    store = tmp_path / "runs" / "npuconf.sqlite"
    durations = measured_durations(store).for_build(plan_fingerprint := records(run_dir, "device")[0]["group"])
    ran = len(corpus) - len(not_applicable)  # a scenario that never ran has no duration
    assert len(durations) >= ran - 5 and all(v > 0 for v in durations.values()), plan_fingerprint
    assert_stopped(all_pids(run_dir / "virtual-devices" / "virtual-devices.json"))

    _verify_sharded_bundles(run_dir, tmp_path / "verify")


def _edited_run(source, out, edit):
    """A copy of the run's results.jsonl with every record passed through `edit` (None drops it)."""
    out.mkdir(parents=True)
    lines = [edit(json.loads(line)) for line in (source / "results.jsonl").read_text().splitlines()]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines if r is not None))
    return out


def _verify(run_dir, bundle):
    assert npuconf("bundle", run_dir, "--out", bundle).returncode == 0
    return npuconf("verify", bundle)


def _verify_sharded_bundles(run_dir, work):
    """verify re-derives a sharded run per build; a bundle edited to change what counts as planned is refused."""
    checked = _verify(run_dir, work / "as-run.tar.gz")
    assert checked.returncode == 0 and checked.stdout.startswith("bundle verifies: conformant"), checked.stdout

    def unsharded(r):
        return {k: v for k, v in r.items() if k != "shard"} if r["kind"] == "plan" else r

    def options_disagree(r):
        return {**r, "options": {**r["options"], "shard": False}} if r["kind"] == "plan" else r

    def regrouped(r):
        return {**r, "group": "any/label"} if r["kind"] == "device" and r["device"] == "virtual-2" else r

    for name, edit, expected in (
        ("unsharded", unsharded, "planned but missing"),
        ("options", options_disagree, "the plan says shard true but its options say False"),
        ("regrouped", regrouped, "device virtual-2 is recorded in group 'any/label'"),
    ):
        edited = _edited_run(run_dir, work / name, edit)
        checked = _verify(edited, work / f"{name}.tar.gz")
        assert checked.stdout.startswith("bundle rejected:") and expected in checked.stdout, (name, checked.stdout)


def test_killing_a_device_mid_run_still_finishes_every_scenario(tmp_path, probe_build):
    scenarios = slow_corpus(tmp_path / "scenarios", count=30, sleep_ms=150)
    run_dir = tmp_path / "run"
    run = npuconf_popen(
        "run", "--target", "virtual", "--devices", "3", "--shard", "--scenarios", scenarios, "--out", run_dir, "-q"
    )
    try:
        state = run_dir / "virtual-devices" / "virtual-devices.json"
        wait_until(lambda: sum(r["device"] == "virtual-2" for r in records(run_dir, "result")) >= 2, 60, "2 results")
        victim = next(d for d in json.loads(state.read_text())["devices"] if d["name"] == "virtual-2")
        os.kill(victim["pid"], signal.SIGKILL)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    # Every scenario ran, but the run lost a device: recorded, on the console and in summary.json: incomplete.
    assert run.returncode == 2, out + err
    (lost,) = records(run_dir, "lost")
    assert lost["device"] == "virtual-2" and lost["reason"]
    assert "the run lost device virtual-2 mid-run" in out + err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["claim"]["level"] == "incomplete"
    assert [d["device"] for d in summary["claim"]["lost_devices"]] == ["virtual-2"]
    results = records(run_dir, "result")
    assert Counter(r["scenario"] for r in results) == Counter(f"requests.slow_{i:02d}" for i in range(30))
    assert {r["verdict"] for r in results} == {"PASS"}
    per_device = Counter(r["device"] for r in results)
    assert 2 <= per_device["virtual-2"] < 10, per_device  # it ran some, then its share went to the others
    assert per_device["virtual-1"] + per_device["virtual-3"] >= 20
    assert not pid_runs(victim["pid"])
    assert_stopped(all_pids(run_dir / "virtual-devices" / "virtual-devices.json"))


def test_two_adb_servers_join_one_sharded_run(tmp_path, fleet_factory):
    """A lab of two hosts: each has its own adb server with virtual devices; one run shards across both."""
    first, second = fleet_factory(2), fleet_factory(2)
    servers = [str(f.fleet.server.address) for f in (first, second)]
    scenarios = slow_corpus(tmp_path / "scenarios", count=24, sleep_ms=60)
    run_dir = tmp_path / "run"
    done = npuconf(
        "run", "--target", "adb", "--adb-server", servers[0], "--adb-server", servers[1], "--shard",
        "--scenarios", scenarios, "--out", run_dir, "-q", timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    devices = _one_group(run_dir)
    assert len(devices) == 4
    fleets = zip((first, second), servers, strict=True)
    server_of = {d.adb_serial: server for f, server in fleets for d in f.fleet.devices}
    assert sorted(d["device"] for d in devices) == sorted(server_of)  # every device of both servers
    results = records(run_dir, "result")
    assert Counter(r["scenario"] for r in results) == Counter(f"requests.slow_{i:02d}" for i in range(24))
    by_server = Counter(server_of[r["device"]] for r in results)
    assert set(by_server) == set(servers) and min(by_server.values()) >= 4, by_server
    assert {r["verdict"] for r in results} == {"PASS"}


def test_a_sharded_run_whose_devices_were_all_lost_resumes_sharded_and_is_recorded(tmp_path, probe_build):
    """Issue 13 too: a resumed run is recorded in the store (its grown results replace the earlier rows)."""
    from reports.store.runs import open_store

    scenarios = slow_corpus(tmp_path / "scenarios", count=12, sleep_ms=150)
    run_dir = tmp_path / "runs" / "run"
    run = npuconf_popen(
        "run", "--target", "virtual", "--devices", "1", "--shard", "--scenarios", scenarios, "--out", run_dir, "-q"
    )
    try:
        state = run_dir / "virtual-devices" / "virtual-devices.json"
        wait_until(lambda: len(records(run_dir, "result")) >= 2, 60, "2 results")
        os.kill(json.loads(state.read_text())["devices"][0]["pid"], signal.SIGKILL)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 2, out + err
    lost = [r for r in records(run_dir, "result") if r["verdict"] == "NOT_EXECUTED"]
    assert lost and all("every device of this build was lost" in r["reason"] for r in lost)
    store = tmp_path / "runs" / "npuconf.sqlite"
    with open_store(store, create=False) as conn:
        assert conn.query("SELECT count(*) FROM verdicts WHERE verdict = 'NOT_EXECUTED'") == [(len(lost),)]

    done = npuconf("run", "--resume", run_dir, "-q", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = load_results(run_dir)
    assert len(resumed.results) == 12 and {r.verdict.value for r in resumed.results} == {"PASS"}
    with open_store(store, create=False) as conn:
        assert conn.query("SELECT verdict, count(*) FROM verdicts GROUP BY verdict") == [("PASS", 12)]
        assert conn.query("SELECT count(*) FROM runs") == [(1,)]
