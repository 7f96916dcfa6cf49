"""What a verdict means lives in reference_model/verdicts.py only: the orders and sets other modules use are
read from its table, and no module spells a set of verdicts by name."""

from __future__ import annotations

import ast

from reference_model.verdicts import ANSWER_ORDER, FINDING_ORDER, SEVERITY, Verdict
from tests.conftest import ROOT

V = Verdict


def test_the_orders_and_sets_the_tables_read():
    assert SEVERITY[0] is V.PASS and SEVERITY[-1] is V.CRASH
    assert ANSWER_ORDER == (V.CRASH, V.FAIL, V.WAIVED, V.WARN, V.PASS)
    assert tuple(v for v in ANSWER_ORDER if v.names) == (V.CRASH, V.FAIL, V.WAIVED, V.WARN)
    assert FINDING_ORDER == (V.CRASH, V.FAIL, V.TIMEOUT, V.ERROR, V.WARN)
    assert {v for v in V if v.failed} == {V.FAIL, V.CRASH, V.WAIVED}
    assert {v for v in V if v.blocking} == {V.FAIL, V.CRASH}
    assert {v for v in V if v.ends_trace} == {V.CRASH, V.TIMEOUT}
    assert {v for v in V if v.device_log} == {V.FAIL, V.CRASH, V.TIMEOUT}
    assert {v for v in V if v.traceless} == {V.NOT_EXECUTED, V.ERROR}
    assert {v for v in V if v.shown == "passed"} == {V.PASS, V.WARN, V.WAIVED}


def _verdict_sets(path) -> list[int]:
    """Lines of `path` holding a tuple, list or set literal of two or more `Verdict.X` (a second table)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            named = [
                e for e in node.elts
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "Verdict"
            ]
            if len(named) >= 2:
                found.append(node.lineno)
    return found


def test_no_module_spells_a_set_of_verdicts():
    own = ROOT / "reference_model" / "verdicts.py"
    spelled = {
        str(path.relative_to(ROOT)): lines
        for room in ("reference_model", "floor", "reports", "host", "conformance")
        for path in sorted((ROOT / room).rglob("*.py"))
        if path != own and (lines := _verdict_sets(path))
    }
    assert spelled == {}
