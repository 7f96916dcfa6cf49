"""The adb server key made ahead for the next fleet (host/targets/virtual_device/auth.py): taken by one
server only, and never taken when someone else could have written or read it."""

import os

import pytest

from host.targets.virtual_device import auth


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "adb-keys"


def _spare(state):
    (spare,) = state.iterdir()
    return spare


def test_a_spare_key_is_taken_once_and_then_generated_again(state, tmp_path):
    auth.make_spare_key()
    spare = _spare(state)
    assert oct((spare / "adbkey").stat().st_mode & 0o777) == "0o600" and oct(state.stat().st_mode & 0o777) == "0o700"
    expected = (spare / "adbkey").read_bytes(), (spare / "adbkey.pub").read_text()
    public = auth.generate_server_key(tmp_path / "one")  # the spare, taken
    assert ((tmp_path / "one" / ".android" / "adbkey").read_bytes(), public.read_text()) == expected
    assert auth.DeviceAuth.load(public).key.key_size == auth.KEY_BITS
    assert list(state.iterdir()) == [] and auth.take_spare_key() is None
    other = auth.generate_server_key(tmp_path / "two")  # none left: made here
    assert other.read_text() != public.read_text()


def test_a_spare_others_could_read_or_write_is_not_taken(state):
    auth.make_spare_key()
    (_spare(state) / "adbkey").chmod(0o640)
    assert auth.take_spare_key() is None and list(state.iterdir()) == []  # taken away, not used
    auth.make_spare_key()
    state.chmod(0o770)
    assert auth.take_spare_key() is None
    state.chmod(0o700)
    _spare(state).chmod(0o755)
    assert auth.take_spare_key() is None
    auth.make_spare_key()
    (_spare(state) / "adbkey.pub").write_text("not base64 at all\n")
    assert auth.take_spare_key() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_spare_of_another_user_is_not_taken(state):
    auth.make_spare_key()
    os.chown(_spare(state) / "adbkey", 65534, 65534)
    assert auth.take_spare_key() is None
