"""What the kit itself knows that a recorded run must never be trusted for: the clauses each of its
scenarios cites, and the claim basis of its catalogue and released corpus.

The claim (reports/answers/claim.py) and `verify` take these facts from here, never from a record, a plan or
a bundle someone else may have written. Reports sit below the kit's corpus loader (host.suite), so the
facts are handed in: internals take a `KitFacts` as a parameter, and only the public entry
(reports.recorded.results.load_results without one) resolves the kit's own through the provider host.suite
installs when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ClaimBasis:
    corpus_hash: str  # of the corpus this kit releases
    device_testable: frozenset[str]  # clauses a claim requires (testability device or death-test)
    without_buffers: frozenset[str]  # of those, the ones a device without NPU buffers can exercise
    pointer_64_only: frozenset[str]  # of those, the ones only scenarios needing 64-bit pointers exercise
    # Clauses only the vnpu control or a declared capacity can drive: required of a device that ran their
    # scenarios (reports/answers/claim.py required_clauses).
    virtual_only: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """As a plan records it (`claim_basis`, docs/formats.md)."""
        return {
            "kit_corpus_hash": self.corpus_hash,
            "device_testable": sorted(self.device_testable),
            "without_buffers": sorted(self.without_buffers),
            "pointer_64_only": sorted(self.pointer_64_only),
            "virtual_only": sorted(self.virtual_only),
        }


@dataclass(frozen=True, slots=True)
class KitFacts:
    scenario_clauses: Mapping[str, tuple[str, ...]]  # released scenario id -> the clauses it cites
    basis: ClaimBasis
    # Released scenarios that need what only a virtual NPU offers (the vnpu control, a declared capacity or
    # policy): a device that runs one is judged on the virtual-only clauses it cites (claim.required_clauses).
    virtual_scenarios: frozenset[str] = frozenset()

    def clauses_of(self, scenario_id: str) -> tuple[str, ...]:
        """The clauses a scenario cites; none for an id the kit did not release (it earns no claim)."""
        return self.scenario_clauses.get(scenario_id, ())


class _Provider:
    """The one place the kit's own facts are resolved from (set once, by host.suite)."""

    def __init__(self) -> None:
        self.provide: Callable[[], KitFacts] | None = None


_PROVIDER = _Provider()


def provide_kit_facts(provide: Callable[[], KitFacts]) -> None:
    _PROVIDER.provide = provide


def kit_facts() -> KitFacts:
    if _PROVIDER.provide is None:
        raise RuntimeError("no kit facts: import host.suite, which provides the kit's corpus and catalogue")
    return _PROVIDER.provide()
