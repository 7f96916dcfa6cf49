"""The whole data flow on the local target: scenario → probe → trace → judge → results → reports."""

import json
import stat
import sys

import pytest
from junitparser import JUnitXml

from host.run import GRID, caps_from_info
from host.suite import load_catalogue, load_corpus
from reference_model.judge import judge
from reference_model.vocabulary import PROBE_LIST_LINES
from tests.chromium import chromium, console_lines, needs_chromium
from tests.conftest import npuconf
from tests.vnpu_builds import build_defective_vnpu

pytestmark = pytest.mark.slow


def records(run_dir, kind):
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.fixture(scope="module")
def corpus_run(shared_runs, probe_build):
    """The whole corpus once on the local target (vnpu, published personality): the session's shared run
    (tests/conftest.py), only read here."""
    run = shared_runs.run("--target", "local")
    return run.path, run


def test_whole_corpus_passes_on_vnpu(corpus_run):
    run_dir, done = corpus_run
    assert done.returncode == 0, done.stdout + done.stderr
    corpus = load_corpus(known_clauses=load_catalogue().ids())
    results = records(run_dir, "result")
    assert sorted(r["scenario"] for r in results) == sorted(s.id for s in corpus)
    # scenarios of the other allocation policies do not apply to the default (budget) device
    other_policy = {s.id for s in corpus if any(n.startswith("policy-") and n != "policy-budget" for n in s.requires)}
    assert other_policy
    expected = {s.id: "NOT_APPLICABLE" if s.id in other_policy else "PASS" for s in corpus}
    not_passing = [(r["scenario"], r["verdict"], r["reason"]) for r in results
                   if r["verdict"] != expected[r["scenario"]]]
    assert not_passing == []
    assert records(run_dir, "plan")[0]["devices"] == ["local"]
    device = records(run_dir, "device")[0]["info"]
    assert device["supported_pairs"] and device["vnpu_control"] is True

    xml = JUnitXml.fromfile(str(run_dir / "junit.xml"))
    suites = list(xml) if not hasattr(xml, "name") or xml._tag == "testsuites" else [xml]
    assert [s.name for s in suites] == ["local"]
    cases = list(suites[0])
    assert len(cases) == len(corpus)
    assert {c.name for c in cases} == {s.id for s in corpus}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["answer"] == "conformant"
    assert (run_dir / "report.html").stat().st_size > 1000


def test_every_scenario_runs_under_the_model_alone_without_a_model_crash(corpus_run):
    """Rejudge every stored trace with no device, under both profiles and cut short at several points:
    the judge may answer anything but must never hit a model bug."""
    run_dir, _ = corpus_run
    catalogue = load_catalogue()
    scenarios = {s.id: s for s in load_corpus(known_clauses=catalogue.ids())}
    records_by_device = {r["device"]: r["info"] for r in records(run_dir, "device")}
    judged = 0
    for record in records(run_dir, "result"):
        caps = caps_from_info(records_by_device[record["device"]])
        lines = record["trace"]
        variants = [lines, lines[: len(lines) // 2], lines[:-1], lines[:1]]
        for variant in variants:
            for profile in ("published-37", "aosp-2026"):
                verdict = judge(scenarios[record["scenario"]], variant, caps, catalogue.quotes(), profile)
                assert "model bug" not in verdict.reason, (record["scenario"], profile, verdict.reason)
                judged += 1
    assert judged >= 8 * len(scenarios)


@needs_chromium
def test_real_run_report_opens_in_chromium_without_console_errors(tmp_path, probe_build):
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--out", run_dir, "-q", "-k", "cookies or mapping")
    assert done.returncode == 0, done.stdout + done.stderr
    dom, err = chromium(tmp_path, "--dump-dom", (run_dir / "report.html").as_uri())
    assert console_lines(err) == []
    assert 'data-ready="1"' in dom
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", (run_dir / "report.html").as_uri())
    assert shot.stat().st_size > 30_000


def test_non_conformant_library_fails_with_clause_quote_and_observation(tmp_path, probe_build):
    library = build_defective_vnpu(tmp_path, "VNPU_DEFECT_KEEP_REPLACED_COOKIE")
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--impl", library, "-k", "cookie", "--out", run_dir, "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    failures = [r for r in records(run_dir, "result") if r["verdict"] == "FAIL"]
    assert failures, "the defective library must fail at least one cookie scenario"
    catalogue = load_catalogue()
    for failure in failures:
        divergence = failure["divergence"]
        clause = catalogue.get(divergence["clause"])
        assert clause is not None
        assert divergence["quote"] == clause.quote
        assert divergence["observed"] and divergence["allowed"] is not None
    assert any("deleter" in f["divergence"]["message"] or "deleter" in f["divergence"]["observed"] for f in failures)
    assert "non-conformant" in done.stdout


FAKE_PROBE = """\
#!{python}
# A stand-in probe for the kit's own tests: prints a chosen op table and a chosen trace.
import json, sys
LIST = {list_lines!r}
if "--list" in sys.argv:
    print("\\n".join(LIST))
    sys.exit(0)
program = sys.stdin.read().splitlines()
ids = [line.split()[1] for line in program if line.startswith("scenario ")]
for sid in ids:
    if sid == "npuconf.discovery":
        print(json.dumps({{"ev": "begin", "scenario": sid, "pid": 1, "t": 1}}))
        print(json.dumps({{"ev": "ret", "step": 80, "op": "is_supported", "ret": 0, "errno": None,
                          "results": [True] + [False] * {grid_size}}}))
        # the control probe's answer, as the real probe writes it on a device without vnpu control
        print(json.dumps({{"ev": "ret", "step": 81, "op": "vnpu", "ret": -1, "errno": "ENOSYS"}}))
        print(json.dumps({{"ev": "exit", "scenario": sid, "status": "ok", "code": 0, "signal": None, "t": 2}}))
        continue
    print(json.dumps({{"ev": "begin", "scenario": sid, "pid": 1, "t": 1}}))
    print('{{"ev":"call","step":0,"op":"req_cre')
    print(json.dumps({{"ev": "exit", "scenario": sid, "status": "ok", "code": 0, "signal": None, "t": 2}}))
    sys.stdout.flush()
"""


def fake_build(tmp_path, list_lines):
    build = tmp_path / "fake-build"
    build.mkdir()
    probe = build / "npuconf-probe"
    text = FAKE_PROBE.format(python=sys.executable, list_lines=list(list_lines), grid_size=len(GRID) - 1)
    probe.write_text(text)
    probe.chmod(probe.stat().st_mode | stat.S_IXUSR)
    (build / "libvnpu.so").write_bytes(b"")
    return build


def test_truncated_trace_is_error_with_line_number(tmp_path):
    build = fake_build(tmp_path, PROBE_LIST_LINES)
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--build-dir", build, "-k", "cookie", "--out", run_dir, "-q")
    assert done.returncode == 2, done.stdout + done.stderr
    # Scenarios needing the vnpu control are NOT_APPLICABLE (the stand-in probe has none); every one that ran is ERROR.
    results = [r for r in records(run_dir, "result") if r["verdict"] != "NOT_APPLICABLE"]
    assert results and all(r["verdict"] == "ERROR" for r in results)
    assert all("line 2" in r["reason"] for r in results), [r["reason"] for r in results]
    assert "Traceback" not in done.stderr


def test_stale_probe_is_error_that_says_rebuild(tmp_path):
    stale = [PROBE_LIST_LINES[0].replace(PROBE_LIST_LINES[0].split()[-1], "0000000000000000"), *PROBE_LIST_LINES[1:]]
    build = fake_build(tmp_path, stale)
    run_dir = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--build-dir", build, "-k", "cookie", "--out", run_dir, "-q")
    assert done.returncode == 2
    results = records(run_dir, "result")
    assert results and all(r["verdict"] == "ERROR" for r in results)
    assert all("npuconf probe build" in r["reason"] for r in results)


def test_every_device_testable_clause_is_pass_on_the_conformant_vnpu(corpus_run):
    from reference_model.verdicts import Verdict
    from reports.answers.clause_answers import clause_answers
    from reports.recorded.results import load_results

    run_dir, _ = corpus_run
    run = load_results(run_dir / "results.jsonl")
    answers = clause_answers(run)
    not_pass = {c: answers.worst(c) for c in run.kit.basis.device_testable if answers.worst(c) is not Verdict.PASS}
    assert not not_pass
