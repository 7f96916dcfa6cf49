"""`npuconf fuzz`: generated programs are valid and reproducible, the conformant vnpu gives no divergence,
and single-defect builds of the vnpu are found, shrunk to at most 12 steps and replayed by
`npuconf run --scenarios` to the same clause (while the conformant vnpu passes the same scenario)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from host.errors import UsageError
from host.fuzz import Budget, generate, step_count
from host.fuzz.shrink import normalise
from host.suite import load_catalogue
from reference_model.scenario import parse_scenario
from reference_model.vocabulary import Op
from tests.conftest import npuconf
from tests.host.test_end_to_end import build_defective_vnpu

MAX_SHRUNK_STEPS = 12


def test_programs_validate_and_are_reproducible_from_the_seed():
    known = load_catalogue().ids()
    ops: set[Op] = set()
    for index in range(300):
        program = generate(7, index, vnpu_control=True)
        assert program == generate(7, index, vnpu_control=True)
        scenario = parse_scenario(program, "fuzz", "fuzz", known)
        ops |= {step.op for step in scenario.steps}
    assert program != generate(8, index, vnpu_control=True)
    # the weights reach the deep states the issue names
    wanted = {Op.ALLOC, Op.BIND, Op.BUF_MAP, Op.BUF_UNMAP, Op.MAP_WRITE, Op.MAP_READ, Op.BUF_LOAD, Op.AWAIT_LOAD,
              Op.BUF_FREE, Op.BUF_SET_PRIORITY, Op.REQ_FREE, Op.VNPU, Op.AWAIT_PREEMPT, Op.PAR_BEGIN}
    assert wanted <= ops


def test_without_vnpu_control_no_program_needs_it():
    for index in range(200):
        program = generate(3, index, vnpu_control=False)
        assert "vnpu-control" not in program["requires"]
        assert all("vnpu" not in step for step in program["steps"])


def test_programs_keep_many_requests_and_buffers_alive():
    binds = [sum(1 for step in generate(5, i, vnpu_control=True)["steps"] if "bind" in step) for i in range(200)]
    assert max(binds) >= 5


def test_normalise_recounts_the_waits_after_an_edit():
    program = {
        "id": "x", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair", "load"],
        "steps": [
            {"req_create": {"req": "r"}},
            {"alloc": {"reqs": ["r", "r"]}},
            {"await_alloc": {"count": 5, "timeout_ms": 2000}},
            {"await_load": {"count": 1, "timeout_ms": 2000}},
        ],
    }
    out = normalise(program)
    assert out["steps"][2] == {"await_alloc": {"count": 2, "timeout_ms": 2000}}
    assert len(out["steps"]) == 3  # no load is owed: its wait goes
    assert out["requires"] == ["supported-pair"]
    assert step_count(out) == 3


@pytest.mark.parametrize(("text", "seconds", "programs"), [("60s", 60.0, None), ("2m", 120.0, None),
                                                            ("500", None, 500), ("1.5s", 1.5, None)])
def test_budget_is_a_time_or_a_count(text, seconds, programs):
    assert Budget.parse(text) == Budget(seconds=seconds, programs=programs)


@pytest.mark.parametrize("text", ["", "0", "-3", "1.5", "10h", "soon"])
def test_budget_rejects_other_text(text):
    with pytest.raises(UsageError):
        Budget.parse(text)


@pytest.mark.slow
def test_fuzzing_the_conformant_vnpu_finds_nothing(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--seed", "2026", "--budget", "1500", "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["divergences"] == [], summary["divergences"]
    assert summary["programs"] == 1500
    assert summary["verdicts"] == {"PASS": 1500}
    html = (out / "fuzz.html").read_text()
    assert "Content-Security-Policy" in html and "no divergence" in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")


# defect switch -> the clause its divergence names
DEFECTS = {
    "VNPU_DEFECT_KEEP_REPLACED_COOKIE": "cookie-replace-deletes-previous",
    "VNPU_DEFECT_PRIORITY_MAX_REFUSED": "priority-set",
    "VNPU_DEFECT_PARTIAL_UNMAP_REFUSED": "map-must-unmap",
}


def results(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "result"]


@pytest.mark.slow
@pytest.mark.parametrize("define", sorted(DEFECTS))
def test_a_single_defect_is_found_shrunk_and_replayed(tmp_path, probe_build, define):
    library = build_defective_vnpu(tmp_path, define)
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--impl", library, "--seed", "1", "--budget", "20s", "--out", out, "-q", timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    found = {d["signature"]: d for d in summary["divergences"]}
    clause = DEFECTS[define]
    assert clause in found, (define, list(found))
    divergence = found[clause]
    assert divergence["replays"] and divergence["steps_after"] <= MAX_SHRUNK_STEPS, divergence
    print(f"{define}: found after {divergence['found_after_s']} s, {divergence['steps_before']} -> "
          f"{divergence['steps_after']} steps")
    scenario_path = Path(divergence["scenario"])
    scenario = yaml.safe_load(scenario_path.read_text())
    assert scenario["clauses"] == [clause]
    assert step_count(scenario) == divergence["steps_after"]
    # the defect's scenario alone, replayed by `npuconf run` on the defective build and on the conformant one
    alone = tmp_path / "alone" / "fuzz"
    alone.mkdir(parents=True)
    (alone / scenario_path.name).write_text(scenario_path.read_text())
    replay = tmp_path / "replay"
    done = npuconf("run", "--target", "local", "--impl", library, "--scenarios", alone.parent,
                   "--out", replay, "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    by_id = {r["scenario"]: r for r in results(replay)}
    record = by_id[scenario["id"]]
    assert record["verdict"] == "FAIL" and record["divergence"]["clause"] == clause, record["reason"]
    control = tmp_path / "control"
    done = npuconf("run", "--target", "local", "--scenarios", alone.parent, "--out", control, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["verdict"] for r in results(control)] == ["PASS"]


def test_fuzz_report_groups_divergences_by_clause_and_escapes_text(tmp_path):
    from reports.fuzz import FuzzDivergence, FuzzSummary, write_fuzz_reports

    divergence = FuzzDivergence(
        signature="map-must-unmap", verdict="FAIL", clause="map-must-unmap", quote="<quoted> sentence",
        reason="observed <script>x</script>", program="fuzz.s1_10", found_after_s=1.0, found_after_programs=11,
        steps_before=43, steps_after=12, shrink_s=20.0, candidates=148, scenario="out/scenarios/fuzz/a.yaml",
        scenario_id="fuzz.map-must-unmap.s1_10", replays=True, shrunk_reason="trace line 30: map-must-unmap", count=3,
    )
    summary = FuzzSummary(seed=1, target="local", impl=None, budget="60s", programs=300,
                          fuzzing_s=9.7, elapsed_s=30.0, programs_per_s=30.9, verdicts={"PASS": 289, "FAIL": 11},
                          divergences=(divergence,), scenarios_dir="out/scenarios")
    paths = write_fuzz_reports(summary, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["divergences"][0]["signature"] == "map-must-unmap" and data["divergences"][0]["steps_after"] == 12
    html = paths["html"].read_text()
    assert "Content-Security-Policy" in html and "<script" not in html
    assert "&lt;quoted&gt; sentence" in html and "43 → 12" in html
    assert "npuconf run --scenarios out/scenarios" in html
