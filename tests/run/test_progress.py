"""Progress lines: a live line per device with ETA on a terminal, sparse plain lines elsewhere, none with -q."""

from __future__ import annotations

import io
import subprocess
import sys

from host.run.progress import Progress, format_duration
from reference_model.verdicts import Verdict


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_terminal_draws_one_line_per_device_with_eta():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, interactive=True, clock=clock)
    clock.now += 2.0
    progress.update("a", Verdict.PASS, 1, 4)  # 2 s per scenario so far: 3 left -> 6 s
    clock.now += 1.0
    progress.update("b", Verdict.FAIL, 1, 2)  # 3 s for one -> 3 s left
    text = out.getvalue()
    assert "[a] 1/4  25%  ETA 0:06  PASS=1\x1b[K\n" in text
    # The second draw goes back over the first (one line) and draws both devices.
    both = (
        "[a] 1/4  25%  ETA 0:09  PASS=1\x1b[K\n[b] 1/2  50%  ETA 0:03  FAIL=1\x1b[K\n"
        "run: 2/6  33%  ETA 0:09  PASS=1 FAIL=1\x1b[K\n"  # two devices: the run's line, its ETA the slower one's
    )
    assert text.endswith("\x1b[1F" + both)
    progress.finish()
    final = "run incomplete: 2/6 in 0:03  PASS=1 FAIL=1  ([a] 1/4, [b] 1/2)\n"
    assert out.getvalue().endswith("\x1b[3F" + both + final)


def test_log_gets_a_line_every_ten_percent():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, interactive=False, clock=clock)
    for done in range(1, 101):
        clock.now += 0.01
        progress.update("dev", Verdict.PASS, done, 100)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[0] == "[dev] 10/100  10%  ETA 0:01  PASS=10"
    assert lines[-1] == "[dev] 100/100 100%  done  PASS=100"
    assert "\x1b" not in out.getvalue()


def test_log_gets_a_line_every_ten_seconds_between_steps():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, interactive=False, clock=clock)
    for done in range(1, 6):  # 5 of 1000: no 10 % step, 4 s apart
        clock.now += 4.0
        progress.update("slow", Verdict.PASS, done, 1000)
    assert out.getvalue().splitlines() == ["[slow] 3/1000   0%  ETA 1:06:28  PASS=3"]
    progress.finish()
    assert out.getvalue().splitlines()[-1] == "run incomplete: 5/1000 in 0:20  PASS=5  ([slow] 5/1000)"


def test_sharded_devices_count_their_share_of_the_run():
    """Four devices sharing one build's 40 scenarios: each shows its share, the run line the total and ETA."""
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, interactive=True, clock=clock)
    for done in range(1, 6):
        for serial in ("d1", "d2", "d3", "d4"):
            clock.now += 0.5 if serial == "d4" else 0.0  # each round drawn once, when its last device reports
            progress.update(serial, Verdict.PASS, done, 40, "build")
    # 20 of 40 in 2.5 s: 20 left -> 2.5 s
    lines = out.getvalue().rsplit("\x1b[5F", 1)[-1].splitlines()
    assert lines[0] == "[d1] ran 5 of the shared 40  PASS=5\x1b[K"
    assert lines[-1] == "run: 20/40  50%  ETA 0:02  PASS=20\x1b[K"
    for done in range(6, 11):
        for serial in ("d1", "d2", "d3", "d4"):
            progress.update(serial, Verdict.PASS, done, 40, "build")
    progress.finish()
    lines = out.getvalue().splitlines()
    assert lines[-2] == "run complete: 40/40  PASS=40\x1b[K"
    assert lines[-1] == "run complete: 40/40 in 0:02  PASS=40  ([d1] 10, [d2] 10, [d3] 10, [d4] 10)"


def test_sharded_log_steps_by_the_run_not_the_device():
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, interactive=False, clock=clock)
    for done in range(1, 51):
        clock.now += 0.01
        progress.update("d1", Verdict.PASS, done, 100, "build")
        progress.update("d2", Verdict.FAIL, done, 100, "build")
    progress.finish()
    lines = out.getvalue().splitlines()
    # A line per 10 % of the run (10..90 %), then the final line; never a device's 50/100 read as half done.
    assert len(lines) == 10
    assert lines[0] == "run: 10/100  10%  ETA 0:00  PASS=5 FAIL=5"
    assert lines[-1] == "run complete: 100/100 in 0:01  PASS=50 FAIL=50  ([d1] 50, [d2] 50)"


def test_format_duration():
    assert [format_duration(s) for s in (None, 0, 59.6, 61, 3725)] == ["--:--", "0:00", "1:00", "1:01", "1:02:05"]


def test_quiet_run_prints_no_progress(tmp_path):
    command = [sys.executable, "-m", "host", "run", "--target", "local", "-k", "allocation.batch_of_one"]
    loud = subprocess.run([*command, "--out", str(tmp_path / "loud")], capture_output=True, text=True, timeout=120)
    quiet = subprocess.run([*command, "-q", "--out", str(tmp_path / "q")], capture_output=True, text=True, timeout=120)
    assert loud.returncode == quiet.returncode == 0, loud.stderr + quiet.stderr
    assert "[local] " in loud.stderr and "100%  done" in loud.stderr
    assert "[local]" not in quiet.stderr
