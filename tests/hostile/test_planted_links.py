"""Root writing where another local user can plant links (issue 26): every write into a directory the
kit does not own goes through a directory descriptor with no other user's symlink followed, or is
refused in one line.

- a symlink at `<out>/virtual-devices`, owned by another user, pointing into a root-only directory;
- a results store path that is another user's symlink (to a file root has not made yet);
- a sandbox that survived an earlier device, with a hard link to a root-only file planted in it: the
  next device (as root) must not hand that file to the device's own uid.
"""

import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from host.targets.virtual_device.sandbox import Sandbox
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


def test_a_planted_virtual_devices_symlink_is_refused_in_one_line(tmp_path, probe_build):
    secret, out = _root_only_and_lab(tmp_path)
    _planted(out / "virtual-devices", secret)
    done = cli("run", "--target", "virtual", "-k", "support.empty_list", "--out", out, "-q",
               env={"NPUCONF_STATE_DIR": str(tmp_path / "state")}, timeout=120)  # fmt: skip
    assert done.returncode == 3, text(done)
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "virtual-devices: is a symlink" in lines[0], lines
    assert list(secret.iterdir()) == []


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


def test_a_surviving_sandbox_is_never_handed_over_through_a_planted_hard_link(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="npuconf-hardlink-"))  # a sandbox needs o+x above it
    try:
        base.chmod(0o755)
        victim = base / "root-only"
        victim.write_text("root's own\n")
        victim.chmod(0o600)
        root = base / "device" / "fs"
        root.parent.mkdir(mode=0o755)
        Sandbox.create(root, owner=_nobody())
        os.link(victim, root / "data" / "local" / "tmp" / "planted")  # as an earlier device's uid could
        os.link(victim, root / "planted")
        Sandbox.create(root, owner=_nobody())
        info = victim.stat()
        assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o600)
        assert info.st_nlink == 1  # the links were removed with the earlier device's filesystem
        assert root.stat().st_uid == _nobody()[0] and root.stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(base, ignore_errors=True)
