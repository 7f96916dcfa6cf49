"""Fixtures for the report tests: synthetic runs written into the test's tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_results import ResultsBuilder, populate_mixed


@pytest.fixture
def builder(tmp_path: Path) -> ResultsBuilder:
    return ResultsBuilder(tmp_path / "run")


@pytest.fixture
def mixed_run(builder: ResultsBuilder) -> ResultsBuilder:
    """Two devices, every verdict at least once, one planned pair left without a result."""
    return populate_mixed(builder)


@pytest.fixture(scope="session")
def twin(tmp_path_factory, probe_build) -> Path:
    """The whole corpus once on the aosp-2026 twin (shared by the clause answer and spec page tests)."""
    from tests.conftest import npuconf

    run_dir = tmp_path_factory.mktemp("twin") / "run"
    done = npuconf("run", "--target", "local", "--personality", "aosp-2026", "--out", run_dir, "-q", "-j", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    return run_dir


@pytest.fixture(scope="session")
def vnpu(tmp_path_factory, probe_build) -> Path:
    """The whole corpus once on the published vnpu (conformant; the atlas and baseline tests compare it)."""
    from tests.conftest import npuconf

    run_dir = tmp_path_factory.mktemp("vnpu") / "run"
    done = npuconf("run", "--target", "local", "--out", run_dir, "-q", "-j", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir
