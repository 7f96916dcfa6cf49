"""`npuconf clauses`: the catalogue with coverage by model rules and by scenarios."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from reference_model.rules import cited_clauses

from ..suite import Catalogue, load_catalogue, load_corpus


@dataclass(frozen=True, slots=True)
class Coverage:
    clause_id: str
    chapter: str
    testability: str
    rules: tuple[str, ...]
    scenarios: tuple[str, ...]
    quote: str


def coverage(catalogue: Catalogue) -> list[Coverage]:
    scenarios = load_corpus(known_clauses=catalogue.ids())
    by_clause: dict[str, list[str]] = defaultdict(list)
    for scenario in scenarios:
        for clause in scenario.clauses:
            by_clause[clause].append(scenario.id)
    rules = cited_clauses()
    return [
        Coverage(c.id, c.chapter, c.testability, tuple(rules.get(c.id, ())), tuple(by_clause[c.id]), c.quote)
        for c in catalogue.clauses
    ]


def print_clauses(as_json: bool) -> int:
    rows = coverage(load_catalogue())
    testable = [r for r in rows if r.testability != "not-testable"]
    summary = {
        "clauses": len(rows),
        "testable": len(testable),
        "with_rule": sum(1 for r in testable if r.rules),
        "with_scenario": sum(1 for r in testable if r.scenarios),
        "with_two_scenarios": sum(1 for r in testable if len(r.scenarios) >= 2),
    }
    if as_json:
        print(json.dumps({"summary": summary, "clauses": [_row(r) for r in rows]}, indent=2))
        return 0
    width = max(len(r.clause_id) for r in rows)
    print(f"{'clause':<{width}}  {'chapter':<11} {'testability':<13} rules scen  quote")
    for r in rows:
        quote = r.quote if len(r.quote) <= 70 else r.quote[:67] + "..."
        counts = f"{len(r.rules):>5} {len(r.scenarios):>4}"
        print(f"{r.clause_id:<{width}}  {r.chapter:<11} {r.testability:<13} {counts}  {quote}")
    pct = 100.0 * summary["with_two_scenarios"] / summary["testable"] if summary["testable"] else 100.0
    print(
        f"\n{summary['clauses']} clauses, {summary['testable']} testable: "
        f"{summary['with_rule']} cited by a model rule, {summary['with_scenario']} by a scenario, "
        f"{summary['with_two_scenarios']} by two or more ({pct:.0f} %)"
    )
    return 0


def _row(row: Coverage) -> dict[str, object]:
    return {
        "id": row.clause_id,
        "chapter": row.chapter,
        "testability": row.testability,
        "rules": list(row.rules),
        "scenarios": list(row.scenarios),
        "quote": row.quote,
    }
