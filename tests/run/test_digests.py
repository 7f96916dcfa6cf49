"""The model's data digests kept between runs (host/run/digests.py): taken back only when well formed,
and then not computed again."""

import json
import random
import subprocess
from pathlib import Path

import pytest

import reference_model.content as content
from floor.user_cache import write_entry
from host.run import digests

ROOT = Path(__file__).resolve().parents[2]


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


# --- the C digest (libnpuconf_digest.so) -------------------------------------------------------------

WRONG_DIGEST = """
#include <stdint.h>
uint64_t npuconf_pattern_digest(uint64_t h, uint64_t seed, uint64_t first, uint64_t count);
uint64_t npuconf_pattern_digest(uint64_t h, uint64_t seed, uint64_t first, uint64_t count) {
    return h ^ seed ^ first ^ count;
}
"""


def _library(tmp_path, source, mode=0o755):
    c = tmp_path / "digest.c"
    c.write_text(source)
    library = tmp_path / "lib" / "libnpuconf_digest.so"
    library.parent.mkdir(mode=0o755)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(c)], check=True)
    library.chmod(mode)
    return library


def test_the_c_digest_is_the_models_on_every_range_it_is_asked(probe_build):
    memo = digests.NativeMemo(probe_build.digest)
    assert memo.native() is not None
    rng = random.Random(5)
    for _ in range(300):
        pieces = tuple((rng.randrange(0, 2000), rng.randrange(0, 140_000), rng.randrange(0, 9000))
                       for _ in range(rng.randrange(1, 4)))
        assert memo[pieces] == content._digest(pieces, {}), pieces
    assert len(memo) == 300  # kept, as the model keeps what it computes


def test_the_memo_computes_what_it_has_not_kept_so_the_model_does_not(probe_build, monkeypatch):
    memo = digests.NativeMemo(probe_build.digest)
    assert memo.native() is not None  # checked against the model as it loads
    expected = content.expected_digest(content.write((), 0, 8192, 9, 0, "c"), 100, 6000, {})

    def refuse(*args):
        raise AssertionError("computed in Python")

    monkeypatch.setattr(content, "fnv1a64", refuse)
    assert content.expected_digest(content.write((), 0, 8192, 9, 0, "c"), 100, 6000, memo) == expected


def test_a_range_c_cannot_take_is_left_to_the_model(probe_build):
    memo = digests.NativeMemo(probe_build.digest)
    with pytest.raises(KeyError):
        memo[((3, -10, 20),)]  # Python's shift of a negative position is not C's
    assert content._digest(((3, -10, 20),), memo) == content._digest(((3, -10, 20),), {})


def test_a_library_that_is_not_the_models_digest_is_not_used(tmp_path):
    memo = digests.NativeMemo(_library(tmp_path, WRONG_DIGEST))
    assert memo.native() is None
    with pytest.raises(KeyError):
        memo[((9, 0, 10),)]


def test_a_library_others_may_write_is_not_loaded(tmp_path, monkeypatch):
    library = _library(tmp_path, (ROOT / "ndk_probe/src/host/digest.c").read_text().replace(
        '#include "pattern.h"', (ROOT / "ndk_probe/src/probe/pattern.h").read_text()
        + (ROOT / "ndk_probe/src/probe/pattern.c").read_text().replace('#include "pattern.h"', "")), mode=0o757)
    loaded = []
    monkeypatch.setattr(digests.ctypes, "CDLL", lambda path: loaded.append(path))
    assert digests.load_native(library) is None
    assert loaded == []
    library.chmod(0o755)
    library.parent.chmod(0o777)
    assert digests.load_native(library) is None
    assert loaded == []
    assert digests.load_native(tmp_path / "missing.so") is None


def test_a_model_changed_in_part_of_its_ranges_is_not_masked_by_the_c(probe_build, monkeypatch):
    """A model whose pattern differs only for seeds past 500 (a mutant, say) no longer agrees with the C on
    every checked range: the C is not used, and the model's own digests decide."""
    original = content.pattern_bytes

    def changed(seed, first, count):
        data = original(seed, first, count)
        return bytes(b ^ 1 for b in data) if seed > 500 else data

    monkeypatch.setattr(content, "pattern_bytes", changed)
    assert digests.load_native(probe_build.digest) is None
