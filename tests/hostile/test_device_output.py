"""Hostile device output on the local target: over-long lines, floods, invalid UTF-8, stderr, forks.

A stand-in probe wraps the real one (so every other scenario runs for real and PASSes) and misbehaves
just before the `exit` event of the first scenario."""

import os
import time

import pytest

from tests.hostile.conftest import FIRST, SECOND, SELECT, cli, records, text, verdicts

pytestmark = pytest.mark.slow


def run_standin(standin, tmp_path, config, env=None, timeout=300):
    build = standin(config)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    done = cli("run", "--target", "local", "--build-dir", build, "-k", SELECT, "--out", run_dir, "-q",
               env=env, timeout=timeout)
    return run_dir, done, time.monotonic() - started


def test_over_long_trace_line_is_error_naming_the_limit_and_is_not_stored(standin, tmp_path):
    run_dir, done, _ = run_standin(standin, tmp_path, {FIRST: "long_line", "size_mb": 8})
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR"
    assert "trace_line_bytes=1048576" in got[FIRST]["reason"]
    assert got[SECOND]["verdict"] == "PASS"
    assert (run_dir / "results.jsonl").stat().st_size < 200_000
    assert (run_dir / "report.html").stat().st_size < 2_000_000
    assert (run_dir / "junit.xml").stat().st_size < 2_000_000


def test_line_flood_past_trace_lines_is_error_and_later_scenarios_still_run(standin, tmp_path):
    run_dir, done, _ = run_standin(standin, tmp_path, {FIRST: "flood", "lines": 5000},
                                   env={"NPUCONF_LIMIT_TRACE_LINES": "1000"})
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR"
    assert "trace_lines=1000" in got[FIRST]["reason"]
    assert len(got[FIRST]["trace"]) <= 1002  # the limit, the closing event and the host's error marker
    assert got[SECOND]["verdict"] == "PASS"


def test_trace_bytes_past_the_limit_is_error_naming_trace_bytes(standin, tmp_path):
    run_dir, done, _ = run_standin(standin, tmp_path, {FIRST: "fat_lines", "lines": 300},
                                   env={"NPUCONF_LIMIT_TRACE_BYTES": "100000"})
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR"
    assert "trace_bytes=100000" in got[FIRST]["reason"]
    assert sum(len(line) for line in got[FIRST]["trace"]) <= 100_000 + 2000
    assert got[SECOND]["verdict"] == "PASS"


def test_invalid_utf8_line_is_error_for_that_scenario_only_and_fast(standin, tmp_path):
    run_dir, done, elapsed = run_standin(standin, tmp_path, {FIRST: "bad_utf8"})
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR"
    assert "not valid UTF-8" in got[FIRST]["reason"]
    assert got[SECOND]["verdict"] == "PASS"
    assert elapsed < 30  # no reader thread died: nothing waited for a watchdog


def test_invalid_utf8_on_stderr_is_kept_in_probe_stderr_log(standin, tmp_path):
    run_dir, done, _ = run_standin(standin, tmp_path, {FIRST: "stderr_bad"})
    assert done.returncode == 0, text(done)
    log = (run_dir / "probe-stderr.log").read_bytes()
    assert b"sanitizer-report: \xef\xbf\xbd\xef\xbf\xbd not utf-8" in log
    assert {r["verdict"] for r in records(run_dir, "result")} == {"PASS"}


def test_stderr_flood_is_kept_up_to_stderr_bytes_with_a_note(standin, tmp_path):
    run_dir, done, _ = run_standin(standin, tmp_path, {FIRST: "stderr_flood", "size_mb": 6},
                                   env={"NPUCONF_LIMIT_STDERR_BYTES": "1000000"})
    assert done.returncode == 0, text(done)
    log = (run_dir / "probe-stderr.log").read_bytes()
    assert 1_000_000 <= len(log) <= 1_001_000
    assert b"stderr_bytes=1000000" in log


def test_endless_flood_without_exit_is_error_within_the_scenario_limit(standin, tmp_path):
    # requests.create_then_free has a 5 s limit (+2 s settle, +10 s host slack): ERROR well before 60 s.
    run_dir, done, elapsed = run_standin(standin, tmp_path, {FIRST: "endless"},
                                         env={"NPUCONF_LIMIT_TRACE_LINES": "1000"}, timeout=120)
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR"
    assert "trace_lines=1000" in got[FIRST]["reason"] and "killed" in got[FIRST]["reason"]
    assert elapsed < 60


def test_process_forked_during_a_scenario_does_not_survive_the_batch(standin, tmp_path):
    _, done, _ = run_standin(standin, tmp_path, {FIRST: "fork"})
    assert done.returncode == 0, text(done)
    pid = int((tmp_path / "standin-build" / "forked.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as stat_file:  # a zombie awaiting its reaper counts as gone
            if stat_file.read().split(") ", 1)[1].startswith("Z"):
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {pid} forked by the implementation is still alive")


def test_hostile_output_over_adb_is_error_for_its_scenario_only(standin, tmp_path, fleet_factory):
    """The same byte-level reading on the adb target: a virtual device running the stand-in probe."""
    build = standin({FIRST: "long_line", "size_mb": 3, SECOND: "bad_utf8"})
    server = fleet_factory(1).fleet.server.address
    run_dir = tmp_path / "run"
    done = cli("run", "--target", "adb", "--adb-server", server, "--build-dir", build,
               "-k", f"{SELECT} or support.mixed_list", "--out", run_dir, "-q", timeout=180)
    assert done.returncode == 2, text(done)
    got = verdicts(run_dir)
    assert got[FIRST]["verdict"] == "ERROR" and "trace_line_bytes=1048576" in got[FIRST]["reason"]
    assert got[SECOND]["verdict"] == "ERROR" and "not valid UTF-8" in got[SECOND]["reason"]
    others = [r["verdict"] for s, r in got.items() if s not in (FIRST, SECOND)]
    assert others == ["PASS"]


def _bench():
    import importlib.util

    from tests.hostile.conftest import ROOT

    spec = importlib.util.spec_from_file_location("bench_hostile", ROOT / "bench" / "bench_hostile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("mode", "amount", "limit"), [("line", 100, "trace_line_bytes"), ("flood", 3_000_000,
                                                                                         "trace_lines")])
def test_host_memory_stays_under_200_mb_for_a_100_mb_line_and_3_million_lines(tmp_path, probe_build, mode, amount,
                                                                               limit):
    bench = _bench()
    row = bench.measure(tmp_path, bench.standin(tmp_path, probe_build, mode, amount), mode)
    assert row["exit"] == 2
    assert row["verdicts"][FIRST][0] == "ERROR" and limit in row["verdicts"][FIRST][1]
    assert row["verdicts"][SECOND][0] == "PASS"
    assert row["peak_mb"] < 200, row
