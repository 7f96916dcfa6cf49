"""Run directories made by someone else: symlinks planted for the kit to write through, names that
would lead outside the directory, plans that name a library to load, plans too large to hold."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, default_sigint
from tests.hostile.conftest import cli, records, text, write_records
from tests.vnpu_builds import vnpu_with

VICTIM_TEXT = "precious\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def assert_untouched(victim):
    assert victim.read_text() == VICTIM_TEXT


@pytest.mark.parametrize("temporary", ["report.html.tmp", "junit.xml.tmp", "summary.json.tmp"])
def test_report_never_writes_through_a_planted_temporary_symlink(run_copy, victim, temporary):
    (run_copy / temporary).symlink_to(victim)
    done = cli("report", run_copy)
    assert done.returncode == 0, text(done)
    assert_untouched(victim)
    assert (run_copy / temporary).is_symlink()  # left alone, never followed
    assert not (run_copy / temporary.removesuffix(".tmp")).is_symlink()


def test_report_replaces_a_symlinked_report_instead_of_writing_through_it(run_copy, victim):
    (run_copy / "report.html").unlink()
    (run_copy / "report.html").symlink_to(victim)
    done = cli("report", run_copy)
    assert done.returncode == 0, text(done)
    assert_untouched(victim)
    assert not (run_copy / "report.html").is_symlink()
    assert "<html" in (run_copy / "report.html").read_text()


def test_output_directory_that_is_a_symlink_is_refused_in_one_line(run_copy, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "rejudged").symlink_to(elsewhere)
    done = cli("rejudge", run_copy, "--out", tmp_path / "rejudged")
    assert done.returncode == 3, text(done)
    assert "is a symlink" in text(done) and "Traceback" not in text(done)
    assert list(elsewhere.iterdir()) == []


def test_bundle_run_id_with_dot_dot_is_refused_and_nothing_is_written_outside(run_copy, tmp_path):
    objects = records(run_copy)
    objects[0]["run_id"] = "../../escaped"
    write_records(run_copy / "results.jsonl", objects)
    done = cli("bundle", run_copy)
    assert done.returncode == 3, text(done)
    assert "run_id '../../escaped' is not a safe name" in text(done)
    assert not list(tmp_path.parent.glob("escaped*")) and not list(tmp_path.glob("escaped*"))


def test_bundle_never_writes_through_a_symlink_at_its_archive_path(run_copy, victim):
    run_id = records(run_copy)[0]["run_id"]
    (run_copy / f"{run_id}.bundle.tar.gz.tmp").symlink_to(victim)
    archive = run_copy / f"{run_id}.bundle.tar.gz"
    archive.symlink_to(victim)
    done = cli("bundle", run_copy)
    assert done.returncode == 0, text(done)
    assert_untouched(victim)
    assert not archive.is_symlink() and archive.stat().st_size > 1000


def test_merge_output_never_writes_through_a_planted_symlink(run_copy, tmp_path, victim):
    out = tmp_path / "merged"
    out.mkdir()
    (out / "results.jsonl.tmp").symlink_to(victim)
    (out / "results.jsonl").symlink_to(victim)
    done = cli("report", run_copy, "--merge", out)
    assert done.returncode == 0, text(done)
    assert_untouched(victim)
    assert not (out / "results.jsonl").is_symlink()


def test_resume_refuses_a_results_file_that_is_a_symlink(run_copy, tmp_path, state_env):
    real = tmp_path / "elsewhere.jsonl"
    lines = (run_copy / "results.jsonl").read_text().splitlines(keepends=True)
    real.write_text("".join(lines[:-2]))  # unfinished: something left to run
    before = real.read_bytes()
    (run_copy / "results.jsonl").unlink()
    (run_copy / "results.jsonl").symlink_to(real)
    done = cli("run", "--resume", run_copy, "-q", env=state_env)
    assert done.returncode == 3, text(done)
    assert "symlink" in text(done)
    assert real.read_bytes() == before


def test_resume_with_a_device_name_leading_outside_is_one_line_and_creates_nothing(tmp_path, state_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = {"kind": "plan", "schema": 1, "run_id": "r1", "started": "2026-01-01T00:00:00", "profile": "published-37",
            "target": "virtual", "devices": ["../../outside"],
            "scenarios": [{"id": "support.empty_list", "title": "t", "chapter": "support", "clauses": []}],
            "options": {}}
    write_records(run_dir / "results.jsonl", [plan])
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 3, text(done)
    assert "planned device '../../outside' is not a safe name" in text(done)
    assert not (tmp_path / "outside").exists() and not (tmp_path.parent / "outside").exists()
    assert not (run_dir / "virtual-devices").exists()


def _library_with_constructor(tmp_path, probe_build):
    """libvnpu plus a constructor that leaves a marker: proof of being loaded."""
    marker = tmp_path / "LOADED"
    extra = tmp_path / "hostile_ctor.c"
    extra.write_text(
        '#include <stdio.h>\n'
        f'__attribute__((constructor)) static void hostile(void) {{ FILE *f = fopen("{marker}", "w"); '
        'if (f) { fputs("loaded", f); fclose(f); } }\n'
    )
    library = vnpu_with(extra, tmp_path / "libhostile.so")
    return library, marker


def _unfinished(run_dir):
    """Drop the last result and the end record: the run has something left to resume."""
    objects = records(run_dir)
    kept = [o for o in objects if o["kind"] != "end"]
    kept.pop()
    write_records(run_dir / "results.jsonl", kept)


@pytest.mark.slow
def test_resume_of_a_foreign_directory_never_loads_the_library_its_plan_names(tmp_path, run_copy, probe_build,
                                                                             state_env):
    library, marker = _library_with_constructor(tmp_path, probe_build)
    objects = records(run_copy)
    objects[0]["options"]["impl"] = str(library)
    objects[0]["target"] = "local"
    write_records(run_copy / "results.jsonl", objects)
    _unfinished(run_copy)
    done = cli("run", "--resume", run_copy, "-q", env=state_env)
    assert done.returncode == 3, text(done)
    assert "this host did not create the run directory" in text(done) and "--impl" in text(done)
    assert not marker.exists()


@pytest.mark.slow
def test_resume_of_a_foreign_directory_with_another_impl_is_refused(tmp_path, run_copy, probe_build, state_env):
    library, marker = _library_with_constructor(tmp_path, probe_build)
    objects = records(run_copy)
    objects[0]["options"]["impl"] = str(library)
    write_records(run_copy / "results.jsonl", objects)
    _unfinished(run_copy)
    done = cli("run", "--resume", run_copy, "--impl", probe_build.vnpu, "-q", env=state_env)
    assert done.returncode == 3, text(done)
    assert "is not the run's library" in text(done)
    assert not marker.exists()


@pytest.mark.slow
def test_resume_of_own_run_with_impl_needs_no_impl_again(tmp_path, probe_build, state_env, standin):
    """An interrupted run of this user's, in its registered directory: its library loads again unasked."""
    run_dir = tmp_path / "own"
    build = standin({"support.empty_list": "sleep", "seconds": 60})
    # default_sigint: a test session started in the background would pass its ignored SIGINT on
    running = subprocess.Popen(
        [sys.executable, "-m", "host", "run", "--target", "local", "--impl", probe_build.vnpu, "--build-dir", build,
         "-k", "support.empty_list", "--out", run_dir, "-q"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), **state_env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    # interrupted once the plan and the device's record are written (the plan's line alone may reach the file
    # a moment before the run counts its plan as written, which a loaded host makes long)
    while (not (run_dir / "results.jsonl").is_file() or (run_dir / "results.jsonl").read_bytes().count(b"\n") < 2
           or not (run_dir / ".npuconf-host").is_file()):
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.05)
    running.send_signal(signal.SIGINT)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 2, err
    assert (run_dir / ".npuconf-host").is_file()
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 0, text(done)
    assert [r["verdict"] for r in records(run_dir, "result")] == ["PASS"]
    assert not (run_dir / ".npuconf-host").exists()  # finished: forgotten


@pytest.mark.slow
def test_resume_of_a_foreign_directory_with_the_same_impl_confirmed_runs(tmp_path, probe_build, state_env):
    run_dir = tmp_path / "theirs"
    done = cli("run", "--target", "local", "--impl", probe_build.vnpu, "-k", "support.empty_list",
               "--out", run_dir, "-q", env={"NPUCONF_STATE_DIR": str(tmp_path / "other-host")})
    assert done.returncode == 0, text(done)
    _unfinished(run_dir)
    refused = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert refused.returncode == 3, text(refused)
    done = cli("run", "--resume", run_dir, "--impl", probe_build.vnpu, "-q", env=state_env)
    assert done.returncode == 0, text(done)
    assert [r["verdict"] for r in records(run_dir, "result")] == ["PASS"]


def test_plan_declaring_too_many_pairs_is_refused_in_one_line(tmp_path):
    run_dir = tmp_path / "huge"
    run_dir.mkdir()
    plan = {"kind": "plan", "schema": 1, "run_id": "huge", "started": "2026-01-01T00:00:00",
            "profile": "published-37", "target": "adb", "devices": [f"d{i}" for i in range(1000)],
            "scenarios": [{"id": f"s.{i}", "title": "t", "chapter": "s", "clauses": []} for i in range(1000)],
            "options": {}}
    write_records(run_dir / "results.jsonl", [plan])
    done = cli("report", run_dir)
    assert done.returncode == 3, text(done)
    assert "plan_entries=32768" in text(done) and "1000 scenarios x 1000 devices" in text(done)
    assert len(text(done).strip().splitlines()) == 1
    assert not (run_dir / "report.html").exists()


def test_control_characters_from_run_data_never_reach_the_console(tmp_path, state_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    evil = "\x1b[2J\x1b]0;bundle verifies\x07dev"
    plan = {"kind": "plan", "schema": 1, "run_id": "r1", "started": "2026-01-01T00:00:00", "profile": "published-37",
            "target": "adb", "devices": [evil],
            "scenarios": [{"id": "support.empty_list", "title": "t", "chapter": "support", "clauses": []}],
            "options": {}}
    write_records(run_dir / "results.jsonl", [plan])
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 3
    output = done.stdout + done.stderr
    assert b"\x1b" not in output and b"\x07" not in output
    assert b"\\x1b[2J" in output


def test_lone_surrogate_in_a_device_value_is_recorded_not_a_crash(tmp_path):
    from host.run.results_writer import ResultsWriter
    from reports.recorded.records import DeviceRecord
    from reports.recorded.results import load_results

    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as writer:
        writer.write(DeviceRecord("d\ud800", {"model": "m\udcff"}))
        writer.write(DeviceRecord("next", {}))
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["device"] for line in lines] == ["d\ud800", "next"]
    assert set(load_results(path).devices) == {"d\ud800", "next"}


def test_kit_error_output_stays_one_line_for_a_device_name_with_newlines(tmp_path, state_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = {"kind": "plan", "schema": 1, "run_id": "r1", "started": "2026-01-01T00:00:00", "profile": "published-37",
            "target": "adb", "devices": ["dev\r\nnpuconf: bundle verifies"],
            "scenarios": [{"id": "support.empty_list", "title": "t", "chapter": "support", "clauses": []}],
            "options": {}}
    write_records(run_dir / "results.jsonl", [plan])
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 3
    assert len(done.stderr.decode().strip().splitlines()) == 1, done.stderr
    assert os.linesep.encode() + b"npuconf: bundle verifies" not in done.stderr


def test_verify_prints_device_strings_of_a_bundle_without_terminal_escapes(run_copy, tmp_path):
    evil = "dev\x1b[2J\x1b]0;bundle verifies\x07"
    objects = records(run_copy)
    for record in objects:
        if record["kind"] == "result":
            record["device"] = evil
    write_records(run_copy / "results.jsonl", objects)
    archive = tmp_path / "evil.bundle.tar.gz"
    assert cli("bundle", run_copy, "--out", archive).returncode == 0
    done = cli("verify", archive)
    assert done.returncode == 1, text(done)
    output = done.stdout + done.stderr
    assert b"bundle rejected" in output
    assert b"\x1b" not in output and b"\x07" not in output
    assert b"dev\\x1b[2J" in output


@pytest.mark.parametrize("options, named", [
    ({"jobs": 1000000}, "-j 1000000"),
    ({"timeout_multiplier": 1e6}, "--timeout-multiplier 1000000.0"),
    ({"timeout_multiplier": float("nan")}, "--timeout-multiplier nan"),
    ({"jobs": "8"}, "plan option jobs (-j) is '8', not an integer"),
])
def test_resume_bounds_the_numbers_a_foreign_plan_asks_for(tmp_path, state_env, options, named):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = {"kind": "plan", "schema": 1, "run_id": "r1", "started": "2026-01-01T00:00:00", "profile": "published-37",
            "target": "local", "devices": ["local"],
            "scenarios": [{"id": "support.empty_list", "title": "t", "chapter": "support", "clauses": []}],
            "options": options}
    write_records(run_dir / "results.jsonl", [plan])
    started = time.monotonic()
    done = cli("run", "--resume", run_dir, "-q", env=state_env, timeout=60)
    assert done.returncode == 3, text(done)
    assert named in text(done) and str(run_dir) in text(done)
    assert len(text(done).strip().splitlines()) == 1
    assert time.monotonic() - started < 30


def test_resume_bounds_the_number_of_devices_a_foreign_plan_lists(tmp_path, state_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = {"kind": "plan", "schema": 1, "run_id": "r1", "started": "2026-01-01T00:00:00", "profile": "published-37",
            "target": "virtual", "devices": [f"vd{i}" for i in range(500)],
            "scenarios": [{"id": "support.empty_list", "title": "t", "chapter": "support", "clauses": []}],
            "options": {}}
    write_records(run_dir / "results.jsonl", [plan])
    done = cli("run", "--resume", run_dir, "-q", env=state_env, timeout=60)
    assert done.returncode == 3, text(done)
    assert "--devices 500" in text(done) and len(text(done).strip().splitlines()) == 1
    assert not (run_dir / "virtual-devices").exists()


def test_bidirectional_override_from_run_data_never_reaches_the_console_raw(run_copy, state_env):
    objects = records(run_copy)
    plan = next(o for o in objects if o["kind"] == "plan")
    plan["options"]["keyword"] = "free\u202eSSAP\u2066x\u200b"
    write_records(run_copy / "results.jsonl", objects)
    done = cli("run", "--resume", run_copy, "-q", env=state_env)
    output = (done.stdout + done.stderr).decode()
    assert done.returncode in (0, 1), output
    assert not {"\u202e", "\u2066", "\u200b"} & set(output), output
    assert "free\\u202eSSAP\\u2066x\\u200b" in output


@pytest.mark.parametrize("command", ["report", "store import", "bundle", "rejudge"])
def test_a_results_file_that_is_a_symlink_is_never_read(run_copy, tmp_path, command):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = private / "results.jsonl"
    os.rename(run_copy / "results.jsonl", secret)  # a real run's records: readable if followed
    os.symlink(secret, run_copy / "results.jsonl")
    for report in ("report.html", "summary.json", "junit.xml"):
        (run_copy / report).unlink(missing_ok=True)
    args = {
        "report": ["report", run_copy],
        "store import": ["store", "import", "--store", tmp_path / "s.sqlite", run_copy],
        "bundle": ["bundle", run_copy, "--out", tmp_path / "b.tar.gz"],
        "rejudge": ["rejudge", run_copy, "--out", tmp_path / "rejudged"],
    }[command]
    done = cli(*args)
    output = text(done)
    assert done.returncode != 0 and "Traceback" not in output, output
    assert "is a symlink; the kit never reads a run's results through one" in output, output
    assert not (run_copy / "report.html").exists() and not (tmp_path / "b.tar.gz").exists()
    assert not (tmp_path / "rejudged").exists() or not any((tmp_path / "rejudged").rglob("results.jsonl"))
