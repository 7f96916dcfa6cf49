"""Discovery kept per device build (host/run/discovery_cache.py) and the build checks of the local target
(host/targets/local.py): kept between runs under everything their answer depends on, redone when any of
it changes; a kept or shared answer is used only once the device has confirmed it with one call."""

import json
import threading

import pytest

import host.targets.local as local
from host.run import prepare_device
from host.run.discovery import DISCOVERY_ID, GRID
from host.run.discovery_cache import (
    DISCOVERED,
    FROM_CACHE,
    BuildDiscoveries,
    from_device,
    rediscovered,
)
from host.targets import VnpuProfile
from host.targets.local import LocalTarget


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(tmp_path / "cache"))


class Counting(LocalTarget):
    """Counts its probe processes and the isSupported calls they made."""

    batches = 0
    calls = 0

    def run_batch(self, program, *args, **kwargs):
        Counting.batches += 1
        Counting.calls += program.count("is_supported")
        return super().run_batch(program, *args, **kwargs)


def _target(tmp_path, name="local", **profile):
    return Counting(profile=VnpuProfile(**profile), work_dir=tmp_path / name, serial=name)


def _counted():
    Counting.batches = Counting.calls = 0


def _answers(device):
    """The isSupported returns of the trace a device record holds."""
    events = [json.loads(x) for x in device.info["discovery_trace"]]
    return [e for e in events if e.get("ev") == "ret" and e.get("op") == "is_supported"]


def test_a_second_run_of_the_same_build_and_profile_confirms_with_one_call(cache, tmp_path, monkeypatch):
    _counted()
    first = prepare_device(_target(tmp_path))
    assert Counting.batches == 1 and Counting.calls > 1 and first.info["supported_pairs"]
    assert first.info["discovery_source"] == DISCOVERED
    checks = []
    monkeypatch.setattr(local, "check_op_table", lambda command: checks.append(command))
    _counted()
    again = prepare_device(_target(tmp_path))
    assert (Counting.batches, Counting.calls, checks) == (1, 1, [])  # one confirmation call; no op listing
    assert again.info["discovery_source"] == FROM_CACHE
    assert again.info["supported_pairs"] == first.info["supported_pairs"]
    assert again.info["vnpu_control"] is first.info["vnpu_control"] is True
    # the trace recorded is the confirmation this device answered: verify derives the same pairs from it
    (asked,) = _answers(again)
    assert len(asked["results"]) == len(GRID) and asked["canary"] is True
    assert again.info["discovery_trace"] != first.info["discovery_trace"]
    assert again.info["fingerprint"] == first.info["fingerprint"]
    _counted()
    other = prepare_device(_target(tmp_path, personality="aosp-2026"))  # another profile: discovered again
    assert Counting.batches == 1 and Counting.calls > 1 and other.info["discovery_source"] == DISCOVERED


class SameBuild(Counting):
    """A target that names its build without its profile: a kept answer then meets a device that answers
    otherwise (as a phone of one fingerprint whose configuration changed)."""

    def discovery_build(self):
        build = super().discovery_build()
        return None if build is None else tuple(p for p in build if p != self.profile.render())


def test_a_kept_answer_the_device_does_not_confirm_is_discovered_again(cache, tmp_path):
    before = prepare_device(SameBuild(profile=VnpuProfile(), work_dir=tmp_path / "a"))
    _counted()
    changed = SameBuild(profile=VnpuProfile(pairs=((2, 1),)), work_dir=tmp_path / "b")
    after = prepare_device(changed)
    assert Counting.batches == 2 and Counting.calls > 2  # the confirmation, then a whole discovery
    assert after.info["discovery_source"] == rediscovered("the kept answer differed from this device's")
    assert before.info["supported_pairs"] != after.info["supported_pairs"] == [[2, 1]]
    # the new answer replaced the kept one: the next device of that build confirms it
    _counted()
    again = prepare_device(SameBuild(profile=VnpuProfile(pairs=((2, 1),)), work_dir=tmp_path / "c"))
    assert Counting.batches == 1
    assert (again.info["discovery_source"], again.info["supported_pairs"]) == (FROM_CACHE, [[2, 1]])


def test_an_impl_library_is_kept_and_confirmed_too(cache, tmp_path, probe_build):
    def target():
        return Counting(profile=VnpuProfile(), work_dir=tmp_path / "w", impl=probe_build.vnpu)

    _counted()
    first = prepare_device(target())
    again = prepare_device(target())
    assert (first.info["discovery_source"], again.info["discovery_source"]) == (DISCOVERED, FROM_CACHE)
    assert Counting.batches == 2 and first.info["supported_pairs"] == again.info["supported_pairs"]


def test_devices_of_one_build_in_one_run_discover_once(cache, tmp_path):
    """Prepared at once, as a run prepares its devices: one discovers, the others confirm its answer."""
    builds = BuildDiscoveries()
    targets = [_target(tmp_path, f"d{i}") for i in range(3)]
    prepared = {}

    def prepare(target):
        prepared[target.serial] = prepare_device(target, builds)

    _counted()
    threads = [threading.Thread(target=prepare, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sources = {serial: device.info["discovery_source"] for serial, device in prepared.items()}
    (first,) = [serial for serial, source in sources.items() if source == DISCOVERED]
    assert {s for serial, s in sources.items() if serial != first} == {from_device(first)}
    assert len({json.dumps(d.info["supported_pairs"]) for d in prepared.values()}) == 1
    assert Counting.batches == 3 and Counting.calls == len(_answers(prepared[first])) + 2


class Refusing(Counting):
    """Its isSupported answers -1 to everything: discovery fails."""

    def run_batch(self, program, scenario_ids, limits, on_trace):
        Counting.batches += 1
        from host.probe import BatchOutcome, ScenarioTrace

        lines = [json.dumps({"ev": "begin", "scenario": DISCOVERY_ID, "pid": 1, "trace": 2, "t": 0})]
        lines += [json.dumps({"ev": "ret", "step": 0, "op": "is_supported", "th": "main", "ret": -1, "errno": "EIO",
                              "dur_ns": 1, "t": 1})] * program.count("is_supported")  # fmt: skip
        on_trace(ScenarioTrace(DISCOVERY_ID, tuple(lines), 1.0))
        return BatchOutcome((DISCOVERY_ID,), None, None)


def test_a_build_whose_first_device_fails_discovery_has_its_others_discover(cache, tmp_path):
    builds = BuildDiscoveries()
    first = prepare_device(Refusing(profile=VnpuProfile(), work_dir=tmp_path / "a", serial="a"), builds)
    assert first.discovery_failed is not None
    second = prepare_device(Refusing(profile=VnpuProfile(), work_dir=tmp_path / "b", serial="b"), builds)
    assert second.info["discovery_source"] == DISCOVERED and second.discovery_failed is not None
    # nothing failed is kept: a later run discovers again
    later = prepare_device(_target(tmp_path, "c"))
    assert later.info["discovery_source"] == DISCOVERED


def test_a_rebuilt_library_is_checked_and_discovered_again(cache, tmp_path, probe_build, monkeypatch):
    build = tmp_path / "build"
    build.mkdir()
    for path in (probe_build.probe, probe_build.vnpu):
        (build / path.name).write_bytes(path.read_bytes())
        (build / path.name).chmod(0o755)
    _counted()

    def target():
        return Counting(profile=VnpuProfile(), work_dir=tmp_path / "work", build_dir=build)

    prepare_device(target())
    (build / probe_build.vnpu.name).write_bytes(probe_build.vnpu.read_bytes())  # same bytes, rewritten
    checks = []
    real = local.check_op_table
    monkeypatch.setattr(local, "check_op_table", lambda command: checks.append(real(command)))
    again = prepare_device(target())
    assert len(checks) == 1  # its identity changed: digested and listed again
    assert again.info["discovery_source"] == FROM_CACHE  # same digests: the kept answer, confirmed
    (build / probe_build.vnpu.name).write_bytes(probe_build.vnpu.read_bytes() + b"\0")  # other bytes
    other = prepare_device(target())
    assert other.info["discovery_source"] == DISCOVERED
