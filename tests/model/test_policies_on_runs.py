"""The allocation policies on real runs: each policy's scenarios PASS on the vnpu running that policy,
and the scenarios that tell the policies apart FAIL when the model is told another policy."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from host.run import caps_from_info
from host.suite import load_catalogue, load_corpus
from reference_model.caps import DEVICE_POLICIES
from reference_model.judge import judge
from reference_model.verdicts import Verdict
from tests.conftest import npuconf

pytestmark = pytest.mark.slow

POLICIES = DEVICE_POLICIES

# scenario -> (the policy the device runs, the policies the model must then refuse it under)
DISCRIMINATING = {
    "allocation.policy_budget_exact_fill": ("budget", {"acl", "caching", "arena"}),
    "allocation.policy_acl_pools_and_rounding": ("acl", {"budget", "caching", "arena"}),
    "allocation.policy_acl_huge_pool_exact": ("acl", {"budget", "caching", "arena"}),
    "allocation.policy_caching_steps_and_reuse": ("caching", {"budget", "acl", "arena"}),
    "allocation.policy_arena_tail_holes": ("arena", {"budget", "acl", "caching"}),
    "allocation.policy_arena_head_exact": ("arena", {"budget", "acl", "caching"}),
    "preemption.policy_caching_cleanup_then_preempt": ("caching", {"budget", "acl", "arena"}),
    "preemption.policy_caching_exact_accounting": ("caching", {"budget", "acl", "arena"}),
    "preemption.policy_caching_preempting_allocation_keeps_its_block": ("caching", {"budget", "acl", "arena"}),
    "preemption.policy_arena_types_and_reservations": ("arena", {"budget", "acl", "caching"}),
    # budget does not predict pressure (docs/model.md §3), so it cannot tell these apart
    "preemption.policy_arena_pressure_reclaims_holes": ("arena", {"acl", "caching"}),
    "preemption.policy_acl_pressure_one_victim": ("acl", {"arena"}),
    "preemption.policy_acl_pressure_exact_fit": ("acl", {"arena"}),
    "preemption.policy_acl_pressure_spares_huge_pages": ("acl", {"arena", "caching"}),
    "preemption.policy_caching_reservation_in_force": ("caching", {"acl", "arena"}),
    # a refusal every other policy also predicts: it holds caching to its victim rule, tells no policy apart
    "preemption.policy_caching_equal_priority_is_no_victim": ("caching", set()),
}


def records(run_dir, kind):
    return [r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines()) if r["kind"] == kind]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, probe_build):
    """The policy scenarios once per policy, on the local target (the vnpu with that policy)."""
    out = {}
    for policy in POLICIES:
        run_dir = tmp_path_factory.mktemp(policy) / "run"
        done = npuconf("run", "--target", "local", "--policy", policy, "-k", "policy_", "--out", run_dir, "-q")
        assert done.returncode == 0, done.stdout + done.stderr
        out[policy] = run_dir
    return out


def test_each_policy_passes_its_own_scenarios_and_skips_the_others(runs):
    corpus = {s.id: s for s in load_corpus(known_clauses=load_catalogue().ids())}
    own = {sid: need[len("policy-"):] for sid, s in corpus.items() for need in s.requires if need.startswith("policy-")}
    assert set(own) == set(DISCRIMINATING)
    for policy, run_dir in runs.items():
        verdicts = {r["scenario"]: r["verdict"] for r in records(run_dir, "result")}
        assert verdicts == {sid: "PASS" if p == policy else "NOT_APPLICABLE" for sid, p in own.items()}, policy
        device = records(run_dir, "device")[0]["info"]
        assert device["policy"] == policy and caps_from_info(device).policy == policy


def test_discriminating_scenarios_fail_under_another_policy(runs):
    catalogue = load_catalogue()
    corpus = {s.id: s for s in load_corpus(known_clauses=catalogue.ids())}
    table = []
    for sid, (policy, refused_under) in DISCRIMINATING.items():
        run_dir = runs[policy]
        record = next(r for r in records(run_dir, "result") if r["scenario"] == sid)
        caps = caps_from_info(records(run_dir, "device")[0]["info"])
        for told in POLICIES:
            j = judge(corpus[sid], record["trace"], replace(caps, policy=told), catalogue.quotes())
            table.append((sid, policy, told, j.verdict.value))
            if told == policy:
                assert j.verdict is Verdict.PASS, (sid, told, j.reason)
            elif told in refused_under:
                assert j.verdict is Verdict.FAIL, (sid, told, j.reason)
                assert j.divergence is not None
                if j.divergence.clause == "alloc-supported-may-fail" and told != "budget":
                    assert f"policy {told}" in j.divergence.message, j.divergence.message
        # no declared capacity or policy (a real device): the text allows every one of these outcomes
        lenient = judge(corpus[sid], record["trace"], replace(caps, policy=None, capacity_bytes=None),
                        catalogue.quotes())
        assert lenient.verdict is Verdict.PASS, (sid, lenient.reason)
    assert sum(v == "FAIL" for *_, v in table) == sum(len(r) for _, r in DISCRIMINATING.values())
