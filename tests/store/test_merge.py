"""`npuconf report DIR... --merge OUT`: several runs and devices as one run."""

import json

from reports.answers.claim import claim_of
from reports.recorded.merge import merge_runs
from reports.recorded.results import load_results
from tests.conftest import npuconf
from tests.store.runs import device_info, plan, verdict_record, write

A, B = "requests.create_then_free", "requests.default_size_is_zero"


def two_runs(tmp_path):
    first = write(
        tmp_path / "first",
        [
            plan("run-1", "2026-03-01T10:00:00Z", ["phone-1"], [A, B]),
            {"kind": "device", "device": "phone-1", "info": device_info("phone-1", "acme/old:37/B1")},
            verdict_record("phone-1", A, "FAIL", "2026-03-01T10:00:01Z"),
            verdict_record("phone-1", B, "PASS", "2026-03-01T10:00:02Z"),
            {"kind": "end", "finished": "2026-03-01T10:05:00Z", "counts": {}, "exit_code": 1},
        ],
    )
    second = write(
        tmp_path / "second",
        [
            plan("run-2", "2026-03-02T10:00:00Z", ["phone-1", "phone-2"], [A]),
            {"kind": "device", "device": "phone-1", "info": device_info("phone-1", "acme/new:37/B2")},
            {"kind": "device", "device": "phone-2", "info": device_info("phone-2")},
            verdict_record("phone-1", A, "PASS", "2026-03-02T10:00:01Z"),
            verdict_record("phone-2", A, "PASS", "2026-03-02T10:00:02Z"),
            {"kind": "end", "finished": "2026-03-02T10:05:00Z", "counts": {}, "exit_code": 0},
        ],
    )
    return first, second


def test_newest_result_wins_and_plans_are_united(tmp_path):
    first, second = two_runs(tmp_path)
    # Given newest first: the order of the arguments does not decide, `finished` does.
    outcome = merge_runs([second, first], tmp_path / "merged")
    merged = load_results(outcome.path)
    assert merged.plan is not None
    assert merged.plan.devices == ("phone-1", "phone-2")
    assert [s.id for s in merged.plan.scenarios] == [A, B]
    verdicts = {(r.device, r.scenario): r.verdict for r in merged.results}
    assert verdicts == {
        ("phone-1", A): "PASS",  # run-2 is newer than run-1's FAIL
        ("phone-1", B): "PASS",
        ("phone-2", A): "PASS",
        ("phone-2", B): "NOT_EXECUTED",  # planned by the union, run by nobody
    }
    assert merged.devices["phone-1"]["fingerprint"] == "acme/new:37/B2"  # newest device info
    assert any("phone-1" in p and "info differs" in p for p in outcome.problems)
    assert outcome.superseded == 1 and outcome.results == 3
    assert outcome.inputs == ("run-1", "run-2")
    raw_plan = json.loads(outcome.path.read_text().splitlines()[0])
    assert [m["run_id"] for m in raw_plan["merged_from"]] == ["run-1", "run-2"]
    assert claim_of(merged).level.value == "incomplete"  # the NOT_EXECUTED pair
    assert merged.problems == ()


def test_cli_regenerates_each_run_and_writes_the_merged_reports(tmp_path):
    first, second = two_runs(tmp_path)
    out = tmp_path / "merged"
    done = npuconf("report", first, second, "--merge", out, timeout=60)
    assert done.returncode == 0, done.stderr
    for directory in (first, second, out):
        assert (directory / "report.html").is_file() and (directory / "junit.xml").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 4 and summary["counts"]["PASS"] == 3
    assert "merged 2 runs" in done.stdout


def test_merged_scenario_filters_are_united_and_stay_partial(tmp_path):
    runs = []
    for run_id, started, scenario in (("run-1", "2026-03-01T10:00:00Z", A), ("run-2", "2026-03-02T10:00:00Z", B)):
        record = plan(run_id, started, ["phone-1"], [scenario])
        record["options"] = {"scenario_ids": [scenario]}
        runs.append(write(tmp_path / run_id, [
            record,
            {"kind": "device", "device": "phone-1", "info": device_info("phone-1")},
            verdict_record("phone-1", scenario, "PASS", started),
            {"kind": "end", "finished": started, "counts": {}, "exit_code": 0},
        ]))  # fmt: skip
    merged = load_results(merge_runs(runs, tmp_path / "merged").path)
    assert merged.plan is not None and merged.plan.options["scenario_ids"] == [A, B]
    assert f"filtered with --scenario {A} --scenario {B}" in claim_of(merged).partial


def test_cli_prints_the_merged_answer_as_run_does_and_exits_as_report_does(tmp_path):
    first, second = two_runs(tmp_path)
    # Merged alone, the first run keeps its FAIL: the answer says so, and the exit code follows
    # `report DIR` (0 once the reports are written), not the verdicts.
    alone = npuconf("report", first, timeout=60)
    done = npuconf("report", first, "--merge", tmp_path / "merged-first", timeout=60)
    assert alone.returncode == 0 and done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("merged 1 runs"))
    headline, verdicts, configuration = lines[at + 1 : at + 4]
    assert headline.startswith("non-conformant: 1 FAIL"), done.stdout
    assert verdicts == "verdicts: PASS 1, FAIL 1"  # in the order `run` prints them
    assert configuration.startswith("configuration: target ")
    assert f"results: {tmp_path / 'merged-first' / 'results.jsonl'}" in lines

    done = npuconf("report", first, second, "--merge", tmp_path / "merged", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "verdicts: PASS 3, NOT_EXECUTED 1" in done.stdout.splitlines(), done.stdout
    assert claim_of(load_results(tmp_path / "merged" / "results.jsonl")).headline in done.stdout.splitlines()


def test_each_input_keeps_its_configuration_and_its_replay_lines(tmp_path):
    """One input ran --impl on one device, the other the vnpu on another: the merged configuration names
    both, and each result replays with its own run's target and options."""
    impl = write(
        tmp_path / "impl",
        [
            plan("run-impl", "2026-03-01T10:00:00Z", ["local"], [A], target="local",
                 options={"impl": "/opt/libmine.so"}),
            {"kind": "device", "device": "local", "info": device_info("local")},
            verdict_record("local", A, "FAIL", "2026-03-01T10:00:01Z"),
        ],
    )
    vnpu = write(
        tmp_path / "vnpu",
        [
            plan("run-vnpu", "2026-03-02T10:00:00Z", ["virtual-1"], [A], target="virtual",
                 options={"personality": "aosp-2026"}),
            {"kind": "device", "device": "virtual-1", "info": device_info("virtual-1")},
            verdict_record("virtual-1", A, "FAIL", "2026-03-02T10:00:01Z"),
        ],
    )
    outcome = merge_runs([impl, vnpu], tmp_path / "merged")
    merged = load_results(outcome.path)
    configuration = dict(claim_of(merged).configuration)
    assert configuration["impl"] == "/opt/libmine.so (run-impl) + vnpu (run-vnpu)", configuration
    assert configuration["personality"] == "published (run-impl) + aosp-2026 (run-vnpu)", configuration
    assert npuconf("report", outcome.path.parent).returncode == 0
    summary = json.loads((outcome.path.parent / "summary.json").read_text())
    replays = {f["device"]: f["replay"] for f in summary["failures"]}
    assert replays["local"].endswith(f" run --target local --impl /opt/libmine.so --scenario {A}"), replays
    assert replays["virtual-1"].endswith(f" run --target virtual --personality aosp-2026 --scenario {A}"), replays
    page = (outcome.path.parent / "report.html").read_text(encoding="utf-8")
    inputs = page[page.index('<table class="meta" id="merged-from">') :]
    inputs = inputs[: inputs.index("</table>")]
    assert "target local, impl /opt/libmine.so, personality published" in inputs
    assert "target virtual, impl vnpu, personality aosp-2026" in inputs
