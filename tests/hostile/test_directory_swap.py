"""Root writing into a directory another local user owns: that user swaps the directory for a symlink
into a root-only directory (renameat2 RENAME_EXCHANGE, as fast as it can) while root writes and appends
there. Nothing may land in the root-only directory, and a lost race is a one-line UnsafeOutput (or
the write simply lands in the user's own directory), never a traceback."""

import os
import pwd
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from floor.safe_io import UnsafeOutput, append_bytes, write_text

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root and a second user")

SWAPPER = r"""
import ctypes, os, sys, time
RENAME_EXCHANGE = 2
libc = ctypes.CDLL(None, use_errno=True)
lab, until = sys.argv[1], time.monotonic() + float(sys.argv[2])
os.chdir(lab)
os.mkdir("run")
os.symlink(sys.argv[3], "link")
print("ready", flush=True)
while time.monotonic() < until:
    libc.renameat2(-100, b"run", -100, b"link", RENAME_EXCHANGE)
"""


def test_a_directory_swapped_for_a_symlink_never_redirects_a_write():
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="npuconf-swap-"))
    try:
        base.chmod(0o755)
        secret = base / "root-only"
        secret.mkdir(mode=0o700)
        lab = base / "lab"
        lab.mkdir()
        os.chown(lab, nobody.pw_uid, nobody.pw_gid)
        swapper = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-c", SWAPPER, str(lab), "20", str(secret)],
            user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert swapper.stdout.readline().strip() == "ready"
            refused = landed = 0
            deadline = time.monotonic() + 8
            tries = 0
            while time.monotonic() < deadline and tries < 3000:
                tries += 1
                try:
                    write_text(lab / "run" / "junit.xml", "<testsuites/>\n")
                    append_bytes(lab / "run" / "results.jsonl", b"{}\n")
                    landed += 1
                except UnsafeOutput:
                    refused += 1
        finally:
            swapper.kill()
            swapper.wait()
        assert list(secret.iterdir()) == [], (tries, refused, landed)
        assert refused > 0, f"the swap never raced a write in {tries} tries"
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_another_users_symlink_on_the_way_is_never_followed():
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="npuconf-swap-"))
    try:
        secret = base / "root-only"
        (secret / "run").mkdir(parents=True)
        lab = base / "lab"
        lab.mkdir()
        (lab / "way").symlink_to(secret)
        os.chown(lab / "way", nobody.pw_uid, nobody.pw_gid, follow_symlinks=False)
        with pytest.raises(UnsafeOutput, match="symlink of uid"):
            write_text(lab / "way" / "run" / "junit.xml", "<testsuites/>\n")
        assert list((secret / "run").iterdir()) == []
        os.chown(lab / "way", 0, 0, follow_symlinks=False)  # root's own symlink is followed
        write_text(lab / "way" / "run" / "junit.xml", "<testsuites/>\n")
        assert (secret / "run" / "junit.xml").is_file()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
