"""The adb server key made ahead for the next fleet (host/targets/virtual_device/auth.py): taken by one
server only, and never taken when someone else could have written or read it."""

import os

import pytest

from host.targets.virtual_device import auth


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "adb-keys"


def test_a_spare_key_is_taken_once_and_then_generated_again(state, tmp_path):
    auth.make_spare_key()
    (spare,) = state.glob("*.pem")
    assert oct(spare.stat().st_mode & 0o777) == "0o600" and oct(state.stat().st_mode & 0o777) == "0o700"
    key = auth.take_spare_key()
    assert key is not None and key.key_size == auth.KEY_BITS
    assert list(state.iterdir()) == [] and auth.take_spare_key() is None
    public = auth.generate_server_key(tmp_path / "home")  # none left: generated here
    assert auth.DeviceAuth.load(public).key.public_numbers() != key.public_key().public_numbers()


def test_a_spare_others_could_read_or_write_is_not_taken(state):
    auth.make_spare_key()
    (spare,) = state.glob("*.pem")
    spare.chmod(0o640)
    assert auth.take_spare_key() is None and list(state.glob("*.pem")) == []  # taken away, not used
    auth.make_spare_key()
    state.chmod(0o770)
    assert auth.take_spare_key() is None
    state.chmod(0o700)
    (spare,) = state.glob("*.pem")
    spare.write_bytes(b"-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n")
    assert auth.take_spare_key() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_spare_of_another_user_is_not_taken(state):
    auth.make_spare_key()
    (spare,) = state.glob("*.pem")
    os.chown(spare, 65534, 65534)
    assert auth.take_spare_key() is None
