"""examples/skeleton: the OEM starting point compiles with the guide's command and gives a meaningful report."""

import json
import re
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

SKELETON = ROOT / "examples" / "skeleton" / "npu_refuse_all.c"
HEADER = ROOT / "ndk_probe" / "include" / "android" / "npumanager" / "buffer.h"


def declared_functions():
    """The functions buffer.h declares (outside comments): the 18 an implementation must export."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(encoding="utf-8"), flags=re.S)
    return sorted(set(re.findall(r"\b(ANpu\w+)\(", text)))


@pytest.fixture(scope="module")
def skeleton_library(tmp_path_factory):
    """Built with the command docs/guide.md gives (plus -fvisibility=hidden: only the API is exported)."""
    library = tmp_path_factory.mktemp("skeleton") / "libnpu_refuse_all.so"
    subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
         "-I", str(ROOT / "ndk_probe" / "include"), "-o", str(library), str(SKELETON)],
        check=True,
        capture_output=True,
    )
    return library


def test_skeleton_exports_exactly_the_18_functions(skeleton_library):
    nm = subprocess.run(["nm", "-D", "--defined-only", str(skeleton_library)], capture_output=True, text=True)
    exported = sorted(line.split()[-1] for line in nm.stdout.splitlines() if line.split()[-1].startswith("ANpu"))
    assert len(declared_functions()) == 18
    assert exported == declared_functions()


def test_skeleton_run_passes_what_applies_and_names_what_it_leaves_out(skeleton_corpus_run):
    done, run_dir = skeleton_corpus_run, skeleton_corpus_run.path  # the session's shared run (tests/conftest.py)
    # An implementation that refuses every allocation demonstrates no buffer clause: never "conformant".
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("incomplete: "), done.stdout
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    results = [r for r in map(json.loads, lines) if r["kind"] == "result"]
    verdicts = {r["verdict"] for r in results}
    others = {r["scenario"]: r["reason"] for r in results if r["verdict"] not in ("PASS", "NOT_APPLICABLE")}
    assert verdicts == {"PASS", "NOT_APPLICABLE"}, others
    passed = {c for r in results if r["verdict"] == "PASS" for c in r["clauses"]}
    # What a device without NPU memory must still get right: requests, cookies, the deaths the text promises.
    for clause in ("req-free-null-noop", "req-type-default-unknown", "req-device-negative-einval",
                   "cookie-replace-deletes-previous", "cookie-shared-refcounted", "alloc-unsupported-fails",
                   "crash-setonalloc-null", "crash-alloc-without-onalloc"):
        assert clause in passed, clause
    assert sum(r["verdict"] == "PASS" for r in results) >= 30
    # The report says what the run could not judge, and why.
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["claim"]["level"] == "incomplete"
    (gaps,) = summary["not_demonstrated"].values()
    assert "map-prot-subset" in gaps
    reasons = {entry["reason"] for gap in gaps.values() for entry in gap["scenarios"]}
    assert "the device supports no (device number, buffer type) pair" in reasons
    assert "NOT_APPLICABLE: the device supports no (device number, buffer type) pair" in gaps["map-prot-subset"]["why"]
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    # The console, summary.json and the report count the same clauses: the claim the ones it requires (the
    # device-testable ones: the skeleton has no vnpu control), the coverage section all of them, split into
    # those the claim requires of it and the rest (virtual-only here).
    claimed = sum(len(gap["clauses"]) for gap in summary["claim"]["not_demonstrated"])
    in_all = sum(len(v) for v in summary["not_demonstrated"].values())
    testable = set(json.loads(lines[0])["claim_basis"]["device_testable"])
    assert claimed == sum(clause in testable for clause in gaps) < in_all
    assert done.stdout.splitlines()[0].startswith(f"incomplete: {claimed} required clauses not demonstrated")
    assert summary["claim"]["headline"] == done.stdout.splitlines()[0]
    split = f"{claimed} required by the claim, {in_all - claimed} not required"
    heading = f"Clauses not demonstrated ({in_all}: {split})"
    assert f"<h2>{heading}</h2>" in html
    assert html.count("(not required by the claim)</span>") == in_all - claimed
