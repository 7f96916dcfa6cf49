"""The aosp-2026 twin gives every scenario the verdict the checked-in table expects (drift is visible)."""

import pytest

from tests.probe import twin_expected as te

pytestmark = pytest.mark.slow


def test_twin_verdicts_match_the_expected_table(tmp_path, probe_build):
    table = te.load_table()
    got = te.run_twin(tmp_path / "run")
    drifted = te.drift(table, got)
    assert not drifted, (
        f"{len(drifted)} scenario(s) drifted from {te.TABLE.relative_to(te.ROOT)} "
        "(regenerate with `.venv/bin/python -m tests.probe.twin_expected --write-expected` if intended):\n"
        + "\n".join(drifted)
    )


def test_docs_table_is_generated_from_the_expected_table():
    assert te.doc_section(te.DOC.read_text()) == te.render_doc(te.load_table())


def test_drift_lists_each_drifted_scenario():
    table = {
        "a.same": te.Outcome("FAIL", ("D2",)),
        "a.ids": te.Outcome("FAIL", ("D2",)),
        "a.verdict": te.Outcome("PASS"),
        "a.racy": te.Outcome("FAIL", ("D22",), ("PASS",)),
        "a.gone": te.Outcome("PASS"),
    }
    got = {
        "a.same": te.Outcome("FAIL", ("D2",)),
        "a.ids": te.Outcome("FAIL", ("D2", "D3")),
        "a.verdict": te.Outcome("CRASH", ("D23",)),
        "a.racy": te.Outcome("PASS"),
        "a.new": te.Outcome("PASS"),
    }
    assert te.drift(table, got) == [
        "a.gone: in the table (PASS) but not run",
        "a.ids: expected FAIL [D2], the twin gives FAIL [D2,D3]",
        "a.new: not in the table, the twin gives PASS",
        "a.verdict: expected PASS, the twin gives CRASH [D23]",
    ]
