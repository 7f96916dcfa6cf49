""".ci/setup waits, bounded, for the locks of another package manager (.ci/lib-apt.sh).

The lock is a temporary file locked the way apt locks its own (fcntl F_SETLK, write lock) by a
separate process; the machine's dpkg and apt locks are never touched and nothing is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LIB = ROOT / ".ci" / "lib-apt.sh"
SETUP = ROOT / ".ci" / "setup"

# Holds a write lock like apt's GetLock (fcntl F_SETLK) until its stdin closes.
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def lock_env(tmp_path: Path) -> dict[str, str]:
    """Every lock path of lib-apt.sh pointed into tmp_path, a short poll."""
    env = dict(os.environ)
    env.update(
        NPUCONF_APT_LISTS_LOCK=str(tmp_path / "lists-lock"),
        NPUCONF_DPKG_FRONTEND_LOCK=str(tmp_path / "lock-frontend"),
        NPUCONF_DPKG_LOCK=str(tmp_path / "lock"),
        NPUCONF_APT_LOCK_POLL_S="0.05",
    )
    return env


def hold(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)


def waiter(env: dict[str, str], path: Path, bound: str) -> subprocess.Popen[str]:
    script = f'source "{LIB}"; apt_wait_for_lock "the dpkg lock" "$1"'
    return subprocess.Popen(
        ["bash", "-c", script, "bash", str(path)],
        env={**env, "NPUCONF_APT_LOCK_WAIT_S": bound},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_waits_for_a_held_lock_says_so_and_proceeds_when_it_is_released(lock_env, tmp_path):
    lock = tmp_path / "lock-frontend"
    holder = hold(lock)
    try:
        waiting = waiter(lock_env, lock, "600")
        assert waiting.stderr is not None
        line = waiting.stderr.readline()
        expected = f"setup: waiting up to 600 s for the dpkg lock ({lock}) held by another package manager"
        assert line.startswith(f"{expected} (process {holder.pid} "), line  # the holder's pid and name
        assert waiting.poll() is None  # still waiting while the lock is held
    finally:
        release(holder)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert out == err == ""


def test_gives_up_with_one_clear_line_when_the_bound_passes(lock_env, tmp_path):
    lock = tmp_path / "lock"
    holder = hold(lock)
    try:
        _, err = waiter(lock_env, lock, "1").communicate(timeout=30)
    finally:
        release(holder)
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(f"setup: waiting up to 1 s for the dpkg lock ({lock})")
    assert lines[1].startswith(f"setup: the dpkg lock ({lock}) is still held by another package manager")
    assert lines[1].endswith("after 1 s; let it finish (or raise NPUCONF_APT_LOCK_WAIT_S) and run .ci/setup again")


def test_a_free_or_absent_lock_passes_silently(lock_env, tmp_path):
    free = tmp_path / "lists-lock"
    free.touch()
    for path in (free, tmp_path / "absent"):
        done = waiter(lock_env, path, "600")
        out, err = done.communicate(timeout=30)
        assert (done.returncode, out, err) == (0, "", "")


def test_a_bound_that_is_not_a_number_is_one_line(lock_env, tmp_path):
    done = waiter(lock_env, tmp_path / "lock", "ten")
    _, err = done.communicate(timeout=30)
    assert done.returncode == 1
    assert err == "setup: NPUCONF_APT_LOCK_WAIT_S must be a whole number of seconds, not 'ten'\n"


def test_setup_waits_before_each_apt_step_and_parses():
    assert subprocess.run(["bash", "-n", str(SETUP)]).returncode == 0
    assert subprocess.run(["bash", "-n", str(LIB)]).returncode == 0
    text = SETUP.read_text(encoding="utf-8")
    lists_wait = text.index('apt_wait_for_lock "the apt lists lock" "$APT_LISTS_LOCK"')
    dpkg_wait = text.index('apt_wait_for_lock "the dpkg lock" "$DPKG_FRONTEND_LOCK"')
    assert text.index("source .ci/lib-apt.sh") < lists_wait < text.index("\n  apt-get update -qq") < dpkg_wait
    assert dpkg_wait < text.index('apt-get install -o DPkg::Lock::Timeout="$APT_LOCK_WAIT_S"')
