"""Helpers for the hostile-input suite: a stand-in probe that wraps the real one and turns hostile for
chosen scenarios, run directories made by someone else, and the CLI run as a user would."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adb.conftest import _keep_adb_environment, fleet_factory  # noqa: F401  (fixtures shared with tests/adb)
from tests.conftest import ROOT

# Two scenarios that PASS on the conformant vnpu and need nothing from discovery but the defaults.
FIRST = "requests.create_then_free"
SECOND = "support.empty_list"
SELECT = f"{FIRST} or {SECOND}"

STANDIN = """\
#!{python}
# Stand-in probe: runs the real probe and passes its output through; for the scenarios named in
# its config it adds hostile output just before their `exit` event.
import json, os, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
REAL = {real!r}
config = {config!r}
if "--list" in sys.argv:
    os.execv(REAL, [REAL, *sys.argv[1:]])
child = subprocess.Popen([REAL, *sys.argv[1:]], stdout=subprocess.PIPE)
out, err = sys.stdout.buffer, sys.stderr.buffer

def flood(lines, line=b'{{"ev":"note","text":"flood"}}\\n'):
    block = line * 10000
    for _ in range(lines // 10000):
        out.write(block)
    out.write(line * (lines % 10000))

crash_discovery = config.get("npuconf.discovery") == "crash_in_fallback"
for raw in child.stdout:
    try:
        event = json.loads(raw)
    except ValueError:
        event = {{}}
    if crash_discovery and event.get("op") == "is_supported" and event.get("ev") == "ret":
        # isSupported answered the whole grid, then dies in its first fallback call
        out.write(raw)
        out.write(b'{{"ev":"exit","scenario":"npuconf.discovery","status":"signal","code":null,'
                  b'"signal":"SIGSEGV","t":1}}\\n')
        out.flush()
        child.kill()
        sys.exit(139)
    mode = config.get(event.get("scenario")) if event.get("ev") == "exit" else None
    if mode == "long_line":
        chunk = b"x" * (1 << 20)
        for _ in range(config["size_mb"]):
            out.write(chunk)
        out.write(b"\\n")
    elif mode == "flood":
        flood(config["lines"])
    elif mode == "fat_lines":
        flood(config["lines"], b'{{"ev":"note","text":"' + b"y" * 1000 + b'"}}\\n')
    elif mode == "bad_utf8":
        out.write(b'{{"ev":"note","text":"\\xff\\xfe\\xc3("}}\\n')
    elif mode == "stderr_bad":
        err.write(b"sanitizer-report: \\xff\\xfe not utf-8\\n")
        err.flush()
    elif mode == "stderr_flood":
        for _ in range(config["size_mb"]):
            err.write(b"e" * (1 << 20))
        err.flush()
    elif mode == "fork":
        pid = os.fork()
        if pid == 0:
            os.close(1)
            time.sleep(120)
            os._exit(0)
        open(os.path.join(HERE, "forked.pid"), "w").write(str(pid))
    elif mode == "endless":
        while True:
            flood(100000)
    elif mode == "sleep":
        out.flush()
        time.sleep(config["seconds"])
    out.write(raw)
    out.flush()
sys.exit(child.wait())
"""


def cli(*args, env=None, timeout=300, cwd=None):
    """`npuconf ARGS` in a subprocess; the host state directory is the test's own."""
    return subprocess.run(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=cwd or ROOT,
        capture_output=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})),
        check=False,
    )


def text(done):
    return done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")


def records(run_dir, kind=None):
    lines = (run_dir / "results.jsonl").read_bytes().splitlines()
    return [r for r in map(json.loads, lines) if kind is None or r["kind"] == kind]


def verdicts(run_dir):
    return {r["scenario"]: r for r in records(run_dir, "result")}


@pytest.fixture
def state_env(tmp_path):
    """A private host state directory (runs this 'host' created)."""
    return {"NPUCONF_STATE_DIR": str(tmp_path / "host-state")}


@pytest.fixture
def standin(tmp_path, probe_build):
    """make(config) -> a build directory whose probe wraps the real one and misbehaves as configured."""

    def make(config):
        build = tmp_path / "standin-build"
        build.mkdir(exist_ok=True)
        probe = build / "npuconf-probe"
        # the system Python: on a virtual device the stand-in runs as the unprivileged shell user
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        probe.write_text(STANDIN.format(python=python, real=str(probe_build.probe), config=config))
        probe.chmod(probe.stat().st_mode | stat.S_IXUSR)
        shutil.copy(probe_build.vnpu, build / "libvnpu.so")
        return build

    return make


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, probe_build):
    """A small finished run on the local target (vnpu), to copy and edit. One lane: its results are
    written in the order their traces' clocks end, which the date checks compare record to record."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    state = tmp_path_factory.mktemp("state")
    done = cli("run", "--target", "local", "-j", "1", "-k", SELECT, "--out", run_dir, "-q",
               env={"NPUCONF_STATE_DIR": str(state)})
    assert done.returncode == 0, text(done)
    return run_dir


@pytest.fixture
def run_copy(tmp_path, finished_run):
    """A copy of the finished run, as if it came from another host."""
    copy = tmp_path / "foreign-run"
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


def write_records(path: Path, objects):
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
