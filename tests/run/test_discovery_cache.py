"""Discovery and the build checks of the local target are kept between runs (host/run/prepared_device.py,
host/targets/local.py) under everything their answer depends on, and redone when any of it changes."""

import pytest

import host.targets.local as local
from host.run import prepare_device
from host.targets import LocalTarget, VnpuProfile


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(tmp_path / "cache"))


class Counting(LocalTarget):
    batches = 0

    def run_batch(self, *args, **kwargs):
        Counting.batches += 1
        return super().run_batch(*args, **kwargs)


def _target(tmp_path, **profile):
    return Counting(profile=VnpuProfile(**profile), work_dir=tmp_path / "work")


def test_a_second_run_of_the_same_build_and_profile_does_not_discover_again(cache, tmp_path, probe_build, monkeypatch):
    Counting.batches = 0
    first = prepare_device(_target(tmp_path))
    assert Counting.batches == 1 and first.info["supported_pairs"]
    checks = []
    monkeypatch.setattr(local, "check_op_table", lambda command: checks.append(command))
    again = prepare_device(_target(tmp_path))
    assert Counting.batches == 1 and checks == []  # neither discovered nor listed again
    assert again.info["supported_pairs"] == first.info["supported_pairs"]
    assert again.info["discovery_trace"] == first.info["discovery_trace"]
    assert again.info["fingerprint"] == first.info["fingerprint"]
    prepare_device(_target(tmp_path, personality="aosp-2026"))  # another profile: discovered again
    assert Counting.batches == 2
    # an --impl library may answer from what the kit cannot see: never cached
    assert LocalTarget(VnpuProfile(), tmp_path / "w", impl=probe_build.vnpu).discovery_key("program") is None


def test_a_rebuilt_library_is_checked_and_discovered_again(cache, tmp_path, probe_build, monkeypatch):
    build = tmp_path / "build"
    build.mkdir()
    for path in (probe_build.probe, probe_build.vnpu):
        (build / path.name).write_bytes(path.read_bytes())
        (build / path.name).chmod(0o755)
    Counting.batches = 0

    def target():
        return Counting(profile=VnpuProfile(), work_dir=tmp_path / "work", build_dir=build)

    prepare_device(target())
    (build / probe_build.vnpu.name).write_bytes(probe_build.vnpu.read_bytes())  # same bytes, rewritten
    checks = []
    real = local.check_op_table
    monkeypatch.setattr(local, "check_op_table", lambda command: checks.append(real(command)))
    prepare_device(target())
    assert Counting.batches == 2 and len(checks) == 1
