"""A run's probes die with it: what an `--impl` starts in a session of its own (`setsid()`, then a second
fork, so it is nobody's child) is killed when its batch ends, and SIGTERM, SIGINT (Ctrl-C to the
terminal's process group, or to the kit alone) and a host error in the middle of a batch (the results
file's write failing, an exception in the kit's main thread) kill the probe that was running as well
as its leftovers."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adb.conftest import records, slow_corpus
from tests.conftest import ROOT, default_sigint, wait_until
from tests.hostile.conftest import cli, text
from tests.vnpu_builds import vnpu_with

pytestmark = pytest.mark.slow

# Every process that loads the library notes its own pid ("loader-PID") and leaves a grandchild in a
# new session that sleeps for two minutes ("left-PID"); the loader waits until the note is written.
LEAVES_A_CHILD = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void note(const char *dir, const char *what, int pid) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%d", dir, what, pid);
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

__attribute__((constructor)) static void leave_a_child(void) {
    const char *dir = getenv("LEFTOVER_DIR");
    if (!dir) return;
    note(dir, "loader", (int)getpid());
    pid_t child = fork();
    if (child == 0) {
        setsid();
        pid_t grandchild = fork();
        if (grandchild == 0) {
            if (getenv("LEFTOVER_CLEAR_ENV")) {
                char *empty[] = {NULL};  /* no environment at all: no token left to find it by */
                execle("/bin/sleep", "sleep", "120", (char *)NULL, empty);
            }
            sleep(120);
            _exit(0);
        }
        note(dir, "left", (int)grandchild);
        _exit(0);
    }
    if (child > 0) waitpid(child, NULL, 0);
}
"""


def _library(tmp_path):
    extra = tmp_path / "leaves_a_child.c"
    extra.write_text(LEAVES_A_CHILD)
    return vnpu_with(extra, tmp_path / "libleaves.so")


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _noted(directory, what):
    return [int(p.name.split("-")[1]) for p in directory.iterdir() if p.name.startswith(f"{what}-")]


@pytest.mark.parametrize("clears_environment", [False, True])
def test_a_setsid_child_of_an_impl_does_not_outlive_the_run(tmp_path, probe_build, clears_environment):
    library = _library(tmp_path)
    leftovers = tmp_path / "leftovers"
    leftovers.mkdir()
    env = {"LEFTOVER_DIR": str(leftovers), **({"LEFTOVER_CLEAR_ENV": "1"} if clears_environment else {})}
    done = cli("run", "--target", "local", "--impl", library, "-k", "requests.create_then_free",
               "--out", tmp_path / "run", "-q", env=env)  # fmt: skip
    assert done.returncode == 0, text(done)
    left = _noted(leftovers, "left")
    assert left, "the library was never loaded with LEFTOVER_DIR"
    time.sleep(0.2)
    assert [pid for pid in left if _alive(pid)] == []


def _started_run(tmp_path, argv_head=(sys.executable, "-m", "host"), **popen):
    """`npuconf run` of 40 slow scenarios (-j 1) on the leaving library; returns (process, leftovers dir,
    run dir) once two results are recorded, so a batch is running."""
    library = _library(tmp_path)
    leftovers = tmp_path / "leftovers"
    leftovers.mkdir()
    scenarios = slow_corpus(tmp_path / "scenarios", count=40, sleep_ms=200)
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), LEFTOVER_DIR=str(leftovers))
    run = subprocess.Popen(
        [*argv_head, "run", "--target", "local", "--impl", str(library), "--scenarios", str(scenarios), "-j", "1",
         "--out", str(run_dir), "-q"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen,
    )  # fmt: skip
    try:
        wait_until(lambda: len(records(run_dir, "result")) >= 2 if (run_dir / "results.jsonl").exists() else False,
                   60, "two results")  # fmt: skip
    except BaseException:
        run.kill()
        run.wait()
        raise
    return run, leftovers


def _ended_with_nothing_left(run, leftovers, signal_it=None):
    """Signal the run (if asked), wait for it, check nothing of the library is left; its stderr."""
    try:
        if signal_it is not None:
            signal_it()
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    loaders, left = _noted(leftovers, "loader"), _noted(leftovers, "left")
    assert loaders and left
    time.sleep(0.2)
    assert [pid for pid in loaders + left if _alive(pid)] == []
    return stderr


def test_sigterm_of_a_run_kills_the_running_probe_and_its_leftovers(tmp_path, probe_build):
    run, leftovers = _started_run(tmp_path)
    _ended_with_nothing_left(run, leftovers, lambda: run.send_signal(signal.SIGTERM))


@pytest.mark.parametrize("to", ["process group", "kit alone"])
def test_sigint_of_a_run_kills_the_running_probe_and_its_leftovers(tmp_path, probe_build, to):
    # In a session of its own, as a shell's foreground job: Ctrl-C reaches the whole process group. A job
    # started in the background ignores SIGINT (and so would a test session started that way): the
    # terminal's job has the default disposition.
    run, leftovers = _started_run(tmp_path, start_new_session=True, preexec_fn=default_sigint)
    interrupt = (lambda: os.killpg(run.pid, signal.SIGINT)) if to == "process group" else (
        lambda: run.send_signal(signal.SIGINT))
    stderr = _ended_with_nothing_left(run, leftovers, interrupt)
    assert run.returncode == 2 and "interrupted" in stderr, stderr


# The same command with one fault put in: the results file's write failing with an I/O error after two
# records, or an exception raised in the kit's main thread (here by SIGUSR1) while a batch runs.
FAULTY = r"""
import errno, signal, sys
from host.run import results_writer
fault = sys.argv.pop(1)
if fault == "results write":
    write, written = results_writer.ResultsWriter.write, []
    def failing(self, record):
        written.append(record)
        if len(written) > 4:
            raise OSError(errno.EIO, "Input/output error", str(self.path))
        write(self, record)
    results_writer.ResultsWriter.write = failing
else:
    def host_error(signum, frame):
        raise RuntimeError("a host error in the main thread")
    signal.signal(signal.SIGUSR1, host_error)
from host.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("fault", ["results write", "main thread"])
def test_a_host_error_mid_batch_kills_the_running_probe_and_its_leftovers(tmp_path, probe_build, fault):
    run, leftovers = _started_run(tmp_path, argv_head=(sys.executable, "-c", FAULTY, fault))
    _ended_with_nothing_left(run, leftovers, (lambda: run.send_signal(signal.SIGUSR1)) if fault == "main thread"
                             else None)  # fmt: skip
