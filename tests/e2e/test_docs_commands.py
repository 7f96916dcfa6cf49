"""The README's and the guide's command lines, taken from their sh blocks and run as printed from a
fresh copy of the checkout: relative paths (`./libX.so`, `--out rel/dir`) must work as a user types them."""

import json
import shutil
import subprocess

import pytest

from tests.conftest import ROOT
from tests.e2e.scratch import doc_command, scratch_checkout

pytestmark = pytest.mark.slow

README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide.md"
SKELETON_LIBRARY = "libnpu_refuse_all.so"
# The name the docs give "your port"; here it is the skeleton, built by the guide's own command.
PORT_LIBRARY = "libmyimpl.so"
SMALL = "free.empty_list"  # two scenarios: one applies to the skeleton, one does not


def run(argv, cwd, timeout=240):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, probe_build):
    """A scratch copy of the checkout with the skeleton built there by the guide's cc line."""
    scratch = scratch_checkout(tmp_path_factory.mktemp("clone"))
    cc = doc_command(GUIDE, "cc")
    assert cc[cc.index("-o") + 1] == SKELETON_LIBRARY, cc
    built = run(cc, scratch)
    assert built.returncode == 0, built.stderr
    shutil.copy2(scratch / SKELETON_LIBRARY, scratch / PORT_LIBRARY)
    return scratch


def test_guide_runs_the_skeleton_by_its_relative_path(checkout):
    argv = doc_command(GUIDE, ".venv/bin/npuconf", "run", "--target", "local", "--impl", f"./{SKELETON_LIBRARY}")
    done = run(argv, checkout)  # the whole corpus, exactly as printed (about 2 s)
    # The guide's promise: `incomplete` (exit 2), what does not apply NOT_APPLICABLE with its reason.
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("incomplete: "), done.stdout
    results_line = next(line for line in done.stdout.splitlines() if line.startswith("results: "))
    results = (checkout / results_line.removeprefix("results: ")).read_text(encoding="utf-8").splitlines()
    records = [r for r in map(json.loads, results) if r["kind"] == "result"]
    assert {r["verdict"] for r in records} == {"PASS", "NOT_APPLICABLE"}
    reasons = {r["reason"] for r in records if r["verdict"] == "NOT_APPLICABLE"}
    assert "the device supports no (device number, buffer type) pair" in reasons, reasons


def test_readme_pytest_line_loads_the_library_by_its_relative_path(checkout):
    argv = doc_command(README, ".venv/bin/pytest", "conformance/", "--npu-impl", f"./{PORT_LIBRARY}")
    done = run([*argv, "-k", SMALL, "-p", "no:cacheprovider"], checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout, done.stdout


def test_guide_fuzz_line_runs_against_the_relative_library(checkout):
    argv = doc_command(GUIDE, ".venv/bin/npuconf", "fuzz", "--impl", f"./{PORT_LIBRARY}")
    done = run([*argv, "--budget", "20", "--out", "fuzz-out", "-q"], checkout)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report = json.loads((checkout / "fuzz-out" / "fuzz.json").read_text(encoding="utf-8"))
    assert str(checkout / PORT_LIBRARY) in json.dumps(report), "fuzz.json does not name the library it ran"
    assert (checkout / "fuzz-out" / "fuzz.html").is_file()


def test_readme_local_run_writes_where_a_relative_out_says(checkout, tmp_path):
    argv = doc_command(README, ".venv/bin/npuconf", "run", "--target", "local")
    assert argv == [".venv/bin/npuconf", "run", "--target", "local"], argv
    done = run([*argv, "-k", SMALL, "--out", "reports/first", "-q"], checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    out = checkout / "reports" / "first"
    for name in ("results.jsonl", "junit.xml", "report.html", "summary.json", "atlas.json"):
        assert (out / name).is_file(), name
        assert f": {out / name}" in done.stdout, done.stdout  # shown back as the absolute path


def test_guide_errata_lines_write_the_draft_where_they_say(checkout):
    """The guide's two `npuconf errata` lines, with its placeholders named: the draft lands in the run's
    directory, and for two runs where --out says."""
    for out in ("out/lab1-run", "out/lab2-run"):
        made = run([".venv/bin/npuconf", "run", "--target", "local", "-k", SMALL, "--out", out, "-q"], checkout)
        assert made.returncode == 0, made.stdout + made.stderr
    one = [w.replace("out/<run-id>", "out/lab1-run") for w in doc_command(GUIDE, ".venv/bin/npuconf", "errata",
                                                                         "out/<run-id>")]
    done = run(one, checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (checkout / "out" / "lab1-run" / "errata.html").is_file()
    assert (checkout / "out" / "lab1-run" / "errata.md").is_file()
    both = doc_command(GUIDE, ".venv/bin/npuconf", "errata", "out/lab1-run", "out/lab2-run")
    done = run(both, checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "## Reading R1" in (checkout / "out" / "feedback" / "errata.md").read_text(encoding="utf-8")
