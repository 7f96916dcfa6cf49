"""Every testable sentence has a mutant that must be named by it, or a stated reason why none can be.

The rows themselves run in test_adversarial.py; these checks are static: the tables of adversary.py cover
the catalogue, and the README's per-sentence table (printed by `python -m tests.adversarial.adversary
--clauses`) lists the same rows.
"""

import re
from pathlib import Path

from .adversary import JUSTIFIED, KNOWN_GAPS, MUTANTS, killers, testable_clauses

README = Path(__file__).with_name("README.md")


def test_every_testable_clause_has_a_killing_row_or_a_reason() -> None:
    clauses = dict(testable_clauses())
    bare = [c for c in clauses if not killers(c) and c not in JUSTIFIED]
    assert not bare, f"testable clauses with neither a MUTANTS row nor a JUSTIFIED reason: {bare}"
    doubly = [c for c in JUSTIFIED if killers(c)]
    assert not doubly, f"JUSTIFIED clauses that a row kills (drop the reason): {doubly}"
    unknown = [c for c in JUSTIFIED if c not in clauses]
    assert not unknown, f"JUSTIFIED names no testable clause: {unknown}"
    assert {kind for kind, _ in JUSTIFIED.values()} <= {"permission", "duty", "subsumed", "equivalent", "open"}


def test_every_row_names_catalogued_clauses() -> None:
    clauses = dict(testable_clauses())
    for m in MUTANTS:
        assert m.clause in clauses, f"{m.mutation}: {m.clause} is no testable clause"
        assert all(c in clauses for c in m.also), f"{m.mutation}: {m.also}"
    assert all(m in {x.mutation for x in MUTANTS} for m in KNOWN_GAPS)


def readme_rows() -> dict[str, str]:
    """clause -> the mutants cell of the README's per-sentence table."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## One row per sentence", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[2]
    return rows


def test_readme_table_lists_the_rows() -> None:
    rows = readme_rows()
    regenerate = "regenerate: python -m tests.adversarial.adversary --clauses"
    assert set(rows) == {c for c, _ in testable_clauses()}, regenerate
    for clause, cell in rows.items():
        want = [m.mutation for m in killers(clause)]
        if want:
            assert re.findall(r"`([A-Z][A-Z0-9_]+)`", cell) == want, f"{clause}: {cell} (want {want}); {regenerate}"
        else:
            assert cell == JUSTIFIED[clause][0], f"{clause}: {cell} (want {JUSTIFIED[clause][0]}); {regenerate}"
