"""Shared fixtures for the kit's own tests."""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def wait_until(predicate, timeout, what):
    """The first true value of ``predicate()``, polled every 50 ms for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def jsonl_records(path: Path, kind: str) -> list[dict]:
    """The records of one kind in a JSON-lines file another process may be appending to (a partial last
    line is skipped)."""
    if not path.is_file():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        if record.get("kind") == kind:
            found.append(record)
    return found


def npuconf_interruptible(*args: object) -> subprocess.Popen[str]:
    """The real CLI in a subprocess that a test will send SIGINT (Ctrl-C) to."""
    return subprocess.Popen(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=default_sigint,
    )  # fmt: skip


def default_sigint() -> None:
    # A test session started in the background (nohup, `&` without job control) ignores SIGINT, and a
    # Python started with SIGINT ignored never raises KeyboardInterrupt: give the child the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# The kit's own command as it prints it in replay and resume lines (reports/recorded/run_options.py npuconf_words):
# the npuconf script beside the interpreter running the tests, by its absolute path.
PRINTED_NPUCONF = shlex.quote(os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "npuconf"))


def paste(line: str, cwd: Path, timeout=300):
    """A command line the kit printed, pasted as is into `bash -c` in ``cwd``, in the shell the README leaves
    a user in: the kit's venv not on PATH, not activated, no PYTHONPATH."""
    venv_bin = os.path.dirname(os.path.abspath(sys.executable))
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and os.path.abspath(p) != venv_bin)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"PATH": path}
    assert subprocess.run(["bash", "-c", "command -v npuconf"], env=env, capture_output=True).returncode != 0
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def npuconf(*args, cwd=None, timeout=300):
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )


@pytest.fixture(scope="session")
def probe_build():
    """The host build of the probe and libvnpu (made here when missing or stale; .ci/setup normally did it)."""
    from host.probe import DEFAULT_BUILD_DIR, current_build

    return current_build(DEFAULT_BUILD_DIR)


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """One `npuconf run` made once for the whole test session: its directory, exit code and output.

    The directory is shared by every test (and xdist worker) that asked for the same options: read it,
    never write into it (no `report`, `rejudge`, `bundle` without `--out`, no edits); `copy` gives a
    private copy to change."""

    path: Path
    returncode: int
    stdout: str
    stderr: str

    def copy(self, dest: Path) -> Path:
        shutil.copytree(self.path, dest, symlinks=True)
        return dest


class SharedRuns:
    """Whole-corpus runs made once per configuration for the session, across xdist workers.

    A configuration is the list of `npuconf run` options (plus the files `inputs` names, by content). The
    first test that asks runs it under a file lock in a directory every worker of the session shares;
    the others wait for that run and read the same directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def run(self, *options: object, inputs: tuple[Path, ...] = ()) -> SharedRun:
        words = [str(o) for o in options]
        digest = hashlib.sha256("\0".join(words).encode())
        for path in inputs:
            digest.update(path.read_bytes())
        home = self.root / digest.hexdigest()[:16]
        home.mkdir(exist_ok=True)
        with self._locked(home):
            done = home / "done.json"
            if not done.is_file():
                out = home / "run"
                store = [] if "--store" in words else ["--store", str(home / "store.sqlite")]
                finished = npuconf("run", *words, "--out", out, "-q", *store)
                done.write_text(json.dumps({"returncode": finished.returncode, "stdout": finished.stdout,
                                            "stderr": finished.stderr}))
            facts = json.loads(done.read_text())
        return SharedRun(home / "run", facts["returncode"], facts["stdout"], facts["stderr"])

    def file(self, name: str, make) -> Path:
        """A file made once for the session by `make(path)` (a library the shared runs load)."""
        path = self.root / name
        with self._locked(self.root / f".{name}"):
            if not path.exists():
                make(path)
        return path

    @contextlib.contextmanager
    def _locked(self, where: Path):
        lock = where.with_name(where.name + ".lock")
        with open(lock, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory) -> SharedRuns:
    """The session's shared runs (see SharedRuns); under xdist, one directory for all the workers."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # popen-gw<N>'s parent: the session's own directory, shared by its workers
    return SharedRuns(base / "shared-runs")


SKELETON_SOURCE = ROOT / "examples" / "skeleton" / "npu_refuse_all.c"


def build_skeleton(library: Path) -> Path:
    """examples/skeleton built with the command docs/guide.md gives (plus -fvisibility=hidden)."""
    subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
         "-I", str(ROOT / "ndk_probe" / "include"), "-o", str(library), str(SKELETON_SOURCE)],
        check=True, capture_output=True,
    )  # fmt: skip
    return library


@pytest.fixture(scope="session")
def aosp_twin_run(shared_runs, probe_build) -> SharedRun:
    """The whole corpus on the virtual NPU with the aosp-2026 personality (FAILs under published-37)."""
    run = shared_runs.run("--target", "local", "--personality", "aosp-2026")
    assert run.returncode == 1, run.stdout + run.stderr
    return run


@pytest.fixture(scope="session")
def skeleton_corpus_run(shared_runs, probe_build) -> SharedRun:
    """The refuse-everything skeleton over the whole corpus: passes what applies, incomplete (exit 2)."""
    library = shared_runs.file("libnpu_refuse_all.so", build_skeleton)
    run = shared_runs.run("--target", "local", "--impl", library, inputs=(SKELETON_SOURCE,))
    assert run.returncode == 2, run.stdout + run.stderr
    return run


@pytest.fixture(scope="session")
def published_run(shared_runs, probe_build) -> SharedRun:
    """The whole corpus on the published virtual NPU with the default options: conformant."""
    run = shared_runs.run("--target", "local")
    assert run.returncode == 0, run.stdout + run.stderr
    return run
