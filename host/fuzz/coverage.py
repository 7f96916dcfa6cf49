"""What a fuzz campaign reached and what it judged: the grammar cells of the programs it ran (op x context
x class, host.fuzz.grammar) and the model's clauses x outcomes the judge gave for them.

A clause's outcome in a judged program: `shown` (a PASS or WARN whose trace demonstrated it), `warned`
(a reading of silent text a WARN departed from, by its ID), `failed` (the clause a FAIL names), `crashed`
(the clause of the step a CRASH died in). `npuconf fuzz --coverage` prints both; host.fuzz.steer chooses
programs by them."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from reference_model.verdicts import Verdict

from .grammar import CONTEXTS, Cell

SHOWN: Final = "shown"
WARNED: Final = "warned"
FAILED: Final = "failed"
CRASHED: Final = "crashed"
OUTCOMES: Final = (SHOWN, WARNED, FAILED, CRASHED)
READING: Final = re.compile(r"\bR[0-9]+\b")

Judged = tuple[str, str]  # clause (or reading), outcome


def judged_of(verdict: Verdict, clause: str | None, reason: str, demonstrated: Iterable[str]) -> set[Judged]:
    """The clauses x outcomes one judged program gives."""
    out: set[Judged] = set()
    if verdict.exercises:  # PASS or WARN
        out |= {(c, SHOWN) for c in demonstrated}
    if verdict is Verdict.WARN:
        out |= {(r, WARNED) for r in READING.findall(reason)}
    if verdict is Verdict.FAIL and clause:
        out.add((clause, FAILED))
    if verdict is Verdict.CRASH:
        out.add((clause or verdict.value, CRASHED))
    return out


@dataclass(frozen=True)
class Snapshot:
    """The counts the steering reads (host.fuzz.steer.Scorer), as they stood at one moment: what a batch's
    programs are chosen on. Plain counters, so that it travels to the drawing process."""

    reached: Counter[Cell]
    judged: Counter[Judged]
    together: dict[Cell, Counter[Judged]]


@dataclass
class Coverage:
    """A campaign's coverage so far, shared by its devices (a lock guards it)."""

    allowed: frozenset[Cell]
    testable: frozenset[str] = frozenset()  # the catalogue's clauses the campaign's devices can demonstrate
    reached: Counter[Cell] = field(default_factory=Counter)  # programs run that reached each cell
    judged: Counter[Judged] = field(default_factory=Counter)  # programs that judged each clause x outcome
    # How often a cell and a clause x outcome came in one program: what the steering learns.
    together: dict[Cell, Counter[Judged]] = field(default_factory=dict)
    programs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, cells: Iterable[Cell], judged: set[Judged]) -> None:
        with self.lock:
            self.programs += 1
            for cell in cells:
                self.reached[cell] += 1
                if judged:
                    self.together.setdefault(cell, Counter()).update(judged)
            self.judged.update(judged)

    def snapshot(self) -> Snapshot:
        with self.lock:
            return Snapshot(Counter(self.reached), Counter(self.judged),
                            {cell: Counter(pairs) for cell, pairs in self.together.items()})

    def missed(self) -> list[Cell]:
        """The cells the grammar allows on these devices that no program reached."""
        with self.lock:
            return sorted(self.allowed - set(self.reached))

    def unjudged(self) -> list[str]:
        """Testable clauses no program demonstrated, warned of or failed."""
        with self.lock:
            seen = {clause for clause, _ in self.judged}
        return sorted(self.testable - seen)

    def summary(self) -> dict[str, Any]:
        """fuzz.jsonl's `coverage` record."""
        with self.lock:
            reached = sorted(set(self.reached) & self.allowed)
            outside = sorted(set(self.reached) - self.allowed)
            by_outcome = Counter(outcome for _, outcome in self.judged)
        return {
            "programs": self.programs,
            "cells_allowed": len(self.allowed),
            "cells_reached": len(reached),
            "cells_missed": [list(c) for c in self.missed()],
            "cells_outside_grammar": [list(c) for c in outside],
            "clauses_testable": len(self.testable),
            "clauses_judged": len(self.testable) - len(self.unjudged()),
            "clauses_unjudged": self.unjudged(),
            "judged": {outcome: by_outcome.get(outcome, 0) for outcome in OUTCOMES},
        }


def render(coverage: Coverage) -> list[str]:
    """The text `npuconf fuzz --coverage` prints: op x context x class reached, the cells missed, and the
    clauses x outcomes judged."""
    data = coverage.summary()
    lines = [f"coverage: {data['cells_reached']} of {data['cells_allowed']} grammar cells (op x context x class) "
             f"reached by {data['programs']} programs"]
    with coverage.lock:
        reached = set(coverage.reached)
        judged = dict(coverage.judged)
    by_op: dict[str, dict[str, list[str]]] = {}
    for op, context, cls in sorted(coverage.allowed):
        by_op.setdefault(op, {}).setdefault(context, []).append(cls if (op, context, cls) in reached else f"!{cls}")
    for op, contexts in by_op.items():
        parts = [f"{context}: {' '.join(classes)}" for context, classes in sorted(
            contexts.items(), key=lambda kv: CONTEXTS.index(kv[0]))]
        lines.append(f"  {op}  " + "; ".join(parts))
    lines.append("  (!class: allowed by the grammar, not reached)")
    missed = data["cells_missed"]
    lines.append(f"missed: {len(missed)} cells" + (": " + ", ".join("/".join(c) for c in missed) if missed else ""))
    if data["cells_outside_grammar"]:
        lines.append("outside the grammar: " + ", ".join("/".join(c) for c in data["cells_outside_grammar"]))
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in data["judged"].items() if n)
    lines.append(f"judged: {data['clauses_judged']} of {data['clauses_testable']} testable clauses "
                 f"({len(judged)} clause x outcome pairs: {outcomes or 'none'})")
    if data["clauses_unjudged"]:
        lines.append("  not judged yet: " + ", ".join(data["clauses_unjudged"]))
    return lines


def judgeable_clauses(testability: Mapping[str, str], control: bool) -> frozenset[str]:
    """The catalogue's clauses a campaign can demonstrate: device-testable and death tests, and the
    virtual-only ones where a device has vnpu control."""
    kinds = {"device", "death-test"} | ({"virtual-only"} if control else set())
    return frozenset(c for c, kind in testability.items() if kind in kinds)
