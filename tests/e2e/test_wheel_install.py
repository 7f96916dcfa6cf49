"""A wheel of the checkout, installed into a fresh venv, runs the local and the virtual target from
another directory: probe sources, templates, catalogue and corpus come from the wheel, and the probe
is built in the user cache, not in site-packages."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.e2e.scratch import scratch_checkout

pytestmark = pytest.mark.slow

# What setuptools says when the packaging configuration is ambiguous (BuildBackendWarning banners with
# isolated builds, deprecation warnings with the venv's own setuptools).
SETUPTOOLS_NOISE = ("BuildBackendWarning", "would be ignored", "as data is deprecated", "Editable installation")


def _site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python3*/site-packages")
    return found


def test_wheel_install_runs_local_and_virtual_from_elsewhere(tmp_path):
    source = scratch_checkout(tmp_path / "source")
    (source / "build").unlink()  # the wheel build's own scratch space, not this checkout's probe build
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(wheels), str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert not [n for n in SETUPTOOLS_NOISE if n in built.stderr], built.stderr
    (wheel,) = wheels.glob("npuconf-*.whl")
    # The editable install .ci/setup makes is as quiet (setuptools' banners read like a broken setup).
    editable = subprocess.run(
        [sys.executable, "-c", "import sys; from setuptools import build_meta; build_meta.build_editable(sys.argv[1])",
         str(tmp_path / "editable")], cwd=source, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert editable.returncode == 0, editable.stdout + editable.stderr
    assert not [n for n in SETUPTOOLS_NOISE if n in editable.stderr], editable.stderr

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # The dependencies from this venv; a path line in a .pth runs none of that directory's own .pth
    # files, so this checkout's editable install stays out of the fresh venv.
    (_site_packages(venv) / "npuconf-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"XDG_CACHE_HOME": str(cache)}

    def npuconf(*args):
        return subprocess.run(
            [str(venv / "bin" / "npuconf"), *args], cwd=elsewhere, env=env, capture_output=True, text=True,
            timeout=240, check=False,
        )  # fmt: skip

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import floor, host, reference_model, reports; print(floor.__file__, host.__file__, "
         "reference_model.__file__, reports.__file__, sep='\\n')"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert all(line.startswith(str(_site_packages(venv))) for line in where.stdout.splitlines()), where.stdout

    first = npuconf("run", "--target", "virtual", "-k", "free.empty_list", "--out", "virtual-first", "-q")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "building it now" in first.stderr, first.stderr  # the first use builds the probe
    (build,) = (cache / "npuconf").glob("build-*/probe")
    assert (build / "npuconf-probe").is_file()
    assert not list(_site_packages(venv).glob("build*")), "the probe was built inside site-packages"

    local = npuconf("run", "--target", "local", "-k", "free.empty_list", "--out", "local", "-q")
    assert local.returncode == 0, local.stdout + local.stderr
    assert "building it now" not in local.stderr, local.stderr  # the same build, current
    assert (elsewhere / "local" / "report.html").is_file()

    virtual = npuconf("run", "--target", "virtual", "-k", "free.empty_list", "--out", "virtual", "-q")
    assert virtual.returncode == 0, virtual.stdout + virtual.stderr
    assert "verdicts: PASS 2" in virtual.stdout, virtual.stdout
    assert (elsewhere / "virtual" / "report.html").is_file()
