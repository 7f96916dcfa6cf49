"""Every scenario of the corpus as one pytest test against the selected device (--npu-* options)."""

import pytest

from host.suite import load_catalogue, load_corpus
from reference_model.verdicts import Verdict

SCENARIOS = load_corpus(known_clauses=load_catalogue().ids())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario, npu_device, record_property):
    outcome = npu_device.run(scenario)
    record_property("verdict", outcome.verdict.value)
    record_property("clauses", ",".join(scenario.clauses))
    if outcome.verdict is Verdict.NOT_APPLICABLE:
        pytest.skip(f"NOT_APPLICABLE: {outcome.reason}")
    assert outcome.verdict in (Verdict.PASS, Verdict.WAIVED), (
        f"{outcome.verdict.value}: {outcome.reason}"
        + (f" [AOSP discrepancy {outcome.discrepancy}]" if outcome.discrepancy else "")
    )
