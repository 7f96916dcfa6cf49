"""A crash in the middle of a batch costs exactly one scenario (fork isolation per scenario)."""

import json

import pytest

from tests.conftest import npuconf

pytestmark = pytest.mark.slow


def test_segfault_in_the_middle_of_a_batch_is_one_crash(tmp_path, probe_build):
    # Under the aosp-2026 personality ANpuManager_AllocRequest_free(NULL) faults (SIGSEGV, AOSP D4); the
    # published text says it does nothing, so the published-37 verdict is CRASH for that scenario.
    run_dir = tmp_path / "run"
    done = npuconf(
        "run", "--target", "local", "--personality", "aosp-2026", "--out", run_dir, "-q",
        "-k", "requests.create_then_free or requests.free_null_is_noop or support.empty_list",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    order = [
        s["id"] for s in next(r for r in records if r["kind"] == "plan")["scenarios"]
    ]
    assert order == ["requests.create_then_free", "requests.free_null_is_noop", "support.empty_list"]
    verdicts = {r["scenario"]: r for r in records if r["kind"] == "result"}
    assert verdicts["requests.create_then_free"]["verdict"] == "PASS"
    assert verdicts["support.empty_list"]["verdict"] == "PASS"
    crashed = verdicts["requests.free_null_is_noop"]
    assert crashed["verdict"] == "CRASH"
    assert "SIGSEGV" in crashed["reason"]
    assert crashed["discrepancy"] == "D4"
