"""The parsed corpus is kept in the user cache (host/suite/corpus.py): the same bytes, parsed by the same
code, are not parsed again; other bytes are; an entry another user could have written is never used."""

import shutil

import pytest

import host.suite.corpus as corpus_module
from host.suite import SCENARIO_ROOT, load_corpus


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NPUCONF_CACHE_DIR", str(root))
    return root


@pytest.fixture
def scenarios(tmp_path):
    root = tmp_path / "scenarios"
    shutil.copytree(SCENARIO_ROOT / "cookies", root / "cookies")
    return root


def _new_process(monkeypatch):
    """As a new process would: the corpora this one loaded are forgotten (only the user cache is left)."""
    monkeypatch.setattr(corpus_module, "_RECENT", {})


def _unparsable(monkeypatch):
    def parse(*args, **kwargs):
        raise AssertionError("parsed again")

    _new_process(monkeypatch)
    monkeypatch.setattr(corpus_module, "_parsed", parse)


def test_a_corpus_parsed_once_is_taken_from_the_cache(cache, scenarios, monkeypatch):
    first = load_corpus(scenarios)
    _unparsable(monkeypatch)
    assert load_corpus(scenarios) == first


def test_an_edited_file_is_parsed_again(cache, scenarios, monkeypatch):
    load_corpus(scenarios)
    path = scenarios / "cookies" / "timing.yaml"
    path.write_text(path.read_text().replace("title: With onAlloc delayed,", "title: Edited,", 1))
    edited = load_corpus(scenarios)
    assert any(s.title.startswith("Edited,") for s in edited)
    _unparsable(monkeypatch)
    with pytest.raises(AssertionError, match="parsed again"):
        load_corpus(scenarios, known_clauses=frozenset({"other"}))  # another key: not cached


def test_an_entry_others_could_have_written_is_not_used(cache, scenarios, monkeypatch):
    load_corpus(scenarios)
    for entry in (cache / "corpus").iterdir():
        entry.chmod(0o666)
    _unparsable(monkeypatch)
    with pytest.raises(AssertionError, match="parsed again"):
        load_corpus(scenarios)


def test_a_damaged_entry_is_parsed_again(cache, scenarios, monkeypatch):
    first = load_corpus(scenarios)
    for entry in (cache / "corpus").iterdir():
        entry.write_bytes(b"not a pickle")
    _new_process(monkeypatch)
    assert load_corpus(scenarios) == first


def test_the_same_process_loads_a_corpus_once(cache, scenarios, monkeypatch):
    first = load_corpus(scenarios)
    monkeypatch.setattr(corpus_module, "_cached_corpus", lambda key: None)
    monkeypatch.setattr(corpus_module, "_parsed", lambda *args: (_ for _ in ()).throw(AssertionError("again")))
    assert load_corpus(scenarios) is first
