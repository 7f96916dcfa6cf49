"""Every branch of the one verdict decision (host/run/decision.py), through the four paths that decide
verdicts: `npuconf run` (execute_run), the pytest layer (PreparedDevice.run), `rejudge` and `verify`.
All four agree, branch by branch, including a judge-made ERROR after the model changes.

The devices are real local targets (the real probe over the virtual NPU, or over a real library that
refuses allocations). Where a branch needs what a healthy local device never does (a probe process that
dies mid-scenario, a host timeout, a missing API function, a broken discovery, a malformed trace line), the
target's own output is altered at the seam where a real device's would arrive (`run_batch`).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from host.offline.bundle import make_bundle
from host.offline.rejudge import rejudge
from host.offline.verify import verify_bundle
from host.probe import DEFAULT_BUILD_DIR, BatchOutcome, ScenarioTrace, host_exit_line
from host.run import DISCOVERY_ID, PreparedDevice, RunPlan
from host.run.prepared_device import prepare_device
from host.run.runner import execute_run
from host.suite import claim_basis, load_catalogue, load_corpus
from host.targets import VnpuProfile
from host.targets.local import LocalTarget
from reference_model.judge import Judgement
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver
from reports.recorded.plan_options import PlanOptions
from reports.recorded.results import load_results
from tests.conftest import ROOT

CATALOGUE = load_catalogue()
CORPUS = {s.id: s for s in load_corpus(known_clauses=CATALOGUE.ids())}
QUOTES = dict(CATALOGUE.quotes())

PASS = "requests.create_then_free"
FAIL = "requests.default_device_is_rejected_with_einval"  # D2 under the aosp-2026 personality
WAIVED = "requests.default_type_is_rejected_with_einval"
NOT_APPLICABLE = "allocation.policy_acl_pools_and_rounding"  # needs the acl policy: the device runs budget
NEEDS_NO_PAIRS = "cookies.cleared_cookie_gives_null_in_callback"  # runs even when discovery failed
CRASHED = "cookies.free_request_runs_deleter"
MALFORMED = "cookies.deleter_runs_without_allocation"
PROBE_DIED = "cookies.default_null_on_failed_request"
HOST_TIMEOUT = "cookies.clear_on_request_without_cookie"
NEVER_REACHED = "allocation.empty_batch"
NO_EXIT = "requests.default_size_is_zero"  # cut before its exit with no host marker: the trace never ends
WARNED = "priority.request_1001"  # the aosp-2026 twin departs from reading R4 here: WARN
REFUSED = "allocation.single_supported_request_succeeds"

TORN_LINE = '{"ev": "ret", "step": 0, "op": "req_create", "ret": '  # a line cut short: the judge's ERROR

# What the main device's output becomes, per scenario: the branch each one drives.
Alter = Callable[[ScenarioTrace], ScenarioTrace | None]


def _cut(trace: ScenarioTrace, keep: int = 4) -> tuple[str, ...]:
    return trace.lines[:keep]


ALTERED: dict[str, Alter] = {
    CRASHED: lambda t: replace(
        t,
        lines=(
            *_cut(t),
            json.dumps({"ev": "exit", "scenario": t.scenario_id, "status": "signal", "code": None,
                        "signal": "SIGSEGV", "t": 1}),
        ),
    ),
    MALFORMED: lambda t: replace(t, lines=(*_cut(t, 2), TORN_LINE, *t.lines[2:])),
    PROBE_DIED: lambda t: replace(t, lines=_cut(t), infra_error="probe process ended unexpectedly (exit status -9)"),
    HOST_TIMEOUT: lambda t: replace(
        t,
        lines=(*_cut(t), host_exit_line(t.scenario_id, "timeout", "no result from the device within 9.0 s")),
        timed_out="no result from the device within 9.0 s",
    ),
    NEVER_REACHED: lambda t: None,
    NO_EXIT: lambda t: replace(t, lines=_cut(t)),
}

MAIN_SCENARIOS = (PASS, WARNED, FAIL, WAIVED, NOT_APPLICABLE, *ALTERED)
EXPECTED_MAIN = {
    PASS: Verdict.PASS,
    WARNED: Verdict.WARN,
    NO_EXIT: Verdict.ERROR,
    FAIL: Verdict.FAIL,
    WAIVED: Verdict.WAIVED,
    NOT_APPLICABLE: Verdict.NOT_APPLICABLE,
    CRASHED: Verdict.CRASH,
    MALFORMED: Verdict.ERROR,
    PROBE_DIED: Verdict.ERROR,
    HOST_TIMEOUT: Verdict.TIMEOUT,
    NEVER_REACHED: Verdict.NOT_EXECUTED,
}


class Altered(LocalTarget):
    """A real local target whose scenario traces are altered per ALTERED before the run sees them."""

    def run_batch(self, program, scenario_ids, limits_s, on_trace):
        unreported: list[str] = []

        def altered(trace: ScenarioTrace) -> None:
            alter = ALTERED.get(trace.scenario_id)
            changed = alter(trace) if alter is not None else trace
            if changed is None:
                unreported.append(trace.scenario_id)
            else:
                on_trace(changed)

        outcome = super().run_batch(program, scenario_ids, limits_s, altered)
        if unreported:  # the probe "stopped" before these: the batch says why
            completed = tuple(s for s in outcome.completed if s not in unreported)
            return BatchOutcome(completed, None, "the probe stopped (altered by the test)", outcome.stderr)
        return outcome


class LacksApi(LocalTarget):
    """Its implementation lacks an API function: the probe refuses every batch after discovery."""

    def run_batch(self, program, scenario_ids, limits_s, on_trace):
        if list(scenario_ids) == [DISCOVERY_ID]:
            return super().run_batch(program, scenario_ids, limits_s, on_trace)
        return BatchOutcome((), ("ANpuBuffer_load",), None)


class Gone(LocalTarget):
    """A device that cannot be prepared at all (it went away before its probe was set up)."""

    def prepare(self):
        raise RuntimeError("the device went away")


class BrokenDiscovery(LocalTarget):
    """Its pair discovery trace loses the isSupported answer: discovery fails."""

    def run_batch(self, program, scenario_ids, limits_s, on_trace):
        if list(scenario_ids) != [DISCOVERY_ID]:
            return super().run_batch(program, scenario_ids, limits_s, on_trace)

        def broken(trace: ScenarioTrace) -> None:
            on_trace(replace(trace, lines=tuple(x for x in trace.lines if '"is_supported"' not in x)))

        return super().run_batch(program, scenario_ids, limits_s, broken)


def _target(cls: type[LocalTarget], work: Path, serial: str, personality: str = "published", **kwargs) -> LocalTarget:
    (work / serial).mkdir(parents=True, exist_ok=True)
    return cls(
        profile=VnpuProfile(personality=personality),
        work_dir=work / serial,
        build_dir=DEFAULT_BUILD_DIR,
        serial=serial,
        **kwargs,
    )


def _refusing_library(work: Path) -> Path:
    library = work / "librefuse.so"
    source = ROOT / "tests" / "e2e" / "data" / "refuse_allocations.c"
    vnpu = DEFAULT_BUILD_DIR
    subprocess.run(
        ["cc", "-std=c11", "-shared", "-fPIC", "-o", str(library), str(source),
         "-Wl,--no-as-needed", f"-L{vnpu}", "-lvnpu", f"-Wl,-rpath,{vnpu}", "-ldl"],
        check=True,
        capture_output=True,
    )
    return library


def _waivers() -> tuple[Waiver, ...]:
    return (Waiver(WAIVED, None, "*", "known on this build", dt.date(2999, 12, 31), "test"),)


@pytest.fixture(scope="module")
def decided(tmp_path_factory, probe_build):
    """One run over four devices, each branch on one of them; the targets kept for the pytest layer."""
    import os

    work = tmp_path_factory.mktemp("decision")
    os.environ["NPUCONF_TEST_REFUSE_FILE"] = str(work / "refusals")
    os.environ["NPUCONF_TEST_REFUSE_COUNT"] = "1000"
    targets = {
        "main": _target(Altered, work, "main", personality="aosp-2026"),
        "no-api": _target(LacksApi, work, "no-api"),
        "no-pairs": _target(BrokenDiscovery, work, "no-pairs"),
        "refusing": _target(LocalTarget, work, "refusing", impl=_refusing_library(work)),
        "gone": _target(Gone, work, "gone"),
    }
    scenarios = tuple(CORPUS[s] for s in dict.fromkeys((*MAIN_SCENARIOS, NEEDS_NO_PAIRS, REFUSED)))
    plan = RunPlan(
        run_id="decision-paths",
        out_dir=work / "run",
        scenarios=scenarios,
        catalogue=QUOTES,
        target_name="local",
        waivers=_waivers(),
        options=PlanOptions(scenario_ids=tuple(s.id for s in scenarios), profile="published-37"),
        claim_basis=claim_basis(CATALOGUE, CORPUS.values()),
    )
    execute_run(plan, list(targets.values()))
    yield work, plan, targets
    os.environ.pop("NPUCONF_TEST_REFUSE_FILE", None)
    os.environ.pop("NPUCONF_TEST_REFUSE_COUNT", None)


def _verdicts(run_dir: Path) -> dict[tuple[str, str], Verdict]:
    return {(r.device, r.scenario): r.verdict for r in load_results(run_dir).results}


def test_the_run_takes_every_branch(decided):
    _, plan, targets = decided
    verdicts = _verdicts(plan.out_dir)
    assert {s: verdicts[("main", s)] for s in EXPECTED_MAIN} == EXPECTED_MAIN
    assert {verdicts[("no-api", s.id)] for s in plan.scenarios} == {Verdict.NOT_APPLICABLE}
    assert verdicts[("no-pairs", PASS)] is Verdict.PASS  # needs no pairs: runs although discovery failed
    assert verdicts[("no-pairs", FAIL)] is Verdict.ERROR
    refusing = (targets["refusing"].serial, REFUSED)
    refused = next(r for r in load_results(plan.out_dir).results if (r.device, r.scenario) == refusing)
    assert (refused.verdict, refused.allocations_refused, refused.attempts) == (Verdict.PASS, True, 3)
    reasons = {r.scenario: r.reason for r in load_results(plan.out_dir).results if r.device == "main"}
    assert reasons[PROBE_DIED] == "probe process ended unexpectedly (exit status -9)"
    assert reasons[HOST_TIMEOUT] == "no result from the device within 9.0 s"
    assert reasons[NO_EXIT] == "the trace never reaches the scenario's exit"
    gone = [r for r in load_results(plan.out_dir).results if r.device == "gone"]
    assert {(r.verdict, r.reason) for r in gone} == {(Verdict.ERROR, "device preparation failed: the device went away")}


def test_the_pytest_layer_decides_as_the_run(decided):
    """The pytest layer takes no waivers: its WAIVED is the run's FAIL before the waiver. A device that
    cannot be prepared fails the layer's session fixture, which pytest reports as an error of every test:
    the run's ERROR, as junit shows it."""
    _, plan, targets = decided
    recorded = _verdicts(plan.out_dir)
    for name, target in targets.items():
        if name == "gone":
            with pytest.raises(RuntimeError, match="the device went away"):
                PreparedDevice.open(target, QUOTES, plan.profile)
            assert {recorded[(target.serial, s.id)].shown for s in plan.scenarios} == {"error"}
            continue
        session = PreparedDevice(target, prepare_device(target), QUOTES, plan.profile)
        for scenario in plan.scenarios:
            if name == "refusing" and scenario.id != REFUSED:
                continue
            expected = recorded[(target.serial, scenario.id)]
            expected = Verdict.FAIL if expected is Verdict.WAIVED else expected
            assert session.run(scenario).verdict is expected, (name, scenario.id)


@pytest.fixture
def waivers(tmp_path) -> Path:
    """The run's waiver as a file (verify applies waivers only from the command line)."""
    path = tmp_path / "waivers.yaml"
    path.write_text(
        f"waivers:\n  - scenario: {WAIVED}\n    device: '*'\n    reason: known on this build\n    expires: 2999-12-31\n"
    )
    return path


def test_rejudge_and_verify_decide_as_the_run(decided, tmp_path, waivers):
    _, plan, _ = decided
    rejudged = rejudge(plan.out_dir, waivers_file=waivers, out=tmp_path / "rejudged")
    assert _verdicts(rejudged.out_dir) == _verdicts(plan.out_dir)
    assert rejudged.rejudged.changes == ()
    report = verify_bundle(make_bundle(plan.out_dir, tmp_path / "run.tar.gz").path, waivers_file=waivers)
    assert [p.line() for p in report.problems if p.kind in ("verdict", "device")] == []


def test_a_judge_made_error_is_decided_again_after_the_model_changes(decided, tmp_path, monkeypatch, waivers):
    """rejudge and verify both re-decide the ERROR the judge made of a malformed trace: after a model
    change that accepts it, rejudge gives the new verdict and verify names the stored one as stale; a new
    run and the pytest layer, on a device writing the same trace, give that verdict too."""
    import host.run.judging as judging

    work, plan, _ = decided
    judge = judging.judge

    def tolerant(scenario, lines: Sequence[str], *args, **kwargs) -> Judgement:
        if scenario.id == MALFORMED:
            lines = [line for line in lines if line != TORN_LINE]
        return judge(scenario, lines, *args, **kwargs)

    monkeypatch.setattr(judging, "judge", tolerant)
    rejudged = rejudge(plan.out_dir, waivers_file=waivers, out=tmp_path / "rejudged")
    changes = {(c.device, c.scenario): (c.before, c.after) for c in rejudged.rejudged.changes}
    assert changes[("main", MALFORMED)] == (Verdict.ERROR, Verdict.PASS)
    stale = verify_bundle(make_bundle(plan.out_dir, tmp_path / "run.tar.gz").path, waivers_file=waivers)
    assert [p.message for p in stale.problems if p.kind == "verdict"] == [
        f"{MALFORMED} on main: stored ERROR, re-derived PASS (the model judged the trace)"
    ]
    fresh = verify_bundle(make_bundle(rejudged.out_dir, tmp_path / "rejudged.tar.gz").path, waivers_file=waivers)
    assert [p.line() for p in fresh.problems if p.kind == "verdict"] == []
    again = _target(Altered, work, "main-again", personality="aosp-2026")
    rerun = replace(plan, run_id="decision-paths-again", out_dir=tmp_path / "again", scenarios=(CORPUS[MALFORMED],))
    execute_run(rerun, [again])
    assert _verdicts(rerun.out_dir) == {("main-again", MALFORMED): Verdict.PASS}
    session = PreparedDevice(again, prepare_device(again), QUOTES, plan.profile)
    assert session.run(CORPUS[MALFORMED]).verdict is Verdict.PASS


# A scenario no probe program can be built for (its handle names a request and a buffer), in a scenario
# directory of its own: the corpus's scenarios all compile, so the branch needs a scenario outside it.
UNBUILDABLE = """\
scenarios:
  - id: extra.handle_of_two_kinds
    title: One handle names a request and a buffer, so no probe program can be built
    clauses: [req-free-null-noop]
    steps:
      - req_create: {req: x}
      - req_free: {req: x}
      - buf_free: {bufs: [x]}
"""


def test_a_scenario_that_cannot_be_compiled_is_not_applicable_on_all_four_paths(tmp_path, probe_build):
    root = tmp_path / "scenarios"
    (root / "extra").mkdir(parents=True)
    (root / "extra" / "unbuildable.yaml").write_text(UNBUILDABLE)
    (scenario,) = load_corpus(root, known_clauses=CATALOGUE.ids())
    target = _target(LocalTarget, tmp_path, "plain")
    plan = RunPlan(run_id="unbuildable", out_dir=tmp_path / "run", scenarios=(scenario,), catalogue=QUOTES,
                   target_name="local", options=PlanOptions(scenarios=str(root), profile="published-37"))
    execute_run(plan, [target])
    (record,) = load_results(plan.out_dir).results
    assert (record.verdict, record.reason) == (
        Verdict.NOT_APPLICABLE, "scenario extra.handle_of_two_kinds: handle 'x' is used both as r and b")
    session = PreparedDevice(target, prepare_device(target), QUOTES, plan.profile)
    assert session.run(scenario).verdict is Verdict.NOT_APPLICABLE
    rejudged = rejudge(plan.out_dir, out=tmp_path / "rejudged", scenario_root=root)
    assert _verdicts(rejudged.out_dir) == {("plain", scenario.id): Verdict.NOT_APPLICABLE}
    report = verify_bundle(make_bundle(plan.out_dir, tmp_path / "run.tar.gz").path, scenario_root=root)
    assert report.rejudged == 1
    assert [p.line() for p in report.problems if p.kind in ("verdict", "device")] == []
