"""The claim basis recorded in every plan: what a conformance claim of this kit requires.

Reports and `verify` judge the claim from the recorded run only (reports/answers/claim.py); the plan
therefore carries the catalogue's device-testable clause IDs (testability `device` or
`death-test`), those of them that apply to a device without NPU buffers (cited by a scenario such a
device can run: one that requires nothing beyond an unsupported pair or 64-bit pointers), and the
hash of the corpus this kit ships.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from reference_model.scenario import Scenario
from reports.recorded.kit import ClaimBasis, KitFacts

from .catalogue import Catalogue, load_catalogue
from .checkout import SCENARIO_ROOT
from .corpus import corpus_hash, load_corpus

DEVICE_TESTABLE = frozenset({"device", "death-test"})
# What only a virtual NPU offers a scenario: a scenario needing one of these can demonstrate virtual-only clauses.
VIRTUAL_NEEDS = frozenset({"vnpu-control", "capacity"})
# What a device without NPU buffers can still offer a scenario (no pair, no capacity, no vnpu control).
WITHOUT_BUFFERS_CAN_MEET = frozenset({"unsupported-pair", "pointer-64"})


def basis_of(catalogue: Catalogue, released: Iterable[Scenario]) -> ClaimBasis:
    """The basis for this kit's catalogue and released corpus (`released`: conformance/scenarios)."""
    testable = frozenset(c.id for c in catalogue.clauses if c.testability in DEVICE_TESTABLE)
    released = list(released)
    without = {c for s in released if s.requires <= WITHOUT_BUFFERS_CAN_MEET for c in s.clauses}
    wide = {c for s in released if "pointer-64" not in s.requires for c in s.clauses}
    return ClaimBasis(
        corpus_hash=corpus_hash(SCENARIO_ROOT),
        device_testable=testable,
        without_buffers=testable & without,
        # Clauses only scenarios needing 64-bit pointers exercise: not asked of a 32-bit device.
        pointer_64_only=testable - wide,
        virtual_only=frozenset(c.id for c in catalogue.clauses if c.testability == "virtual-only"),
    )


def claim_basis(catalogue: Catalogue, released: Iterable[Scenario]) -> dict[str, object]:
    """The basis as the plan records it."""
    return basis_of(catalogue, released).to_json()


@functools.cache
def kit_facts() -> KitFacts:
    """This checkout's own facts (reports/recorded/kit.py), read once per process from its catalogue and corpus."""
    catalogue = load_catalogue()
    released = load_corpus(SCENARIO_ROOT, known_clauses=catalogue.ids())
    virtual = frozenset(s.id for s in released if s.requires & VIRTUAL_NEEDS or any(
        need.startswith("policy-") for need in s.requires))
    return KitFacts({s.id: tuple(s.clauses) for s in released}, basis_of(catalogue, released), virtual)
