"""A clause counts only where a trace demonstrated it (docs/reports.md "The claim of a run"), and every output
gives the one answer `reports.answers.demonstration` decides.

On the published vnpu every clause the claim requires there is demonstrated by at least two scenarios; on a
run with FAIL, CRASH, WAIVED and WARN results, summary.json `not_demonstrated`, report.html's "Clauses not
demonstrated", the clause answers, the claim's gaps and the junit.xml properties name the same clauses.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from junitparser import JUnitXml

from host.suite.basis import kit_facts
from reports.answers.claim import claim_of, required_clauses
from reports.answers.clause_answers import clause_answers
from reports.recorded.results import load_results
from tests.conftest import npuconf


def _demonstrating(run_dir: Path) -> Counter[str]:
    shown: Counter[str] = Counter()
    for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "result" and record["verdict"] in ("PASS", "WARN"):
            shown.update(record.get("demonstrated", []))
    return shown


def test_every_required_clause_is_demonstrated_by_two_scenarios_on_the_published_vnpu(published_run):
    run = load_results(published_run.path)
    serial = run.device_serials[0]
    records = run.for_device(serial)
    required = required_clauses(run, records, [run.devices[serial]])
    # The vnpu runs the scenarios of the virtual-only clauses: they join what it must demonstrate.
    assert kit_facts().basis.virtual_only <= required
    shown = _demonstrating(published_run.path)
    thin = {clause: shown[clause] for clause in required if shown[clause] < 2}
    assert not thin, thin
    assert claim_of(run).level.value == "conformant", claim_of(run).headline


def _coverage_rows(html: str) -> set[tuple[str, str]]:
    section = html[html.index('<section id="coverage">') : html.index("</section>", html.index('id="coverage"'))]
    cells = re.findall(r'<td class="mono">([^<]*)</td>\s*<td class="mono">([a-z0-9-]+)', section)
    return {(device, clause) for device, clause in cells}


def test_every_output_names_the_same_clauses_not_demonstrated(aosp_twin_run, tmp_path: Path):
    """The twin's run has FAIL, CRASH and WARN; waiving one clause's failures adds WAIVED results."""
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        "waivers:\n  - clause: map-after-preempt-enoent\n    device: '*'\n    reason: known AOSP behaviour D1\n"
        "    expires: 2099-01-01\n",
        encoding="utf-8",
    )
    out = tmp_path / "waived"
    done = npuconf("rejudge", aosp_twin_run.path, "--waivers", waivers, "--out", out)
    assert done.returncode == 1, done.stdout + done.stderr
    run = load_results(out)
    verdicts = {str(r.verdict) for r in run.results}
    assert {"FAIL", "CRASH", "WAIVED", "WARN", "PASS"} <= verdicts, verdicts

    answers = clause_answers(run)
    from_answers = {(a.device, a.clause) for a in answers.not_demonstrated()}
    assert from_answers, "the twin hides clauses behind its failures"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    from_summary = {(device, clause) for device, row in summary["not_demonstrated"].items() for clause in row}
    from_report = _coverage_rows((out / "report.html").read_text(encoding="utf-8"))
    assert from_summary == from_answers == from_report
    for device, row in summary["not_demonstrated"].items():
        for clause, gap in row.items():
            assert gap["why"] == answers.get(clause, device).why  # type: ignore[union-attr]

    # junit.xml: each device's suite lists the clauses not demonstrated there.
    from_junit: set[tuple[str, str]] = set()
    for suite in JUnitXml.fromfile(str(out / "junit.xml")):
        props = {prop.name: prop.value for prop in suite.properties()}
        from_junit.update((suite.name, c) for c in (props["clauses.not_demonstrated"] or "").split(",") if c)
    assert from_junit == from_answers
