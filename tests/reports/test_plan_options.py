"""reports.recorded.plan_options: one table of the plan's options, their flags and types; a value of another type is a
named problem wherever the plan is read, and is never trusted by the claim, the replay lines or verify."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from synthetic_results import ResultsBuilder, load, scenario

from host.cli import build_parser
from reports.answers.claim import claim_of
from reports.answers.findings import replay_command
from reports.recorded.plan_options import OPTION, OPTIONS, PlanOptions, read_plan_options
from tests.conftest import PRINTED_NPUCONF

# What `npuconf run` records (host/run/start.py), every option set.
RECORDED = PlanOptions(
    impl="/opt/lib.so", personality="aosp-2026", policy="acl", keyword="alloc", scenario_ids=("a.x",),
    clauses=("alloc-async",), timeout_multiplier=2, jobs=3, cross="aarch64-linux-gnu", scenarios="/s",
    waivers="/w.yaml", waivers_expired=("expired",), waivers_as_of=dt.date(2026, 3, 1), devices=2,
    serials=("s1",), adb_servers=("h:5037",), capacity=4096, profile="aosp-2026", shard=True,
)  # fmt: skip


def test_what_a_run_records_reads_back_as_it_was():
    written = RECORDED.to_json()
    assert list(written) == [o.key for o in OPTIONS if o.written]  # the order a run plan records them in
    assert written["waivers_as_of"] == "2026-03-01" and written["clauses"] == ["alloc-async"]
    assert read_plan_options(written) == RECORDED


@pytest.mark.parametrize("key, value", [
    ("jobs", "3"), ("capacity", 4096.5), ("timeout_multiplier", "2"), ("waivers_as_of", "March"),
    ("shard", "yes"), ("serials", "s1"), ("impl", 7), ("clauses", "all"),
])  # fmt: skip
def test_a_value_of_another_type_is_named_and_read_as_not_given(key, value):
    options = read_plan_options({**RECORDED.to_json(), key: value})
    assert [k for k, _ in options.malformed] == [key]
    option = OPTION[key]
    named = f"{key} ({option.flag})" if option.flag else key
    assert options.problems[0].startswith(f"plan option {named} is ")
    assert getattr(options, key) == option.empty
    assert dataclasses.replace(options, **{key: getattr(RECORDED, key)}, malformed=()) == RECORDED


def test_the_report_names_a_malformed_option_and_the_replay_line_leaves_it_out(builder: ResultsBuilder):
    options = {"impl": ["/opt/lib.so"], "personality": "aosp-2026", "timeout_multiplier": "3", "jobs": 2}
    builder.plan(["local"], [scenario("alloc.x")], target="local", options=options)
    run = load(builder.result("local", "alloc.x", "PASS").write())
    assert [p.split(": ", 1)[1] for p in run.problems] == [
        "plan option impl (--impl) is ['/opt/lib.so'], not a text: read as not given",
        "plan option timeout_multiplier (--timeout-multiplier) is '3', not a number: read as not given",
    ]
    assert replay_command(run, run.results[0]) == (
        f"{PRINTED_NPUCONF} run --target local --personality aosp-2026 --scenario alloc.x"
    )
    assert dict(claim_of(run).configuration)["impl"] == "vnpu"


def test_the_run_command_takes_each_flag_from_the_table_and_leaves_its_default_to_it():
    args = build_parser().parse_args(["run"])
    for option in OPTIONS:
        if option.flag:
            assert getattr(args, option.key) is None  # filled in by host/options.py after parsing

