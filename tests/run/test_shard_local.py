"""The sharded runner with real probes on the local target (several local targets of one build), no adb:
each scenario once per build, a target failing mid-run hands its work to the others, groups by build."""

import io
import json
from collections import Counter

from host.probe import DEFAULT_BUILD_DIR
from host.run import DISCOVERY_ID, RunPlan
from host.run.progress import Progress
from host.run.runner import execute_run
from host.suite import claim_basis, load_catalogue, load_corpus, select
from host.targets import VnpuProfile
from host.targets.local import LocalTarget
from reports.answers.claim import claim_of
from reports.recorded.plan_options import PlanOptions
from reports.recorded.results import load_results
from reports.renderers.run_reports import write_run_reports


def _exit_code(plan):
    """The run's exit code as every reader derives it (the end record states none)."""
    return int(claim_of(load_results(plan.out_dir)).exit_code)


class FailingAfter(LocalTarget):
    """A local target whose batches stop working after `good` batches (beyond discovery), like a lost device."""

    def __init__(self, *args, good, **kwargs):
        super().__init__(*args, **kwargs)
        self.good = good
        self.batches = 0

    def run_batch(self, program, scenario_ids, limits_s, on_trace):
        if list(scenario_ids) != [DISCOVERY_ID]:  # pair discovery (when it runs: it may come from the cache)
            self.batches += 1
            if self.batches > self.good:
                raise OSError("device went away")
        return super().run_batch(program, scenario_ids, limits_s, on_trace)


class OtherBuild(LocalTarget):
    def prepare(self):
        return super().prepare() | {"fingerprint": "other/build:1"}


def _plan(tmp_path, scenarios):
    catalogue = load_catalogue()
    return RunPlan(
        run_id="shard-local",
        out_dir=tmp_path / "run",
        scenarios=tuple(scenarios),
        catalogue=dict(catalogue.quotes()),
        target_name="local",
        # A subset of the corpus, as `-k` would choose it: a partial run, whose answer is exit 0 when
        # nothing failed (reports/answers/claim.py).
        options=PlanOptions(keyword="a subset chosen by the test", profile="published-37", shard=True),
        claim_basis=claim_basis(catalogue, load_corpus(known_clauses=catalogue.ids())),
    )


def _corpus(keyword):
    return select(load_corpus(known_clauses=load_catalogue().ids()), keyword, ())


def _target(tmp_path, serial, cls=LocalTarget, **kwargs):
    work = tmp_path / serial
    work.mkdir(parents=True, exist_ok=True)
    return cls(profile=VnpuProfile(), work_dir=work, build_dir=DEFAULT_BUILD_DIR, serial=serial, **kwargs)


def test_three_local_targets_of_one_build_share_the_corpus(tmp_path, probe_build):
    scenarios = _corpus("requests or cookies")
    plan = _plan(tmp_path, scenarios)
    targets = [_target(tmp_path, f"local-{i}") for i in range(3)]
    out = io.StringIO()
    progress = Progress(out, interactive=False)
    execute_run(plan, targets, progress.update)
    assert _exit_code(plan) == 0
    progress.finish()
    # Progress counts each device against the build's share, and the run ends complete.
    final = out.getvalue().splitlines()[-1]
    assert final.startswith(f"run complete: {len(scenarios)}/{len(scenarios)} in "), final
    run = load_results(plan.out_dir)
    ran = [r for r in run.results if r.recorded]
    assert Counter(r.scenario for r in ran) == Counter(s.id for s in scenarios)
    assert len(set(run.groups.values())) == 1 and {r.verdict.value for r in ran} == {"PASS"}
    assert len({r.device for r in ran}) >= 2


def test_a_target_lost_mid_run_gives_its_scenarios_to_the_others(tmp_path, probe_build):
    scenarios = _corpus("requests or cookies or allocation")
    plan = _plan(tmp_path, scenarios)
    lost = _target(tmp_path, "local-lost", FailingAfter, good=1)
    targets = [_target(tmp_path, "local-a"), lost, _target(tmp_path, "local-b")]
    # Every scenario still ran once, but the run lost a device: recorded, and the answer is incomplete.
    execute_run(plan, targets)
    assert _exit_code(plan) == 2
    run = load_results(plan.out_dir)
    assert Counter(r.scenario for r in run.results) == Counter(s.id for s in scenarios)
    assert {r.verdict.value for r in run.results} <= {"PASS", "NOT_APPLICABLE"}
    assert not [r for r in run.results if r.verdict.value == "NOT_EXECUTED"]
    assert lost.batches >= 2  # it ran a chunk, then failed one (and was asked for no more)
    on_lost = [r for r in run.results if r.device == "local-lost"]
    assert 0 < len(on_lost) < len(scenarios) // 2
    records = [json.loads(line) for line in (plan.out_dir / "results.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r["kind"] == "lost"]
    assert record["device"] == "local-lost" and "device went away" in record["reason"]
    assert run.problems == ()
    claim = claim_of(run)
    assert claim.level == "incomplete" and "lost device local-lost mid-run" in claim.headline
    assert claim.to_json()["lost_devices"] == [{"device": "local-lost", "reason": record["reason"]}]
    assert records[-1]["kind"] == "end" and "exit_code" not in records[-1]  # derived, never stamped
    summary = write_run_reports(run, plan.out_dir)["summary"]
    stated = json.loads(summary.read_text())
    assert stated["claim"]["lost_devices"][0]["device"] == "local-lost" and stated["exit_code"] == 2


def test_devices_of_two_builds_each_run_everything_and_a_build_whose_devices_all_fail(tmp_path, probe_build):
    scenarios = _corpus("requests.create")
    plan = _plan(tmp_path, scenarios)
    targets = [
        _target(tmp_path, "a1"),
        _target(tmp_path, "a2"),
        _target(tmp_path, "b1", OtherBuild),
        _target(tmp_path, "c1", FailingAfter, good=0),
    ]
    execute_run(plan, targets)
    code = _exit_code(plan)
    run = load_results(plan.out_dir)
    groups = run.groups
    assert groups["a1"] == groups["a2"] == groups["c1"] != groups["b1"] == "other/build:1"
    per_group = Counter((groups[r.device], r.scenario) for r in run.results)
    assert set(per_group.values()) == {1} and len(per_group) == 2 * len(scenarios)
    assert {r.verdict.value for r in run.results} == {"PASS"}  # c1's loss moved its work to a1, a2
    assert code == 2 and set(run.lost) == {"c1"}  # ... and the run says it lost c1: incomplete

    alone = _plan(tmp_path / "alone", scenarios)
    execute_run(alone, [_target(tmp_path, "d1", FailingAfter, good=0)])
    assert _exit_code(alone) == 2
    left = load_results(alone.out_dir).results
    assert {r.verdict.value for r in left} == {"NOT_EXECUTED"} and len(left) == len(scenarios)
    assert all("every device of this build was lost" in r.reason and "went away" in r.reason for r in left)


class Named(LocalTarget):
    """A local target on an --impl library that keeps the serial it was given (two of one build)."""

    def __post_init__(self):
        serial = self.serial
        super().__post_init__()
        self.serial = serial


def test_a_build_whose_discovery_fails_still_runs_what_needs_no_pairs(tmp_path, probe_build):
    from host.run.decision import needs_discovery
    from tests.adversarial.adversary import build, real_library

    library = build("M_SUPPORT_COUNT", tmp_path / "lib", real_library())
    scenarios = _corpus("support or requests.create")
    plan = _plan(tmp_path, scenarios)
    targets = [_target(tmp_path, f"broken-{i}", Named, impl=library) for i in range(2)]
    execute_run(plan, targets)
    assert _exit_code(plan) == 1  # the broken isSupported gets its FAILs, as without --shard
    run = load_results(plan.out_dir)
    assert len(set(run.groups.values())) == 1
    assert Counter(r.scenario for r in run.results) == Counter(s.id for s in scenarios)  # once for the build
    by_id = {s.id: s for s in scenarios}
    for record in run.results:
        if needs_discovery(by_id[record.scenario]):
            assert record.verdict.value == "ERROR" and "discovery" in record.reason, record
        else:
            assert record.verdict.value in ("PASS", "FAIL", "NOT_APPLICABLE"), record
    assert any(r.verdict.value == "FAIL" and r.divergence and r.divergence.clause == "support-returns"
               for r in run.results)
    assert len({r.device for r in run.results if r.verdict.value != "ERROR"}) == 2  # both shared the rest
