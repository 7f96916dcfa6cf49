"""What another local user leaves at a path the kit would use is never trusted (issue 39): a run directory
recreated where root's was, with root's old token; a SQLite file planted at the default store path; an
`out/` or a state directory of theirs. Each attack runs as `nobody`, in a directory every user may write
(a sticky 1777 directory, as /tmp is), against a run of root's."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.hostile.conftest import SECOND, cli, records, text, write_records

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="one local user against another's run needs root")
PYTHON = "/usr/bin/python3"  # world-executable, unlike the checkout's virtualenv under /root


def _as_nobody():
    nobody = pwd.getpwnam("nobody")

    def drop() -> None:
        os.setgroups([])
        os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
        os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)

    return drop


def as_nobody(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PYTHON, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=30,
                          preexec_fn=_as_nobody(), check=False, cwd="/")
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def shared():
    """A directory every local user may write, sticky like /tmp."""
    path = Path(tempfile.mkdtemp(prefix="npuconf-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def state(tmp_path):
    return {"NPUCONF_STATE_DIR": str(tmp_path / "root-state")}


RECREATE = r"""
import os, sys
run, token, results = sys.argv[1:4]
os.mkdir(run, 0o755)
with open(os.path.join(run, ".npuconf-host"), "w") as handle:
    handle.write(token + "\n")
with open(results) as source, open(os.path.join(run, "results.jsonl"), "w") as handle:
    handle.write(source.read())
"""


def _plan_naming(library, finished_run):
    """The finished run's records, with something left to resume, run on the local target with `library`."""
    objects = [o for o in records(finished_run) if o["kind"] != "end"][:-1]
    objects[0]["target"], objects[0]["options"]["impl"] = "local", str(library)
    device = f"local:{library.name}"
    objects[0]["devices"] = [device]
    for record in objects[1:]:
        record["device"] = device
    return objects


@pytest.mark.slow
def test_a_run_directory_recreated_with_roots_token_never_loads_the_planted_library(
    shared, state, tmp_path, finished_run, probe_build, monkeypatch
):
    from tests.hostile.test_foreign_run_dirs import _library_with_constructor

    library, loaded = _library_with_constructor(tmp_path, probe_build)
    run = shared / "run"
    run.mkdir()
    monkeypatch.setenv("NPUCONF_STATE_DIR", state["NPUCONF_STATE_DIR"])
    from host.run.ownership import claim

    token = claim(run)  # root's run directory, registered as `npuconf run` registers it
    shutil.rmtree(run)  # gone (cleaned up, or moved away by whoever may write in its directory)
    objects = _plan_naming(library, finished_run)
    planted = shared / "planted.jsonl"
    write_records(planted, objects)
    planted.chmod(0o644)
    as_nobody(RECREATE, run, token, planted)  # they know root's token: it was world-readable before
    assert os.stat(run).st_uid == pwd.getpwnam("nobody").pw_uid
    done = cli("run", "--resume", run, "-q", env=state)
    assert done.returncode == 3, text(done)
    assert "belongs to uid" in text(done) and "Traceback" not in text(done)
    assert len(text(done).strip().splitlines()) == 1
    assert not loaded.exists()


@pytest.mark.slow
def test_a_run_directory_swapped_for_another_owned_by_root_is_not_the_registered_one(
    state, tmp_path, finished_run, probe_build, monkeypatch
):
    """Same owner, same path, same token: another inode is another directory."""
    from tests.hostile.test_foreign_run_dirs import _library_with_constructor

    library, loaded = _library_with_constructor(tmp_path, probe_build)
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("NPUCONF_STATE_DIR", state["NPUCONF_STATE_DIR"])
    from host.run.ownership import MARKER, claim

    token = claim(run)
    run.rename(tmp_path / "moved-away")
    run.mkdir()
    (run / MARKER).write_text(token + "\n")
    (run / MARKER).chmod(0o600)
    objects = _plan_naming(library, finished_run)
    write_records(run / "results.jsonl", objects)
    done = cli("run", "--resume", run, "-q", env=state)
    assert done.returncode == 3, text(done)
    assert "another inode" in text(done)
    assert not loaded.exists()


def test_a_runs_token_is_private_and_a_finished_run_is_forgotten(shared, state):
    run = shared / "run"
    done = cli("run", "--target", "local", "-k", SECOND, "--out", run, "-q", env=state)
    assert done.returncode == 0, text(done)
    registry = Path(state["NPUCONF_STATE_DIR"]) / "runs"
    assert not (run / ".npuconf-host").exists()  # finished: nothing to resume, nothing to trust
    assert not registry.exists() or not list(registry.iterdir())
    assert stat.S_IMODE(os.stat(state["NPUCONF_STATE_DIR"]).st_mode) == 0o700


READ = r"""
import sys
try:
    print(open(sys.argv[1]).read().strip())
except OSError as exc:
    print("REFUSED", exc.errno)
"""


def test_an_unfinished_runs_token_cannot_be_read_by_another_user(shared, state, monkeypatch):
    run = shared / "run"
    run.mkdir()
    monkeypatch.setenv("NPUCONF_STATE_DIR", state["NPUCONF_STATE_DIR"])
    from host.run.ownership import MARKER, claim, why_untrusted

    token = claim(run)
    assert why_untrusted(run) is None
    assert stat.S_IMODE(os.stat(run / MARKER).st_mode) == 0o600
    assert token not in as_nobody(READ, run / MARKER).stdout
    entry = json.loads((Path(state["NPUCONF_STATE_DIR"]) / "runs" / token).read_text())
    assert (entry["dev"], entry["ino"], entry["uid"]) == (os.stat(run).st_dev, os.stat(run).st_ino, 0)


PLANT_STORE = r"""
import os, sqlite3, sys
path = sys.argv[1]
sqlite3.connect(path).execute("CREATE TABLE planted (x)").connection.commit()
os.chmod(path, 0o666)
"""


def test_a_store_planted_at_the_default_path_is_neither_used_nor_fed(shared, state):
    store = shared / "npuconf.sqlite"
    as_nobody(PLANT_STORE, store)
    before = store.read_bytes()
    done = cli("run", "--target", "local", "-k", SECOND, "--out", shared / "run", "-q", env=state, timeout=120)
    assert done.returncode == 0, text(done)
    assert f"the default results store {store} is not used" in text(done) and "--store" in text(done)
    assert store.read_bytes() == before
    assert sqlite3.connect(store).execute("SELECT name FROM sqlite_master").fetchall() == [("planted",)]


def test_a_store_file_of_another_user_in_roots_own_directory_is_not_used(tmp_path, state):
    store = tmp_path / "npuconf.sqlite"
    sqlite3.connect(store).execute("CREATE TABLE planted (x)").connection.commit()
    os.chown(store, pwd.getpwnam("nobody").pw_uid, -1)  # theirs, as if they had made it there
    before = store.read_bytes()
    done = cli("run", "--target", "local", "-k", SECOND, "--out", tmp_path / "run", "-q", env=state, timeout=120)
    assert done.returncode == 0, text(done)
    assert "is not used: it belongs to uid 65534" in text(done)
    assert store.read_bytes() == before


def test_no_default_store_is_made_in_a_directory_every_user_may_write(shared, state):
    done = cli("run", "--target", "local", "-k", SECOND, "--out", shared / "run", "-q", env=state, timeout=120)
    assert done.returncode == 0, text(done)
    assert "writable by other users" in text(done)
    assert not (shared / "npuconf.sqlite").exists()  # its journal would be anyone's to plant too


def test_the_default_store_of_dashboard_and_store_import_in_a_shared_directory_is_refused(shared, finished_run):
    (shared / "out").mkdir()
    (shared / "out").chmod(0o777)
    for args in (("dashboard",), ("store", "import", finished_run)):
        done = cli(*args, cwd=shared)
        assert done.returncode == 3, text(done)
        assert "the default results store out/npuconf.sqlite is not used" in text(done)
        assert "--store" in text(done) and len(text(done).strip().splitlines()) == 1
    assert not (shared / "out" / "npuconf.sqlite").exists()


def test_the_default_output_directory_in_a_shared_directory_is_refused(shared, state):
    done = cli("run", "--target", "local", "-k", SECOND, "-q", env=state, cwd=shared)
    assert done.returncode == 3, text(done)
    assert "the default output directory out/ is not used" in text(done) and "--out DIR" in text(done)
    assert not (shared / "out").exists()


def test_a_state_directory_of_another_user_is_refused(shared, tmp_path):
    theirs = shared / "state"
    as_nobody("import os, sys; os.mkdir(sys.argv[1], 0o755)", theirs)
    done = cli("run", "--target", "local", "-k", SECOND, "--out", tmp_path / "run", "-q",
               env={"NPUCONF_STATE_DIR": str(theirs)})
    assert done.returncode == 3, text(done)
    assert "the kit's state directory belongs to uid 65534" in text(done)
    assert list(theirs.iterdir()) == []
