"""The per-user cache (floor/user_cache.py): an entry is read back only when nobody but this user could
have written it; anything else is a miss, and a cache that cannot be written never fails a command."""

import os

import pytest

from floor.user_cache import cache_key, read_entry, write_entry

KEY = cache_key("some", b"input")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(root))
    return root


def test_an_entry_written_is_read_back_and_keys_do_not_collide(cache):
    assert read_entry("space", KEY) is None
    write_entry("space", KEY, b"value")
    assert read_entry("space", KEY) == b"value"
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert oct((cache / "space").stat().st_mode & 0o777) == "0o700"
    assert oct((cache / "space" / KEY).stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("where", ["entry", "namespace", "root"])
def test_an_entry_others_could_have_written_is_a_miss(cache, where):
    write_entry("space", KEY, b"value")
    path = {"entry": cache / "space" / KEY, "namespace": cache / "space", "root": cache}[where]
    path.chmod(path.stat().st_mode | 0o020)  # group-writable
    assert read_entry("space", KEY) is None


def test_a_symlinked_entry_is_a_miss(cache, tmp_path):
    write_entry("space", KEY, b"value")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"forged")
    elsewhere.chmod(0o600)
    (cache / "space" / KEY).unlink()
    (cache / "space" / KEY).symlink_to(elsewhere)
    assert read_entry("space", KEY) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_owned_by_another_user_is_a_miss(cache):
    write_entry("space", KEY, b"value")
    os.chown(cache / "space" / KEY, 65534, 65534)
    assert read_entry("space", KEY) is None
    os.chown(cache / "space" / KEY, 0, 0)
    os.chown(cache / "space", 65534, 65534)
    assert read_entry("space", KEY) is None


def test_a_cache_that_cannot_be_written_is_skipped(cache):
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file, not a directory")
    write_entry("space", KEY, b"value")  # no exception
    assert read_entry("space", KEY) is None


def test_old_entries_are_pruned(cache, monkeypatch):
    monkeypatch.setattr("floor.user_cache.ENTRIES_KEPT", 3)
    keys = [cache_key(str(i)) for i in range(6)]
    for i, key in enumerate(keys):
        write_entry("space", key, b"x")
        os.utime(cache / "space" / key, (1000 + i, 1000 + i))
    assert sorted(p.name for p in (cache / "space").iterdir()) == sorted(keys[-3:])
