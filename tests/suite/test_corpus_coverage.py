"""The corpus covers every testable clause of the catalogue with at least two scenarios."""

from host.offline import coverage
from host.suite import load_catalogue


def test_every_testable_clause_has_a_rule_and_two_scenarios():
    rows = coverage(load_catalogue())
    testable = [r for r in rows if r.testability != "not-testable"]
    assert testable
    assert [r.clause_id for r in testable if not r.rules] == []
    assert [(r.clause_id, r.scenarios) for r in testable if len(r.scenarios) < 2] == []


def test_clauses_command_reports_full_coverage():
    from tests.conftest import npuconf

    done = npuconf("clauses")
    assert done.returncode == 0, done.stderr
    assert "by two or more (100 %)" in done.stdout.splitlines()[-1]
