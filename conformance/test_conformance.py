"""Every scenario of the corpus as one pytest test against the selected device (--npu-* options).

A verdict is shown the way junit.xml shows it (reference_model.verdicts, `shown`): WARN passes with its
reading given as a pytest warning, NOT_APPLICABLE and NOT_EXECUTED skip, the rest fail.
"""

import warnings

import pytest

from host.suite import load_catalogue, load_corpus

SCENARIOS = load_corpus(known_clauses=load_catalogue().ids())


class ReadingWarning(UserWarning):
    """A scenario passed on the kit's reading of text that leaves the device free."""


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario, npu_device, record_property):
    outcome = npu_device.run(scenario)
    verdict = outcome.verdict
    record_property("verdict", verdict.value)
    record_property("clauses", ",".join(scenario.clauses))
    discrepancy = f" [AOSP discrepancy {outcome.discrepancy}]" if outcome.discrepancy else ""
    if verdict.shown == "skipped":
        pytest.skip(f"{verdict.value}: {outcome.reason}")
    if verdict.shown != "passed":
        pytest.fail(f"{verdict.value}: {outcome.reason}{discrepancy}", pytrace=False)
    if outcome.reason and verdict.finding:
        record_property("reading", outcome.reason)
        warnings.warn(ReadingWarning(f"{scenario.id} {verdict.value}: {outcome.reason}{discrepancy}"), stacklevel=1)
