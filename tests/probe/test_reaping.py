"""host/probe/reaping.py: a batch's leftovers are killed, and nothing else is, even while other lanes
are starting their own probes. Between fork and exec, a probe another lane is starting holds every
descriptor of the kit, the ending batch's marker among them (close-on-exec): killing and reaping it
ended that lane's batch with "probe process ended unexpectedly (exit status 0)" and no trace, and while
it was still in the kit's session, killing its group killed the kit (and a test session) itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from host.probe.reaping import BATCH_TOKEN_VAR, batch_fds, end_batch, kill_orphans, new_batch_token

_SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


# A kit (this script, in a session of its own) with a batch's marker open forks a child that does not
# exec: the child holds every descriptor of the kit, close-on-exec, as a child another lane is starting
# holds them between its fork and its exec. Run apart, so a kit that kills its own group kills only it.
_KIT = """
import json, os, sys, time
from host.probe.reaping import end_batch, kill_orphans, new_batch_token
token = new_batch_token()
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "own-session":
        os.setsid()
    time.sleep(30)
    os._exit(0)
time.sleep(0.3)
killed = kill_orphans(token)
alive = os.waitpid(pid, os.WNOHANG) == (0, 0)
os.kill(pid, 9)
end_batch(token)
print(json.dumps({"killed": killed, "alive": alive}))
"""


@pytest.mark.parametrize("where", ["kit-session", "own-session"])
def test_a_child_holding_the_kits_descriptors_before_its_exec_is_not_a_leftover(where):
    done = subprocess.run([sys.executable, "-c", _KIT, where], capture_output=True, text=True, timeout=60,
                          start_new_session=True, check=False)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert json.loads(done.stdout) == {"killed": 0, "alive": True}


def test_a_leftover_holding_the_marker_or_the_token_is_killed():
    token = new_batch_token()
    try:
        by_marker = subprocess.Popen(_SLEEPER, start_new_session=True, pass_fds=batch_fds(token),
                                     env={"PATH": os.environ.get("PATH", "")})  # fmt: skip
        by_token = subprocess.Popen(_SLEEPER, start_new_session=True, env={**os.environ, BATCH_TOKEN_VAR: token})
        bystander = subprocess.Popen(_SLEEPER, start_new_session=True)
        time.sleep(0.3)
        assert kill_orphans(token) == 2
        by_marker.wait(timeout=5)  # killed and reaped by kill_orphans: no 30 s sleep left to wait for
        by_token.wait(timeout=5)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
        end_batch(token)


def test_stopping_the_run_while_a_lane_ends_its_batch_never_reads_a_closed_marker(monkeypatch):
    """Ctrl-C kills every running batch's leftovers from the main thread while a lane may be ending its
    own batch: the stopping thread looked the marker's descriptor up, the lane closed it, and the
    stopping thread's fstat of it ended the run in a traceback (EBADF) instead of "run incomplete".
    Here the lane ends the batch at the worst moment: just before any descriptor is examined."""
    token = new_batch_token()
    real_fstat = os.fstat

    def lane_ends_the_batch_first(fd):
        end_batch(token)
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", lane_ends_the_batch_first)
    assert kill_orphans(token) == 0
    end_batch(token)
