"""Random allocation programs near the capacity, run on the vnpu under each policy: the model told the
same policy must accept every trace. The C policies and their Python statements are checked against
each other on many more sequences than the hand-written scenarios."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from tests.conftest import npuconf

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
CAPACITY = 256 * MIB
SCENARIOS_PER_POLICY = 24


def program(seed: int, policy: str) -> dict:
    rng = random.Random(seed)
    steps: list[dict] = []
    live: list[str] = []
    allocs = 0
    for i in range(rng.randint(6, 14)):
        roll = rng.random()
        if roll < 0.6 or not live:
            name = f"b{i}"
            size = rng.choice((rng.randint(1, 5000), rng.randint(1, 64 * MIB), rng.randint(64 * MIB, 200 * MIB),
                               rng.choice((MIB, MIB + 1, 2 * MIB, CAPACITY // 2, CAPACITY - 1))))
            r = f"r{i}"
            steps += [
                {"req_create": {"req": r}},
                {"req_set_device": {"req": r, "device": "$pair.device"}},
                {"req_set_type": {"req": r, "type": rng.randint(1, 4)}},
                {"req_set_size": {"req": r, "size": size}},
                {"req_set_priority": {"req": r, "priority": rng.choice((100, 500, 900))}},
                {"req_set_onalloc": {"req": r, "set": True}},
                {"req_set_onpreempt": {"req": r, "set": True}},
                {"cookie_new": {"cookie": f"c{i}"}},
                {"req_set_cookie": {"req": r, "cookie": f"c{i}", "deleter": True}},
                {"alloc": {"reqs": [r]}},
            ]
            allocs += 1
            steps += [
                {"await_alloc": {"count": allocs, "timeout_ms": 2000}},
                {"bind": {"buf": name, "select": {"cookie": f"c{i}"}}},
                {"req_free": {"req": r}},
            ]
            live.append(name)
        elif roll < 0.85:
            steps.append({"buf_free": {"bufs": [live.pop(rng.randrange(len(live)))]}})
        else:
            reserve = rng.choice((0, 16 * MIB, 100 * MIB, 200 * MIB))
            steps.append({"vnpu": {"command": f"pressure={reserve}"}})
    return {"id": f"fuzz.{policy}_{seed}", "title": f"random allocation program {seed} under {policy}",
            "clauses": ["alloc-supported-may-fail"], "requires": ["supported-pair", "vnpu-control", f"policy-{policy}"],
            "steps": steps}


@pytest.mark.parametrize("policy", ["budget", "acl", "caching", "arena"])
def test_random_programs_are_predicted_exactly(tmp_path, probe_build, policy):
    scenarios = tmp_path / "scenarios" / "fuzz"
    scenarios.mkdir(parents=True)
    programs = [program(seed, policy) for seed in range(SCENARIOS_PER_POLICY)]
    (scenarios / "fuzz.yaml").write_text(yaml.safe_dump({"scenarios": programs}, sort_keys=False))
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--policy", policy, "--scenarios", tmp_path / "scenarios",
                   "--out", run_dir, "-q")
    results = [r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
               if r["kind"] == "result"]
    bad = [(r["scenario"], r["verdict"], r["reason"]) for r in results if r["verdict"] != "PASS"]
    assert bad == [], done.stdout
    assert len(results) == SCENARIOS_PER_POLICY
    events = [json.loads(line) for r in results for line in r["trace"]]
    enomem = sum(1 for e in events if e["ev"] == "cb" and e["kind"] == "alloc" and e["error"] == "ENOMEM")
    granted = sum(1 for e in events if e["ev"] == "cb" and e["kind"] == "alloc" and e["error"] == 0)
    preempted = sum(1 for e in events if e["ev"] == "cb" and e["kind"] == "preempt")
    print(f"{policy}: {granted} granted, {enomem} ENOMEM, {preempted} onPreempt")
    assert enomem >= 10 and granted >= 40 and preempted >= 3  # the programs reach the capacity
