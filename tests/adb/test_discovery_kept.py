"""Discovery kept per device build on the adb path (host/run/discovery_cache.py): the kit's virtual devices
of one build discover once in a run, and a later run's devices confirm the kept answer with one call."""

import threading

from host.run import prepare_device
from host.run.discovery_cache import DISCOVERED, FROM_CACHE, BuildDiscoveries, from_device
from host.targets import VnpuProfile
from host.targets.adb import AdbTarget


def test_virtual_devices_of_one_build_discover_once_then_confirm_what_was_kept(fleet_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(tmp_path / "cache"))
    fleet = fleet_factory(2).fleet

    def targets(profile=None):
        return [AdbTarget(fleet.server.address, d.adb_serial, serial=d.name, profile=profile or VnpuProfile())
                for d in fleet.devices]  # fmt: skip

    builds = BuildDiscoveries()
    prepared = {}
    first = targets()

    def prepare(target):
        prepared[target.serial] = prepare_device(target, builds)

    threads = [threading.Thread(target=prepare, args=(t,)) for t in first]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert first[0].discovery_build() == first[1].discovery_build()  # neither serial nor server in it
    sources = {serial: device.info["discovery_source"] for serial, device in prepared.items()}
    (discoverer,) = [serial for serial, source in sources.items() if source == DISCOVERED]
    assert set(sources.values()) == {DISCOVERED, from_device(discoverer)}
    assert len({str(d.info["supported_pairs"]) for d in prepared.values()}) == 1
    later = [prepare_device(t) for t in targets()]  # a later run of the same build
    assert [d.info["discovery_source"] for d in later] == [FROM_CACHE, FROM_CACHE]
    assert [d.info["supported_pairs"] for d in later] == [prepared[d.serial].info["supported_pairs"] for d in later]
    other = prepare_device(targets(VnpuProfile(pairs=((2, 1),)))[0])  # libvnpu's profile is part of the build
    assert (other.info["discovery_source"], other.info["supported_pairs"]) == (DISCOVERED, [[2, 1]])
