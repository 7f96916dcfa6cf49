"""The model's data digests kept between runs (host/run/digests.py): taken back only when well formed,
and then not computed again."""

import json

import pytest

import reference_model.content as content
from floor.user_cache import write_entry
from host.run import digests


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(digests, "MEMO", {})


def _expected():
    return content.expected_digest(content.write((), 0, 8192, 9, 0, "c"), 100, 6000, digests.MEMO)


def test_digests_computed_in_one_run_are_not_computed_in_the_next(fresh, monkeypatch):
    value = _expected()
    digests.save_digests(0)
    monkeypatch.setattr(digests, "MEMO", {})
    assert digests.load_digests() == 1

    def refuse(*args):
        raise AssertionError("computed again")

    monkeypatch.setattr(content, "fnv1a64", refuse)
    assert _expected() == value


def test_malformed_rows_are_not_taken(fresh):
    rows = [[[[9, 100, 5900]], 12345], [[[300, 0, 1]], 1], [[[9, 0, 0]], 1], [[["9", 0, 1]], 1], [[[9, 0, 1]], -1],
            [[[9, 0, 1]], 1 << 64], "junk", [[], 1]]
    write_entry(digests.NAMESPACE, digests._entry_name(), json.dumps(rows).encode())
    assert digests.load_digests() == 1
    assert digests.MEMO == {((9, 100, 5900),): 12345}
    write_entry(digests.NAMESPACE, digests._entry_name(), b"{not json")
    assert digests.load_digests() == 0
