"""`npuconf report RUN --baseline OLD [--fail-on-new]`: per clause what newly fails and what was fixed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import npuconf

DEFECT = "req-type-unknown-einval"


def _without_defect(twin: Path, out: Path) -> Path:
    """The twin's run with every failure naming DEFECT turned into a PASS: a build without that one defect."""
    out.mkdir()
    lines = []
    for line in (twin / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "result" and (record.get("divergence") or {}).get("clause") == DEFECT:
            record.update(verdict="PASS", divergence=None, discrepancy=None, reason="every event is allowed")
        lines.append(json.dumps(record))
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _run(tmp_path: Path, twin: Path) -> tuple[Path, Path]:
    new = tmp_path / "new"
    shutil.copytree(twin, new)
    return new, _without_defect(twin, tmp_path / "old")


def test_baseline_lists_exactly_the_defect_clause_as_new_and_fails_only_on_it(twin, tmp_path):
    new, old = _run(tmp_path, twin)
    done = npuconf("report", new, "--baseline", old, "--fail-on-new")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line.strip() for line in done.stdout.splitlines() if line.startswith("  ")]
    assert lines == [f"new failure: {DEFECT} on local: PASS -> FAIL"], done.stdout
    assert "1 clause(s) newly failing, 0 fixed" in done.stdout


def test_fixed_clause_is_listed_and_does_not_fail_the_job(twin, tmp_path):
    new, old = _run(tmp_path, twin)
    done = npuconf("report", old, "--baseline", new, "--fail-on-new")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  fixed: {DEFECT} on local: FAIL -> PASS" in done.stdout
    same = npuconf("report", new, "--baseline", new, "--fail-on-new")
    assert same.returncode == 0 and "0 clause(s) newly failing, 0 fixed" in same.stdout


def test_fail_on_new_without_a_baseline_is_a_usage_error(twin):
    done = npuconf("report", twin, "--fail-on-new")
    assert done.returncode == 3 and "--fail-on-new needs --baseline" in done.stderr
