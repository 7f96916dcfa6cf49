"""Lanes (host/run/lanes.py): the default lane count by target, longest-first dealing, and the default
run giving exactly the verdicts of a one-lane run."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import host.run.runner as runner
from host.run.lanes import DEFAULT_LANES, deal_lanes, default_lanes, needs_device_alone
from tests.conftest import npuconf


def test_default_lanes_keep_a_shared_device_to_one_lane():
    assert default_lanes("adb") == 1
    assert default_lanes("local") == default_lanes("virtual") == DEFAULT_LANES > 1
    assert default_lanes("virtual", 2) == DEFAULT_LANES // 2 and default_lanes("virtual", 64) == 1


def test_device_wide_scenarios_run_alone_after_the_others_on_a_shared_device(monkeypatch):
    scenarios = [SimpleNamespace(id=f"s{i}", requires=frozenset({"capacity"} if i % 3 == 0 else ())) for i in range(9)]
    compiled = [SimpleNamespace(scenario=s) for s in scenarios]
    monkeypatch.setattr(runner.DeviceRun, "compile_for", lambda self, device, chosen: compiled)
    monkeypatch.setattr(runner, "group_of", lambda device: "build")
    lock, running, log = threading.Lock(), [], []

    def lane(self, device, items):
        with lock:
            running.append(items)
            log.append(("start", [c.scenario.id for c in items], len(running)))
        time.sleep(0.05)
        with lock:
            running.remove(items)

    monkeypatch.setattr(runner.DeviceRun, "_run_lane", lane)
    for target, alone in (("adb", True), ("local", False), ("virtual", False)):
        log.clear()
        run = runner.DeviceRun.__new__(runner.DeviceRun)
        run.plan, run.estimates = SimpleNamespace(jobs=3, target_name=target), None
        run._run_scenarios(object(), [])
        if alone:
            *parallel, last = log
            assert last == ("start", ["s0", "s3", "s6"], 1)  # alone: no other lane was running
            assert sorted(i for _, ids, _ in parallel for i in ids) == ["s1", "s2", "s4", "s5", "s7", "s8"]
        else:
            assert sorted(i for _, ids, _ in log for i in ids) == sorted(s.id for s in scenarios)
    assert needs_device_alone("adb", frozenset({"policy-acl", "load"}))
    assert not needs_device_alone("adb", frozenset({"load"}))
    assert not needs_device_alone("local", frozenset({"capacity"}))


def test_longest_scenarios_are_dealt_first_to_the_least_loaded_lane():
    durations = {"long": 900.0, "mid": 500.0, "a": 100.0, "b": 100.0, "c": 100.0, "d": 100.0}
    lanes = deal_lanes(list(durations), 2, str, durations)
    loads = sorted(sum(durations[i] for i in lane) for lane in lanes)
    assert loads == [900.0, 900.0]  # round robin would give 1200 + 600
    assert ["long"] in lanes
    # each lane keeps the original order
    assert all(lane == sorted(lane, key=list(durations).index) for lane in lanes)


def test_nothing_measured_deals_in_turn_and_no_lane_is_empty():
    items = [f"s{i}" for i in range(5)]
    assert deal_lanes(items, 2, str, {}) == [["s0", "s2", "s4"], ["s1", "s3"]]
    assert deal_lanes(items[:2], 8, str, {}) == [["s0"], ["s1"]]
    assert deal_lanes([], 4, str, {}) == []


def _verdicts(run_dir):
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    plan = next(r for r in records if r["kind"] == "plan")
    verdicts = {(r["device"], r["scenario"]): r["verdict"] for r in records if r["kind"] == "result"}
    return plan["options"]["jobs"], verdicts


def test_the_default_lanes_give_the_verdicts_of_one_lane(tmp_path, published_run):
    one = npuconf("run", "--target", "local", "-j", "1", "--out", tmp_path / "one", "-q", "--store", tmp_path / "s.db")
    assert one.returncode == 0, one.stderr
    one_jobs, one_verdicts = _verdicts(tmp_path / "one")
    default_jobs, default_verdicts = _verdicts(published_run.path)  # the default lanes (tests/conftest.py)
    assert (one_jobs, default_jobs) == (1, DEFAULT_LANES)
    assert default_verdicts == one_verdicts and len(one_verdicts) > 300
    # A virtual device with its default lanes, each lane's probe with its own vnpu: the same verdicts.
    virtual = npuconf("run", "--target", "virtual", "--out", tmp_path / "virtual", "-q", "--store", tmp_path / "v.db")
    assert virtual.returncode == 0, virtual.stderr
    virtual_jobs, virtual_verdicts = _verdicts(tmp_path / "virtual")
    assert virtual_jobs == DEFAULT_LANES
    assert {s: v for (_, s), v in virtual_verdicts.items()} == {s: v for (_, s), v in one_verdicts.items()}
