"""Deploying the probe (host/targets/adb/deployment.py): on a virtual device the kit launched, the files
are pushed while the device is read; every other device is read first and gets only what it lacks."""

import re

import pytest

from host.errors import InfraError
from host.targets import VnpuProfile
from host.targets.adb import AdbTarget
from tests.adb.conftest import device_profile


def _target(supervisor, launched_virtual):
    device = supervisor.fleet.devices[0]
    return AdbTarget(supervisor.fleet.server.address, device.adb_serial, serial=device.name,
                     profile=VnpuProfile(), launched_virtual=launched_virtual)  # fmt: skip


def test_a_launched_virtual_device_is_deployed_as_one_read_first(fleet_factory):
    supervisor = fleet_factory(1)
    ahead = _target(supervisor, launched_virtual=True)
    info = ahead.prepare()
    installed = ahead._deployed.installed if ahead._deployed else None
    again = _target(supervisor, launched_virtual=False)  # reads first: finds every file in place
    assert again.prepare() == info
    assert again._deployed is not None and again._deployed.installed == installed
    assert info["virtual"] is True and set(installed or ()) == {"npuconf-probe", "libvnpu.so", "vnpu-profile.conf"}
    device_dir = supervisor.fleet.devices[0].root / "data" / "local" / "tmp" / "npuconf"
    assert not [p.name for p in (device_dir / "run").iterdir() if p.name.startswith(".")]  # every file moved in place


def test_a_launched_device_that_does_not_say_it_is_virtual_is_refused(fleet_factory):
    phone = device_profile("phone-1", **{"ro.npuconf.virtual": "0"})
    supervisor = fleet_factory(1, names=["phone-1"], profiles=[phone])
    said = "launched as a virtual device, but `getprop` lacks ro.npuconf.virtual=1"
    with pytest.raises(InfraError, match=re.escape(said)):
        _target(supervisor, launched_virtual=True).prepare()
