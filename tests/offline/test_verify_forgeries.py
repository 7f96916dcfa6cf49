"""verify takes no fact the kit knows from the bundle: three forgeries that once made edited runs verify
as "conformant" without touching a trace, each rejected, and the claim of each forged run unchanged.

Each forgery edits a real run's results.jsonl as a cheat would, then has the kit itself write the
reports and the bundle (`npuconf bundle`), so only the facts the cheat changed are wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, npuconf

SKELETON = ROOT / "examples" / "skeleton" / "npu_refuse_all.c"


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


def _forged_bundle(records: list[dict], work: Path) -> Path:
    work.mkdir(parents=True)
    for record in records:
        if record.get("kind") == "end":
            record.pop("exit_code", None)
    (work / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    bundle = work.with_suffix(".tar.gz")
    made = npuconf("bundle", work, "--out", bundle)
    assert made.returncode == 0, made.stdout + made.stderr
    return bundle


def _verify(bundle: Path) -> tuple[int, str]:
    done = npuconf("verify", bundle)
    return done.returncode, done.stdout


@pytest.fixture(scope="module")
def skeleton_run(tmp_path_factory, skeleton_corpus_run) -> Path:
    """The refuse-everything skeleton on the local target: passes what applies, incomplete (exit 2)."""
    return skeleton_corpus_run.copy(tmp_path_factory.mktemp("skeleton") / "run")


@pytest.fixture(scope="module")
def aosp_run(tmp_path_factory, aosp_twin_run) -> Path:
    return aosp_twin_run.copy(tmp_path_factory.mktemp("aosp") / "run")


def test_failures_dropped_behind_a_clause_filter_of_the_wrong_type(aosp_run, tmp_path):
    """(a) the FAIL and CRASH records and their plan entries dropped, `options.clauses` a string."""
    records = _records(aosp_run)
    failing = {r["scenario"] for r in records if r.get("kind") == "result" and r["verdict"] in ("FAIL", "CRASH")}
    assert len(failing) > 50
    forged = []
    for record in records:
        if record.get("kind") == "result" and record["scenario"] in failing:
            continue
        if record.get("kind") == "plan":
            record["scenarios"] = [s for s in record["scenarios"] if s["id"] not in failing]
            record["options"]["clauses"] = "all"
        forged.append(record)
    code, out = _verify(_forged_bundle(forged, tmp_path / "forged"))
    assert code == 1, out
    assert "plan option clauses (--clause) is 'all', not a list of texts" in out
    summary = json.loads((tmp_path / "forged" / "summary.json").read_text())
    assert summary["answer"] != "conformant"


def test_every_device_testable_clause_added_to_one_pass_record(skeleton_run, tmp_path):
    """(b) the claim counts the clauses the kit's scenario cites, never those a record lists."""
    from host.suite import kit_facts

    testable = sorted(kit_facts().basis.device_testable)
    records = _records(skeleton_run)
    passing = next(r for r in records if r.get("kind") == "result" and r["verdict"] == "PASS")
    passing["clauses"] = testable
    code, out = _verify(_forged_bundle(records, tmp_path / "forged"))
    assert code == 1, out
    assert f"{passing['scenario']} on {passing['device']}: its record cites other clauses" in out
    assert json.loads((tmp_path / "forged" / "summary.json").read_text())["answer"] == "incomplete"


def test_a_32_bit_abi_with_every_clause_declared_64_bit_only(skeleton_run, tmp_path):
    """(c) which clauses need 64-bit pointers is the kit's fact, not the plan's."""
    records = _records(skeleton_run)
    for record in records:
        if record.get("kind") == "plan":
            basis = record["claim_basis"]
            basis["pointer_64_only"] = list(basis["device_testable"])
        if record.get("kind") == "device":
            record["info"].update(abi="armeabi-v7a", abis=["armeabi-v7a"], pointer_bits=32)
    code, out = _verify(_forged_bundle(records, tmp_path / "forged"))
    assert code == 1, out
    assert "the plan's claim basis pointer_64_only is not this kit's" in out
    assert json.loads((tmp_path / "forged" / "summary.json").read_text())["answer"] == "incomplete"
