"""Every replay line a run records (summary.json, report.html, the spec page) runs, pasted as printed into bash
from another directory with the kit's venv not on PATH,
exactly the one scenario it names and gives its verdict again, for a run with non-default options and
relative paths, over a scenario directory where one id is part of others."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, npuconf, paste

pytestmark = pytest.mark.slow

NPUCONF = Path(sys.executable).with_name("npuconf")
# Verdicts under --personality aosp-2026 --policy arena: FAILs, a CRASH and PASSes. `alloc_r` is part of
# `alloc_rw` (waived) and `alloc_rwx` (PASS), `free.empty_list` of `free.empty_list_after_buffers`.
PICKED = {
    "allocation.batch_all_invalid": "FAIL",
    "free.empty_list": "PASS",
    "free.empty_list_after_buffers": "PASS",
    "loading.async_fd_minus_one": "CRASH",
    "mapping.prot_matrix_alloc_r": "FAIL",
    "mapping.prot_matrix_alloc_rw": "WAIVED",
    "mapping.prot_matrix_alloc_rwx": "PASS",
}
WAIVED = "mapping.prot_matrix_alloc_rw"
OPTIONS = ["--target", "local", "--personality", "aosp-2026", "--policy", "arena", "--capacity", "134217728",
           "--timeout-multiplier", "2", "--waivers", "./w.yaml", "--scenarios", "./sc"]


def _copy_scenarios(destination: Path) -> None:
    """The PICKED scenarios of the corpus, one file per chapter under ``destination``."""
    by_chapter: dict[str, list[object]] = {}
    for path in sorted((ROOT / "conformance" / "scenarios").glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        items = data["scenarios"] if isinstance(data, dict) and "scenarios" in data else [data]
        by_chapter.setdefault(path.parent.name, []).extend(i for i in items if i.get("id") in PICKED)
    copied = 0
    for chapter, items in by_chapter.items():
        if items:
            (destination / chapter).mkdir(parents=True)
            (destination / chapter / "picked.yaml").write_text(yaml.safe_dump({"scenarios": items}), encoding="utf-8")
            copied += len(items)
    assert copied == len(PICKED)


def _run(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``argv`` run in ``cwd`` with no --out, and the run directory the kit made (out/<run-id>/)."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    run_dirs = list((cwd / "out").glob("*/results.jsonl"))
    assert len(run_dirs) == 1, done.stdout + done.stderr
    return done, run_dirs[0].parent


def _pasted(line: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``line`` pasted as printed into bash in ``cwd`` (the venv not on PATH), and the run directory it made."""
    done = paste(line, cwd, timeout=120)
    run_dirs = list((cwd / "out").glob("*/results.jsonl"))
    assert len(run_dirs) == 1, done.stdout + done.stderr
    return done, run_dirs[0].parent


def _verdicts(run_dir: Path) -> dict[str, str]:
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    results = [r for r in records if r["kind"] == "result"]
    verdicts = {r["scenario"]: r["verdict"] for r in results}
    assert len(verdicts) == len(results), "a scenario recorded twice"
    return verdicts


class _ReplayCells(HTMLParser):
    """The text of the cell after each `replay` cell of a table row (report.html's failure details)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._cells: list[str] | None = None
        self._row: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cells = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cells is not None:
            self._row.append("".join(self._cells).strip())
            self._cells = None
        elif tag == "tr" and len(self._row) >= 2 and self._row[0] == "replay":
            self.lines.append(self._row[1])

    def handle_data(self, data: str) -> None:
        if self._cells is not None:
            self._cells.append(data)


def _html_replay_lines(report: Path) -> list[str]:
    parser = _ReplayCells()
    parser.feed(report.read_text(encoding="utf-8"))
    return parser.lines


def test_every_replay_line_runs_its_one_scenario_with_its_verdict(tmp_path, probe_build):
    scratch = tmp_path / "scratch"
    # ./sc is a symlink: the plan and the replay lines keep it as written (docs/architecture.md, "Paths and installs").
    _copy_scenarios(scratch / "picked")
    (scratch / "sc").symlink_to("picked")
    (scratch / "w.yaml").write_text(yaml.safe_dump({"waivers": [
        {"scenario": WAIVED, "device": "*", "reason": "known", "expires": "2099-12-31"}]}), encoding="utf-8")
    done, run_dir = _run([str(NPUCONF), "run", *OPTIONS], scratch)
    assert done.returncode == 1, done.stdout + done.stderr
    original = _verdicts(run_dir)
    assert original == PICKED, original

    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    from_summary = [f["replay"] for f in summary["failures"]]
    from_html = _html_replay_lines(run_dir / "report.html")
    assert sorted(from_summary) == sorted(from_html)
    assert len(from_summary) == sum(v in ("FAIL", "CRASH") for v in PICKED.values())
    console = [line for line in done.stdout.splitlines() if "npuconf run " in line]
    assert set(console) <= set(from_summary), console
    # The spec page shows the same lines under each failing sentence.
    spec = tmp_path / "spec.html"
    assert npuconf("spec", run_dir, "--out", spec).returncode == 0
    from_spec = {html.unescape(m) for m in re.findall(r'<code class="replay">(.*?)</code>', spec.read_text())}
    assert set(from_summary) <= from_spec, set(from_summary) - from_spec  # the spec page also shows the WAIVED
    assert all(shlex.split(line)[:2] == [str(NPUCONF), "run"] for line in from_spec), from_spec

    scenario_of = {f["replay"]: f["scenario"] for f in summary["failures"]}
    for k, line in enumerate(sorted(scenario_of)):
        words = shlex.split(line)
        assert words[:2] == [str(NPUCONF), "run"], line
        assert f"--scenarios {scratch / 'sc'}" in line and f"--waivers {scratch / 'w.yaml'}" in line, line
        elsewhere = tmp_path / f"replay{k}"
        elsewhere.mkdir()
        again, replay_dir = _pasted(line, elsewhere)
        replayed = _verdicts(replay_dir)
        assert len(replayed) == 1, f"{line}: ran {sorted(replayed)}"
        [(scenario, verdict)] = replayed.items()
        assert scenario == scenario_of[line], line
        assert verdict == original[scenario], f"{line}: {verdict}, the run gave {original[scenario]}"
        assert again.returncode == 1, again.stdout + again.stderr
