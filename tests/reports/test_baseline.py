"""`npuconf report RUN --baseline OLD [--fail-on-new]`: per clause what newly fails and what was fixed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import npuconf
from tests.vnpu_builds import build_defective_vnpu

DEFECT = "req-type-unknown-einval"


def _clause_lines(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.startswith(("  new failure:", "  fixed:"))]


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
    assert _clause_lines(done.stdout) == [f"new failure: {DEFECT} on local: PASS -> FAIL"], done.stdout
    assert "1 clause newly failing, 0 fixed" in done.stdout


def test_fixed_clause_is_listed_and_does_not_fail_the_job(twin, tmp_path):
    new, old = _run(tmp_path, twin)
    done = npuconf("report", old, "--baseline", new, "--fail-on-new")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  fixed: {DEFECT} on local: FAIL -> PASS" in done.stdout
    same = npuconf("report", new, "--baseline", new, "--fail-on-new")
    assert same.returncode == 0 and "0 clauses newly failing, 0 fixed" in same.stdout


def test_fail_on_new_without_a_baseline_is_a_usage_error(twin):
    done = npuconf("report", twin, "--fail-on-new")
    assert done.returncode == 3 and "--fail-on-new needs --baseline" in done.stderr


def test_baseline_between_the_vnpu_and_a_single_defect_build_names_only_its_clause(vnpu, tmp_path, probe_build):
    """The vnpu built with one deliberate defect (a range inside a longer mapping cannot be unmapped), run over
    the whole corpus: its failures all name unmap-returns, and that is the one clause the baseline lists."""
    library = build_defective_vnpu(tmp_path, "VNPU_DEFECT_PARTIAL_UNMAP_REFUSED")
    run_dir = tmp_path / "defect"
    done = npuconf("run", "--target", "local", "--impl", library, "--out", run_dir, "-q", "-j", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    done = npuconf("report", run_dir, "--baseline", vnpu, "--fail-on-new")
    assert done.returncode == 1, done.stdout + done.stderr
    device = f"local:{library.name}"  # an --impl run's device
    assert _clause_lines(done.stdout) == [f"new failure: unmap-returns on {device}: PASS -> FAIL"], done.stdout
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="baseline">') :]
    section = section[: section.index("</section>")]
    assert "unmap-returns" in section and section.count("<td>new failure</td>") == 1


def test_baseline_lists_what_changed_in_the_atlas(vnpu, twin, tmp_path):
    new = tmp_path / "twin"
    shutil.copytree(twin, new)
    done = npuconf("report", new, "--baseline", vnpu)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  atlas on local: callback-thread: onLoad with an error: one device thread -> " in done.stdout
    errno = [line for line in done.stdout.splitlines() if line.startswith("  atlas on local: errno: ")]
    assert errno and all(" -> " in line for line in errno)
    assert "more errno changes (report.html lists them all)" in done.stdout
    page = (new / "report.html").read_text(encoding="utf-8")
    atlas = page[page.index('<details id="baseline-atlas"') :]
    assert "ANpuBuffer_map() at preemption.map_fails_repeatedly step 14</td><td>ENOENT</td><td>ENOMEM</td>" in atlas


def _edited(twin: Path, out: Path, edit) -> Path:
    """A copy of the twin's run with `edit(records)` applied to its records."""
    out.mkdir()
    records = [json.loads(line) for line in (twin / "results.jsonl").read_text().splitlines()]
    edit(records)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


def test_a_baseline_matching_no_device_is_an_error_not_a_pass(twin, tmp_path):
    """Issue 39: a run with 138 FAIL passed `--fail-on-new` against a baseline of other devices."""

    def two_other_devices(records):
        plan = records[0]
        plan["devices"] = ["phone-a", "phone-b"]
        copies = []
        for record in records[1:]:
            if record["kind"] in ("device", "result"):
                record["device"] = "phone-a"
                copies.append(dict(record, device="phone-b"))
        records.extend(copies)

    old = _edited(twin, tmp_path / "old", two_other_devices)
    new = tmp_path / "new"
    shutil.copytree(twin, new)
    done = npuconf("report", new, "--baseline", old, "--fail-on-new")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no device of" in done.stderr and "is one of the baseline's" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_new_error_timeout_and_not_demonstrated_results_are_new(twin, tmp_path):
    """Issue 39: `--fail-on-new` exited 0 when results turned ERROR, TIMEOUT or stopped demonstrating."""
    records = [json.loads(line) for line in (twin / "results.jsonl").read_text().splitlines()]
    passing = [r for r in records if r["kind"] == "result" and r["verdict"] == "PASS"]
    error, timeout, hidden = passing[0]["scenario"], passing[1]["scenario"], passing[2]
    clauses = set(hidden["clauses"])

    def worse(records):
        for record in records:
            if record["kind"] != "result":
                continue
            if record["scenario"] in (error, timeout):
                record["verdict"] = "ERROR" if record["scenario"] == error else "TIMEOUT"
                record["reason"] = "the device stopped answering"
                record.pop("demonstrated", None)
            elif record["verdict"] == "PASS" and clauses & set(record["clauses"]):
                record["verdict"], record["reason"] = "NOT_APPLICABLE", "not applicable now"
                record.pop("demonstrated", None)
            if record.get("demonstrated"):  # a PASS or WARN answers what its trace demonstrated, too
                record["demonstrated"] = [c for c in record["demonstrated"] if c not in clauses]

    new = _edited(twin, tmp_path / "new", worse)
    done = npuconf("report", new, "--baseline", twin, "--fail-on-new")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"  newly not judged: {error} on local: PASS -> ERROR" in done.stdout
    assert f"  newly not judged: {timeout} on local: PASS -> TIMEOUT" in done.stdout
    assert "  newly not demonstrated: " in done.stdout
    assert "0 clauses newly failing" in done.stdout
