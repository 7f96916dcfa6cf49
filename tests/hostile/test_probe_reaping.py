"""A run's probes die with it: what an `--impl` starts in a session of its own (`setsid()`, then a second
fork, so it is nobody's child) is killed when its batch ends, and SIGTERM of `npuconf run` kills the
probe that was running as well as its leftovers."""

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.adb.conftest import npuconf_popen, records, slow_corpus
from tests.conftest import wait_until
from tests.hostile.conftest import cli, text, vnpu_with

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


def test_sigterm_of_a_run_kills_the_running_probe_and_its_leftovers(tmp_path, probe_build):
    library = _library(tmp_path)
    leftovers = tmp_path / "leftovers"
    leftovers.mkdir()
    scenarios = slow_corpus(tmp_path / "scenarios", count=40, sleep_ms=200)
    run_dir = tmp_path / "run"
    env = dict(os.environ, LEFTOVER_DIR=str(leftovers))
    run = npuconf_popen("run", "--target", "local", "--impl", library, "--scenarios", scenarios, "-j", "1",
                        "--out", run_dir, "-q", env=env)  # fmt: skip
    try:
        wait_until(lambda: len(records(run_dir, "result")) >= 2 if (run_dir / "results.jsonl").exists() else False,
                   60, "two results")  # fmt: skip
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    loaders, left = _noted(leftovers, "loader"), _noted(leftovers, "left")
    assert loaders and left
    time.sleep(0.2)
    assert [pid for pid in loaders + left if _alive(pid)] == []


def test_a_batch_end_spares_a_probe_another_lane_is_starting():
    """Between fork and exec, a probe another lane is starting holds every descriptor of the kit, this
    batch's marker among them (close-on-exec). Killing and reaping it ended that lane's batch with "probe
    process ended unexpectedly (exit status 0)" and no trace (its Popen then finds no child to wait for):
    the retried scenarios of interposer runs with -j 4 came back ERROR. Only a process outside the kit's
    session that holds the marker inheritably (or carries the token) is this batch's leftover."""
    from host.probe.reaping import batch_fds, end_batch, kill_orphans, new_batch_token

    token = new_batch_token()
    (marker,) = batch_fds(token)
    children = {}
    try:
        for name, in_new_session, inheritable in (
            ("starting, in the kit's session", False, False),
            ("starting, in a session of its own", True, False),
            ("leftover", True, True),
        ):
            ready_r, ready_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                if in_new_session:
                    os.setsid()
                else:
                    os.setpgid(0, 0)  # a group of its own, so a kill of its group spares the test
                if inheritable:
                    os.set_inheritable(marker, True)
                os.write(ready_w, b"x")
                time.sleep(30)
                os._exit(0)
            os.close(ready_w)
            os.read(ready_r, 1)
            os.close(ready_r)
            children[name] = pid
        assert kill_orphans(token) == 1
        for name, pid in children.items():
            try:
                alive = os.waitpid(pid, os.WNOHANG)[0] == 0
            except ChildProcessError:
                alive = False  # killed and reaped by kill_orphans
            assert alive == (name != "leftover"), name
    finally:
        for pid in children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        end_batch(token)
