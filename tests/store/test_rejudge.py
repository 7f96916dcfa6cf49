"""`npuconf rejudge`: verdicts re-derived from stored traces with another profile, no device."""

import datetime as dt
import json

import pytest

from host.errors import UsageError
from host.offline import rejudge
from host.run import caps_from_info
from reports.answers.claim import claim_of
from reports.recorded.results import load_results
from tests.conftest import npuconf
from tests.store.runs import D2_SCENARIO, NA_SCENARIO, PASS_SCENARIO, d2_run, verdict_record, write


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_aosp_profile_accepts_the_d2_trace_published_fails(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    before = {r.scenario: r.verdict for r in load_results(run_dir).results}
    assert before[D2_SCENARIO] == "FAIL" and before[PASS_SCENARIO] == "PASS"

    outcome = rejudge(run_dir, "aosp-2026")

    assert outcome.out_dir == run_dir / "rejudge-aosp-2026"
    changes = [(c.device, c.scenario, c.before, c.after, c.discrepancy) for c in outcome.rejudged.changes]
    assert changes == [("phone-1", D2_SCENARIO, "FAIL", "PASS", "D2")]
    assert outcome.rejudged.judged == 2  # the NOT_APPLICABLE record has no trace to judge
    assert outcome.exit_code == 0

    records = lines(outcome.paths["results"])
    plan = records[0]
    assert plan["kind"] == "plan" and plan["profile"] == "aosp-2026"
    assert plan["rejudged_from"]["run_id"] == "20260301-120000-d2d2"
    assert plan["rejudged_from"]["profile"] == "published-37"
    assert plan["run_id"] != "20260301-120000-d2d2"
    results = {r["scenario"]: r for r in records if r["kind"] == "result"}
    assert results[D2_SCENARIO]["verdict"] == "PASS" and results[D2_SCENARIO]["discrepancy"] == "D2"
    assert results[D2_SCENARIO]["divergence"] is None
    assert results[D2_SCENARIO]["trace"] == lines(run_dir / "results.jsonl")[2]["trace"]  # raw trace kept
    assert results[NA_SCENARIO]["verdict"] == "NOT_APPLICABLE"
    assert records[-1] == {**records[-1], "kind": "end", "counts": {"PASS": 2, "NOT_APPLICABLE": 1}}
    assert "exit_code" not in records[-1]  # derived by every reader, never stamped
    summary = json.loads(outcome.paths["summary"].read_text())
    # aosp-2026 is not the normative profile: nothing failed, but the rejudged run is no conformance claim.
    assert summary["answer"] == "partial" and summary["profile"] == "aosp-2026"
    assert summary["claim"]["headline"].startswith("partial run, not a conformance claim: profile aosp-2026")
    assert outcome.paths["junit"].is_file() and outcome.paths["html"].is_file()
    assert (run_dir / "results.jsonl").read_text().count('"verdict": "FAIL"') == 1  # the original is untouched


def test_rejudging_back_with_published_restores_the_fail(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    aosp = rejudge(run_dir, "aosp-2026")
    back = rejudge(aosp.out_dir, "published-37", out=tmp_path / "back")
    assert [(c.before, c.after) for c in back.rejudged.changes] == [("PASS", "FAIL")]
    assert back.exit_code == 1
    fail = next(r for r in load_results(tmp_path / "back").results if r.verdict == "FAIL")
    assert fail.divergence is not None and fail.divergence.clause == "req-device-default-negative"


def test_same_profile_changes_nothing(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    outcome = rejudge(run_dir)  # the run's own profile
    assert outcome.out_dir.name == "rejudge-published-37"
    assert outcome.rejudged.changes == ()
    assert outcome.exit_code == 1


def test_unknown_scenario_is_reported_and_kept(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    path = run_dir / "results.jsonl"
    records = lines(path)
    records.insert(
        -1, verdict_record("phone-1", "gone.scenario", "PASS", "2026-03-01T12:00:01Z", trace=['{"ev":"begin"}'])
    )
    write(run_dir, records)
    outcome = rejudge(run_dir, "aosp-2026")
    assert outcome.rejudged.missing_scenarios == (("phone-1", "gone.scenario"),)
    kept = next(r for r in load_results(outcome.out_dir).results if r.scenario == "gone.scenario")
    assert kept.verdict == "PASS"


def test_waivers_turn_the_fail_into_waived_and_stored_waivers_are_kept(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        "waivers:\n  - clause: req-device-default-negative\n    device: 'acme/*'\n"
        "    reason: b/42 ENOSYS until the next release\n    expires: 2099-01-01\n"
    )
    waived = rejudge(run_dir, waivers_file=waivers, out=tmp_path / "waived")
    assert [(c.before, c.after) for c in waived.rejudged.changes] == [("FAIL", "WAIVED")]
    # Without a waiver file, the waiver the run recorded stays with the result that still FAILs.
    again = rejudge(tmp_path / "waived", out=tmp_path / "again")
    assert again.rejudged.changes == ()
    record = next(r for r in load_results(tmp_path / "again").results if r.scenario == D2_SCENARIO)
    assert record.verdict == "WAIVED" and record.waiver == "b/42 ENOSYS until the next release"


def test_caps_rebuilt_from_device_info():
    caps = caps_from_info(
        {
            "supported_pairs": [[0, 1], [1, 2]],
            "vnpu_control": True,
            "capacity": 4096,
            "policy": "budget",
            "personality": "published",
        }
    )
    assert caps.supported_pairs == frozenset({(0, 1), (1, 2)})
    assert (caps.capacity_bytes, caps.policy, caps.personality, caps.vnpu_control) == (
        4096,
        "budget",
        "published",
        True,
    )
    phone = caps_from_info({"supported_pairs": None, "vnpu_control": False, "capacity": 4096})
    assert phone.supported_pairs is None and phone.capacity_bytes is None and not phone.vnpu_control


def test_refuses_to_overwrite_the_run_and_needs_a_plan(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    with pytest.raises(UsageError, match="own directory"):
        rejudge(run_dir, "aosp-2026", out=run_dir)
    no_plan = write(tmp_path / "noplan", lines(run_dir / "results.jsonl")[1:])
    with pytest.raises(UsageError, match="no plan"):
        rejudge(no_plan)


def test_cli_prints_the_changes(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    done = npuconf("rejudge", run_dir, "--profile", "aosp-2026", "--out", tmp_path / "out", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "1 verdict change" in done.stdout
    assert f"phone-1  {D2_SCENARIO}  FAIL -> PASS  [D2]" in done.stdout
    assert (tmp_path / "out" / "report.html").is_file()
    bad = npuconf("rejudge", tmp_path / "nowhere", timeout=60)
    assert bad.returncode == 3 and "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1
    bad_profile = npuconf("rejudge", run_dir, "--profile", "cts", timeout=60)
    assert bad_profile.returncode == 3


def test_cli_refuses_to_replace_an_earlier_rejudge(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    first = npuconf("rejudge", run_dir, "--profile", "aosp-2026", timeout=60)
    assert first.returncode == 0, first.stderr
    earlier = run_dir / "rejudge-aosp-2026"
    kept = (earlier / "results.jsonl").read_bytes()

    again = npuconf("rejudge", run_dir, "--profile", "aosp-2026", timeout=60)
    assert again.returncode == 3 and "Traceback" not in again.stderr
    assert again.stderr.splitlines() == [
        f"npuconf: {earlier}: already holds results.jsonl (an earlier rejudge); rejudge never replaces it: "
        "remove that directory, or write elsewhere with --out NEW"
    ]
    assert (earlier / "results.jsonl").read_bytes() == kept

    elsewhere = npuconf("rejudge", run_dir, "--profile", "aosp-2026", "--out", tmp_path / "new", timeout=60)
    assert elsewhere.returncode == 0, elsewhere.stderr
    taken = npuconf("rejudge", run_dir, "--profile", "aosp-2026", "--out", tmp_path / "new", timeout=60)
    assert taken.returncode == 3
    refusal = f"npuconf: --out {tmp_path / 'new'}: already holds results.jsonl; choose a new directory"
    assert taken.stderr.splitlines() == [refusal]


def test_refuses_an_out_directory_holding_someone_elses_report(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("{}")
    with pytest.raises(UsageError, match=r"already holds summary.json; choose a new directory"):
        rejudge(run_dir, "aosp-2026", out=mine)
    assert (mine / "summary.json").read_text() == "{}"
    (tmp_path / "empty").mkdir()
    assert rejudge(run_dir, "aosp-2026", out=tmp_path / "empty").exit_code == 0  # an empty directory is fine


def test_the_waiver_file_a_rejudge_applied_is_recorded_as_its_configuration(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        "waivers:\n  - clause: req-device-default-negative\n    device: 'acme/*'\n"
        "    reason: b/42\n    expires: 2099-01-01\n"
    )
    waived = rejudge(run_dir, waivers_file=waivers, out=tmp_path / "waived")
    run = load_results(waived.out_dir)
    assert dict(claim_of(run).configuration)["waivers"] == str(waivers)
    assert run.plan.options["waivers_as_of"] == dt.date.today().isoformat()
    assert sum(r.verdict == "WAIVED" for r in run.results) == 1
    summary = json.loads(waived.paths["summary"].read_text())
    assert summary["claim"]["configuration"]["waivers"] == str(waivers)


def test_a_waiver_typo_suggests_the_id_and_a_file_for_other_devices_says_so(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    typo = tmp_path / "typo.yaml"
    typo.write_text("waivers:\n  - clause: req-device-negative-einvl\n    device: '*'\n    reason: x\n"
                    "    expires: 2099-01-01\n")
    done = npuconf("rejudge", run_dir, "--waivers", typo, "--out", tmp_path / "typo")
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "did you mean 'req-device-negative-einval'?" in done.stderr
    other = tmp_path / "other.yaml"
    other.write_text("waivers:\n  - clause: req-device-negative-einval\n    device: 'globex/*'\n    reason: x\n"
                     "    expires: 2099-01-01\n")
    done = npuconf("rejudge", run_dir, "--waivers", other, "--out", tmp_path / "other")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"--waivers {other}: no entry's device glob matches a device of this run" in done.stderr
