"""Fixtures for running the corpus as plain pytest: one prepared device per session (per xdist worker)."""

from pathlib import Path

import pytest

from host.catalogue import load_catalogue
from host.device_session import DeviceSession
from host.local import LocalTarget
from host.vnpu_profile import VnpuProfile


@pytest.fixture(scope="session")
def npu_catalogue():
    return load_catalogue()


@pytest.fixture(scope="session")
def npu_device(request, tmp_path_factory, npu_catalogue):
    config = request.config
    impl = config.getoption("--npu-impl")
    target = LocalTarget(
        profile=VnpuProfile(personality=config.getoption("--npu-personality")),
        work_dir=tmp_path_factory.mktemp("npu-device"),
        impl=Path(impl) if impl else None,
        timeout_multiplier=config.getoption("--npu-timeout-multiplier"),
    )
    return DeviceSession.open(target, dict(npu_catalogue.quotes()), config.getoption("--npu-profile"))
