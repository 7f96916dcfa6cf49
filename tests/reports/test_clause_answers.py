"""The answer of each clause (reports.answers.clause_answers) on the aosp-2026 twin: FAIL/CRASH only where a
failure names the clause, and the matrix, summary.json, junit.xml and the store all show that answer."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import host.suite  # noqa: F401  (provides the kit's facts)
from reference_model.readings import READING_CLAUSES, READINGS
from reference_model.verdicts import Verdict
from reports.answers.clause_answers import clause_answers, named_clauses, readings_of_reason
from reports.recorded.results import load_results
from tests.conftest import npuconf  # the twin run: tests/reports/conftest.py

# The twin's notice of a preemption by memory pressure races this scenario's map (D24): whichever comes first
# decides whether it passes or which of these clauses its failure names (docs/vnpu.md, D24).
RACING = "preemption.pressure_victim_announced_by_map_left_to_teardown"
RACING_CLAUSES = {"map-preempt-window-enoent", "map-after-preempt-enoent", "preempt-never-while-mapped"}


def _named(run_dir: Path, *verdicts: str, skip: str = "") -> set[str]:
    """The clauses the failures name: a divergence's clause, else (a crash) the clauses the kit's corpus cites."""
    run = load_results(run_dir / "results.jsonl")
    out: set[str] = set()
    for r in run.results:
        if str(r.verdict) in verdicts and r.scenario != skip:
            out |= {r.divergence.clause} if r.divergence else set(run.kit.clauses_of(r.scenario))
    return out


def _with_verdict(answers, *verdicts):
    """The clauses whose answer is one of `verdicts` on some device."""
    return {c for c, row in answers.by_clause.items() if any(a.verdict in verdicts for a in row.values())}


def test_failing_clauses_are_exactly_those_the_failures_name(twin):
    run = load_results(twin / "results.jsonl")
    answers = clause_answers(run)
    fails = _named(twin, "FAIL")
    assert _with_verdict(answers, Verdict.FAIL) == fails
    assert fails - _named(twin, "FAIL", skip=RACING) <= RACING_CLAUSES
    fails = _named(twin, "FAIL", skip=RACING)
    # D3 and D12 are WARN readings (R4, R10), no longer FAILs; map-preempt-window-enoent fails since the twin
    # maps a buffer whose preemption notice has not arrived (D24, docs/vnpu.md §5.1 F9); req-file-fd-default
    # no longer fails: a request fd neither valid nor -1 taken as "no file" (D11) is WARN R22;
    # req-prot-default-read: a read-write map of a buffer that kept the default protection succeeds (D13);
    # req-device-default-negative and req-type-default-unknown: a request left at its default device or type
    # names the default's sentence, not req-device-negative-einval or req-type-unknown-einval (D2);
    # load-onload-invoked: a buffer freed while its load is in flight gets no onLoad (D22), named where no
    # cookie's deleter shows the missing callback first
    assert len(fails) == 14
    assert "load-onload-invoked" in fails
    assert {"req-device-default-negative", "req-type-default-unknown"} <= fails
    assert "req-prot-default-read" in fails
    assert _with_verdict(answers, Verdict.FAIL, Verdict.CRASH) == _named(twin, "FAIL", "CRASH")
    assert len(_named(twin, "FAIL", "CRASH", skip=RACING)) == 16  # a crash names the clause of the step that died
    # cookie-clear is cited by a scenario that failed on req-device-negative-einval: not a failure of it
    assert answers.worst("cookie-clear") is Verdict.PASS


def test_summary_clauses_use_the_answer(twin):
    summary = json.loads((twin / "summary.json").read_text())
    failing = {c for c, v in summary["clauses"].items() if v in ("FAIL", "CRASH")}
    assert failing == _named(twin, "FAIL", "CRASH")


def test_matrix_marks_only_named_clauses(twin):
    page = (twin / "report.html").read_text()
    rows = re.findall(r'<th class="clause mono">([a-z0-9-]+)</th>(.*?)</tr>', page, re.S)
    assert rows, "no matrix rows found"
    failing = {clause for clause, cells in rows if "v-FAIL" in cells or "v-CRASH" in cells}
    assert failing == _named(twin, "FAIL", "CRASH")


def test_junit_names_the_failing_clauses(twin):
    root = ET.parse(twin / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    failing = set(filter(None, (props["clauses.fail"] or "").split(","))) | set(
        filter(None, (props["clauses.crash"] or "").split(","))
    )
    assert failing == _named(twin, "FAIL", "CRASH")
    case = next(c for c in root.iter("testcase") if c.get("name") == "allocation.batch_all_invalid")
    answers = next(p.get("value") for p in case.iter("property") if p.get("name") == "answers")
    assert answers == "req-type-unknown-einval"


def test_store_records_the_answering_clauses(twin, tmp_path):
    store = tmp_path / "store.sqlite"
    done = npuconf("store", "import", twin, "--store", store)
    assert done.returncode == 0, done.stdout + done.stderr
    with sqlite3.connect(store) as conn:
        rows = conn.execute(
            "SELECT c.clause FROM verdict_clauses c JOIN verdicts v USING (run_id, serial, scenario) "
            "WHERE v.verdict IN ('FAIL', 'CRASH')"
        ).fetchall()
    assert {r[0] for r in rows} == _named(twin, "FAIL", "CRASH")


def test_a_clause_cited_only_by_failing_scenarios_says_why(twin):
    answers = clause_answers(load_results(twin / "results.jsonl"))
    silent = [a for row in answers.by_clause.values() for a in row.values() if a.verdict is None]
    assert silent and all(a.why for a in silent)
    assert any("hidden by a FAIL on " in a.why for a in silent)


def _catalogue() -> set[str]:
    return {c["id"] for c in __import__("yaml").safe_load(Path("conformance/clauses.yaml").read_text())["clauses"]}


def test_warn_names_the_clauses_of_its_readings():
    reason = "allowed by the text, but departs from the kit's reading(s) R1 (onAlloc ...), R14 (allocAsync ...)"
    assert readings_of_reason(reason) == ("R1", "R14")
    assert {c for cs in READING_CLAUSES.values() for c in cs} <= _catalogue()


def test_every_reading_that_warns_answers_a_catalogued_clause():
    """A WARN of R8, R17-R20 used to mark no clause WARN: each reading declares the clauses it reads."""
    catalogue = _catalogue()
    for rid in READINGS:
        assert READING_CLAUSES.get(rid), f"{rid} names no clause"
        assert set(READING_CLAUSES[rid]) <= catalogue, f"{rid} names a clause the catalogue lacks"


class _Warn:
    scenario = "priority.set_refused_eperm"
    verdict = Verdict.WARN
    divergence = None
    reason = "allowed by the text, but departs from the kit's reading(s) R19 (setPriority with a valid priority ...)"


def test_a_warn_of_r19_answers_its_clause():
    assert readings_of_reason(_Warn.reason) == ("R19",)
    assert named_clauses(_Warn(), ("priority-set", "priority-set-returns")) == ("priority-set-returns",)


def _waived(twin: Path, tmp_path: Path, clause: str) -> tuple[Path, list[dict]]:
    waivers = tmp_path / f"{clause}.yaml"
    waivers.write_text(f"waivers:\n  - clause: {clause}\n    device: '*'\n    reason: b/1\n    expires: 2099-12-31\n")
    out = tmp_path / f"rejudged-{clause}"
    done = npuconf("rejudge", twin, "--waivers", waivers, "--out", out)
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return waivers, [r for r in lines if r["kind"] == "result"]


def test_a_clause_waiver_never_waives_a_failure_of_another_clause(twin, tmp_path):
    _, results = _waived(twin, tmp_path, "req-size-bytes")
    einval = [r for r in results if r["divergence"] and r["divergence"]["clause"] == "req-type-unknown-einval"]
    assert einval and all(r["verdict"] == "FAIL" for r in einval)
    assert not [r for r in results if r["verdict"] == "WAIVED"]  # no failure of the twin names req-size-bytes


def test_a_clause_waiver_waives_every_failure_naming_it_and_verify_agrees(twin, tmp_path):
    from host.offline import make_bundle, verify_bundle

    waivers, results = _waived(twin, tmp_path, "req-type-unknown-einval")
    waived = [r for r in results if r["verdict"] == "WAIVED"]
    # every FAIL naming req-type-unknown-einval, requests.type_later_unknown_fails among them; a request left at
    # its default type names req-type-default-unknown instead (requests.default_type_is_rejected_with_einval,
    # allocation.batch_mixing_valid_and_invalid, cookies.raw_64bit_on_failed_request), and
    # requests.default_device_and_type_each_alone its default device's req-device-default-negative
    assert len(waived) == 17
    assert "requests.type_later_unknown_fails" in {r["scenario"] for r in waived}
    assert all(r["divergence"]["clause"] == "req-type-unknown-einval" for r in waived)
    assert not [r for r in results if r["verdict"] == "FAIL" and r["divergence"]["clause"] == "req-type-unknown-einval"]
    bundle = make_bundle(tmp_path / "rejudged-req-type-unknown-einval", tmp_path / "b.tar.gz")
    report = verify_bundle(bundle.path, waivers_file=waivers)
    assert not [p for p in report.problems if p.kind == "verdict"], report.problems
