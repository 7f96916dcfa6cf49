"""Shared fixtures for the kit's own tests."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    """The host build of the probe and libvnpu (built once; .ci/setup normally did it already)."""
    from host.probe import DEFAULT_BUILD_DIR, ProbeBuild, build_probe

    build = ProbeBuild(DEFAULT_BUILD_DIR)
    if not build.exists():
        build = build_probe(DEFAULT_BUILD_DIR)
    return build
