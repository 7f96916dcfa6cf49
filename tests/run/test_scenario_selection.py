"""`npuconf run --scenario ID`: exact ids (where -k matches substrings), combined with -k and --clause,
an unknown id a one-line usage error, and a run so filtered partial everywhere (summary, bundle, verify)."""

from __future__ import annotations

import json

import pytest

from host.errors import UsageError
from host.suite import check_scenario_ids, load_catalogue, load_corpus, select
from host.suite.checkout import SCENARIO_ROOT
from reports.recorded.run_options import run_command
from tests.conftest import PRINTED_NPUCONF, npuconf

SHORT, LONG = "free.empty_list", "free.empty_list_after_buffers"  # SHORT is part of LONG


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(known_clauses=load_catalogue().ids())


def ids(scenarios) -> list[str]:
    return [s.id for s in scenarios]


def test_scenario_ids_match_exactly_where_keywords_match_substrings(corpus):
    assert ids(select(corpus, SHORT, ())) == [SHORT, LONG]
    assert ids(select(corpus, None, (), [SHORT])) == [SHORT]
    assert ids(select(corpus, None, (), [LONG, SHORT])) == [SHORT, LONG]  # corpus order


def test_scenario_ids_keyword_and_clauses_must_all_match(corpus):
    assert ids(select(corpus, "after", (), [SHORT, LONG])) == [LONG]
    assert ids(select(corpus, None, ["free-indicates-not-needed"], [SHORT, LONG])) == [LONG]
    assert ids(select(corpus, "cookie", (), [SHORT])) == []


def test_an_unknown_scenario_id_names_the_directory_and_the_closest_ids(corpus):
    check_scenario_ids([SHORT, LONG], corpus, SCENARIO_ROOT)
    with pytest.raises(UsageError) as raised:
        check_scenario_ids([SHORT, "free.empty_lst"], corpus, SCENARIO_ROOT)
    message = str(raised.value)
    assert message.startswith(f"--scenario free.empty_lst: no scenario with this id in {SCENARIO_ROOT}")
    assert f"closest: {SHORT}" in message
    with pytest.raises(UsageError, match=r"in \S+$"):  # nothing close: no suggestion
        check_scenario_ids(["zzzz"], corpus, SCENARIO_ROOT)


def test_run_command_names_one_scenario_exactly():
    assert run_command(["--target", "local"], LONG) == f"{PRINTED_NPUCONF} run --target local --scenario {LONG}"
    assert run_command(["--target", "local"]) == f"{PRINTED_NPUCONF} run --target local"


def test_an_unknown_scenario_is_a_one_line_usage_error(tmp_path):
    done = npuconf("run", "--target", "local", "--scenario", "free.empty_lst", "--out", tmp_path / "o", "-q")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("npuconf: --scenario free.empty_lst: no scenario with this id in ")
    assert f"closest: {SHORT}" in done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_scenario_run_is_partial_in_summary_and_verify(tmp_path, probe_build):
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--scenario", SHORT, "-q", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    partial = f"partial run, not a conformance claim: filtered with --scenario {SHORT}"
    assert done.stdout.splitlines()[0] == partial
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["scenario"] for r in records if r["kind"] == "result"] == [SHORT]
    assert next(r for r in records if r["kind"] == "plan")["options"]["scenario_ids"] == [SHORT]
    data = json.loads((out / "summary.json").read_text())
    assert data["answer"] == "partial" and data["claim"]["configuration"]["filters"] == f"--scenario {SHORT}"
    bundle = tmp_path / "s.tar.gz"
    assert npuconf("bundle", out, "--out", bundle).returncode == 0
    verified = npuconf("verify", bundle)
    assert verified.returncode == 2, verified.stdout
    assert verified.stdout.splitlines()[0] == f"bundle verifies; {partial}", verified.stdout


@pytest.mark.slow
def test_a_resumed_scenario_run_runs_the_same_selection(tmp_path, probe_build):
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--scenario", LONG, "--scenario", SHORT, "-q", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    results = out / "results.jsonl"
    # As if interrupted after the first result: the second result and the end record are gone.
    records = results.read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in records]
    kept = records[: kinds.index("result") + 1]
    results.write_text("\n".join(kept) + "\n")
    resumed = npuconf("run", "--resume", out, "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[0].endswith(f"filtered with --scenario {LONG} --scenario {SHORT}")
    after = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["scenario"] for r in after if r["kind"] == "result") == [SHORT, LONG]
