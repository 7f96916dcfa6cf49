"""Root writing where another local user can plant links (issue 26): every write into a directory the
kit does not own goes through a directory descriptor with no other user's symlink followed, or is
refused in one line.

- a results store path that is another user's symlink (to a file root has not made yet).
"""

import os
import pwd
from pathlib import Path

import pytest

from tests.hostile.conftest import cli, text

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root against another local user's links")


def _nobody():
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _planted(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    os.lchown(link, *_nobody())
    return link


def _root_only_and_lab(tmp_path):
    """A root-only directory, and a directory of another user's, where that user plants links."""
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    lab = tmp_path / "lab"
    lab.mkdir()
    os.chown(lab, *_nobody())
    return secret, lab


def test_a_store_path_that_is_another_users_symlink_is_refused(tmp_path, finished_run):
    secret, lab = _root_only_and_lab(tmp_path)
    store = _planted(lab / "results.sqlite", secret / "chosen.sqlite")
    done = cli("store", "import", finished_run, "--store", store)
    assert done.returncode == 3, text(done)
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "symlink of uid" in lines[0], lines
    assert list(secret.iterdir()) == []
    # root's own symlink is followed, as on the way to any directory the kit writes in
    os.lchown(store, 0, 0)
    done = cli("store", "import", finished_run, "--store", store)
    assert done.returncode == 0, text(done)
    assert (secret / "chosen.sqlite").is_file()
