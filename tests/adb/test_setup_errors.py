"""A phone whose ABI has no probe build: a setup error (exit 3, one line naming the build command),
before any scenario runs and before anything is written."""

from tests.adb.conftest import device_profile
from tests.conftest import PRINTED_NPUCONF, npuconf


def test_device_abi_without_a_probe_build_is_a_setup_error(fleet_factory, tmp_path):
    # Not a virtual device (so the host build does not apply), reporting an ABI nothing was built for.
    phone = device_profile(
        "phone-1",
        **{"ro.npuconf.virtual": "0", "ro.product.cpu.abi": "armeabi-v7a", "ro.product.cpu.abilist": "armeabi-v7a"},
    )
    supervisor = fleet_factory(1, names=["phone-1"], profiles=[phone])
    server = str(supervisor.fleet.server.address)
    out = tmp_path / "run"
    done = npuconf("run", "--target", "adb", "--adb-server", server, "-q", "--out", out, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "no probe build for ABI armeabi-v7a" in lines[0]
    assert f"run `{PRINTED_NPUCONF} probe build --ndk PATH --abi armeabi-v7a`" in lines[0]
    assert not (out / "results.jsonl").exists()
