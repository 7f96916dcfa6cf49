"""The claim basis recorded in every plan: what a conformance claim of this kit requires.

Reports and `verify` judge the claim from the recorded run only (reports/claim.py); the plan
therefore carries the catalogue's device-testable clause IDs (testability `device` or
`death-test`), those of them that apply to a device without NPU buffers (cited by a scenario that
does not require a supported pair), and the hash of the corpus this kit ships.
"""

from __future__ import annotations

from collections.abc import Iterable

from reference_model.scenario import Scenario

from .catalogue import Catalogue
from .checkout import SCENARIO_ROOT
from .corpus import corpus_hash

DEVICE_TESTABLE = frozenset({"device", "death-test"})


def claim_basis(catalogue: Catalogue, released: Iterable[Scenario]) -> dict[str, object]:
    """The basis for this kit's catalogue and released corpus (`released`: conformance/scenarios)."""
    testable = sorted(c.id for c in catalogue.clauses if c.testability in DEVICE_TESTABLE)
    without = {c for s in released if "supported-pair" not in s.requires for c in s.clauses}
    return {
        "kit_corpus_hash": corpus_hash(SCENARIO_ROOT),
        "device_testable": testable,
        "without_buffers": [c for c in testable if c in without],
    }
