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
def twin(tmp_path_factory, aosp_twin_run) -> Path:
    """The whole corpus on the aosp-2026 twin (a copy of the session's shared run, tests/conftest.py)."""
    return aosp_twin_run.copy(tmp_path_factory.mktemp("twin") / "run")


@pytest.fixture(scope="session")
def vnpu(tmp_path_factory, published_run) -> Path:
    """The whole corpus on the published vnpu, conformant (a copy of the session's shared run): the atlas
    and baseline tests compare it with the twin."""
    return published_run.copy(tmp_path_factory.mktemp("vnpu") / "run")
