"""`verify` checks every member it ships and every field it can (issue 39): junit.xml, report.html and
summary.json are rendered again and compared; a lost device is said by two records; dates agree with each
other and with the traces' own clock; the kit's version and vocabulary are checked, what cannot be is
named on the answer line; and nothing it reads is unbounded or a FIFO."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import time

import pytest

from host.offline import make_bundle
from host.run.runner import execute_run
from reports.answers.claim import claim_of
from reports.recorded.results import load_results
from tests.hostile.conftest import cli, text
from tests.hostile.test_bundle_bounds import _rebundled
from tests.run.test_shard_local import FailingAfter, _corpus, _plan, _target
from tests.store.runs import d2_run


def _verify(bundle, *args, env=None):
    done = cli("verify", bundle, *args, env=env, timeout=120)
    return done, text(done)


def test_a_junit_xml_without_failures_and_a_conformant_report_html_are_refused(tmp_path):
    def forge(members):
        junit = members["junit.xml"].decode()
        junit = re.sub(r"<failure[^>]*>.*?</failure>\n?", "", junit, flags=re.S)
        members["junit.xml"] = re.sub(r'failures="\d+"', 'failures="0"', junit).encode()
        members["report.html"] = members["report.html"].replace(b"non-conformant", b"conformant")

    done, said = _verify(_rebundled(tmp_path, "forged.tar.gz", forge))
    assert done.returncode == 1, said
    assert said.startswith("bundle rejected: report: junit.xml is not what this kit renders from results.jsonl")
    assert "report: report.html is not what this kit renders" in said
    assert "'failures=" not in said or "failures=\"0\"" in said


def test_an_untouched_bundle_renders_to_the_same_bytes_and_says_verifys_own_exit_code(tmp_path):
    done, said = _verify(_rebundled(tmp_path, "intact.tar.gz", lambda members: None))
    assert done.returncode == 2, said  # verified, but non-conformant: no claim
    assert "(verify exits 2)" in said and "(exit 1)" not in said


def _results(members):
    return [json.loads(line) for line in members["results.jsonl"].decode().splitlines()]


def _set_results(members, objects):
    members["results.jsonl"] = "".join(json.dumps(o) + "\n" for o in objects).encode()


def test_a_start_moved_back_alone_disagrees_with_the_results(tmp_path):
    def backdate(members):
        objects = _results(members)
        objects[0]["started"] = "2026-01-30T12:00:00Z"  # a month earlier: waivers judged as of then
        objects[0]["options"]["waivers_as_of"] = "2026-01-30"
        _set_results(members, objects)

    done, said = _verify(_rebundled(tmp_path, "backdated.tar.gz", backdate))
    assert done.returncode == 1, said
    assert "dates: the first result" in said and "the start was moved" in said


def _edited_bundle(tmp_path, source, edit):
    """A copy of the run `source` with `edit(records)` applied, bundled by the kit (its reports rendered
    from the edited results, so only what the edit itself breaks is left to find)."""
    run = tmp_path / "edited"
    shutil.copytree(source, run)
    objects = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    edit(objects)
    (run / "results.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objects))
    return make_bundle(run, tmp_path / "edited.tar.gz").path


def test_results_dated_apart_from_their_traces_clock_are_refused(tmp_path, finished_run):
    def move_last(objects):
        # the last result with a trace: results end in the order their lanes finish, and one without a
        # trace (NOT_APPLICABLE) has no clock to disagree with
        last = [o for o in objects if o["kind"] == "result" and o.get("trace")][-1]
        moved = dt.datetime.fromisoformat(last["finished"]) + dt.timedelta(hours=3)
        last["finished"] = moved.isoformat(timespec="milliseconds")  # its trace's clock says milliseconds
        objects[-1]["finished"] = (moved + dt.timedelta(seconds=1)).isoformat(timespec="milliseconds")

    done, said = _verify(_edited_bundle(tmp_path, finished_run, move_last))
    assert done.returncode == 1, said
    assert said.startswith("bundle rejected: dates: ") and "but its trace's own clock says" in said


def test_a_bundle_from_the_future_is_refused(tmp_path):
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S")

    def future(members):
        objects = _results(members)
        objects[0]["started"] = later + "Z"
        for o in objects[1:]:
            if "finished" in o:
                o["finished"] = later + ".500Z"
        _set_results(members, objects)

    done, said = _verify(_rebundled(tmp_path, "future.tar.gz", future))
    assert done.returncode == 1, said
    assert "is in the future" in said or "before the run it holds ended" in said


@pytest.mark.parametrize("field, value, named", [
    ("kit_version", "9.9.9", "the plan's kit_version '9.9.9' is not this kit's"),
    ("vocabulary", "feedfacefeedface", "the plan's vocabulary 'feedfacefeedface' is not this kit's"),
    ("target", "satellite", "the plan's target 'satellite' is none of this kit's"),
])
def test_plan_fields_this_kit_can_know_are_checked(tmp_path, field, value, named):
    def edit(members):
        objects = _results(members)
        objects[0][field] = value
        _set_results(members, objects)

    done, said = _verify(_rebundled(tmp_path, f"{field}.tar.gz", edit))
    assert done.returncode == 1, said
    assert named in said


def test_fields_verify_cannot_check_are_named_on_the_answer_line(tmp_path):
    def edit(objects):
        objects[0]["target"] = "virtual"
        objects[1]["info"]["npu_feature"] = False

    done, said = _verify(_edited_bundle(tmp_path, d2_run(tmp_path / "d2"), edit))
    assert done.returncode == 2, said
    answer = said.splitlines()[0]
    assert answer.startswith("bundle verifies, but it is not a conformance claim")
    assert "on the submitter's word: target virtual and the run's configuration, the dates" in answer
    assert "npu_feature" in answer and "abis" in answer and "probe_version" in answer


def _sharded_run_that_lost_a_device(tmp_path):
    """A sharded run on two devices, local-lost failing from its first scenario: its plan and record lines."""
    plan = _plan(tmp_path, _corpus("requests.create"))
    execute_run(plan, [_target(tmp_path, "local-a"), _target(tmp_path, "local-lost", FailingAfter, good=0)])
    return plan, (plan.out_dir / "results.jsonl").read_text().splitlines(keepends=True)


@pytest.mark.slow
def test_removing_the_one_lost_record_of_a_sharded_run_hides_no_lost_device(tmp_path, probe_build):
    plan, lines = _sharded_run_that_lost_a_device(tmp_path)
    assert [json.loads(line)["kind"] for line in lines].count("lost") == 1
    (plan.out_dir / "results.jsonl").write_text("".join(line for line in lines if json.loads(line)["kind"] != "lost"))
    assert "lost device local-lost" in claim_of(load_results(plan.out_dir)).headline  # the end record says it too
    bundle = make_bundle(plan.out_dir, tmp_path / "sharded.tar.gz").path
    done, said = _verify(bundle)
    assert done.returncode == 1, said
    assert "the lost devices of the `lost` records and of the end record differ (local-lost)" in said


@pytest.mark.slow
def test_removing_the_end_record_of_a_sharded_run_is_refused(tmp_path, probe_build):
    plan, lines = _sharded_run_that_lost_a_device(tmp_path)
    (plan.out_dir / "results.jsonl").write_text("".join(line for line in lines if json.loads(line)["kind"] != "end"))
    done, said = _verify(make_bundle(plan.out_dir, tmp_path / "sharded.tar.gz").path)
    assert done.returncode == 1, said
    assert "does not end with its end record" in said


def _fifo(tmp_path, name):
    path = tmp_path / name
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", ["trusted-key /dev/zero", "trusted-key fifo", "waivers fifo", "waivers /dev/zero",
                                  "bundle fifo", "bundle /dev/zero"])
def test_fifos_and_devices_are_refused_before_a_byte_is_read(tmp_path, kind):
    bundle = _rebundled(tmp_path, "intact.tar.gz", lambda members: None)
    option, what = kind.split()
    path = "/dev/zero" if what == "/dev/zero" else _fifo(tmp_path, "named")
    args = [path] if option == "bundle" else [bundle, f"--{option}", path]
    started = time.monotonic()
    done = cli("verify", *args, timeout=60)
    assert done.returncode == 3, text(done)
    assert len(text(done).strip().splitlines()) == 1 and "Traceback" not in text(done)
    expected = "not a readable bundle" if option == "bundle" else ("a FIFO" if what == "fifo" else "a character device")
    assert expected in text(done)
    assert time.monotonic() - started < 15


def test_a_results_member_over_its_limit_is_refused_at_its_header(tmp_path):
    def grow(members):
        members["results.jsonl"] += b"\n" * 4096

    bundle = _rebundled(tmp_path, "grown.tar.gz", grow)
    done, said = _verify(bundle, env={"NPUCONF_LIMIT_RESULTS_BYTES": "4096"})
    assert done.returncode == 3, said
    assert "member results.jsonl: it holds" in said and "over limit results_bytes=4096" in said
    assert len(said.strip().splitlines()) == 1


def test_a_results_file_over_its_limit_is_refused_by_every_reader(tmp_path, finished_run):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    for args in (("report", run), ("rejudge", run, "--out", tmp_path / "re"), ("bundle", run)):
        done = cli(*args, env={"NPUCONF_LIMIT_RESULTS_BYTES": "1024"})
        assert done.returncode == 3, text(done)
        assert "over limit results_bytes=1024" in text(done) and len(text(done).strip().splitlines()) == 1
