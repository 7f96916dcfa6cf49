"""The kit judged by implementations that change one behaviour of libvnpu (issue 11).

Each row of `adversary.MUTANTS` is a violation of the published text: `npuconf run` must exit 1 and a
FAIL must name the row's clause (a CRASH, for a row whose violation kills the probe: the clause of the
step that died). Each row of `adversary.LEGAL` is allowed by the text: the run must
exit 0 with no FAIL, CRASH, TIMEOUT or ERROR (2, incomplete, where the variation legally keeps
clauses from being exercised: refusing nearly every allocation). Both run through the real CLI; the
LEGAL and WARNED rows over the whole corpus (they assert conformance). A MUTANT row runs first the
scenarios citing its clause (`--clause`): a FAIL naming the clause there is one the whole corpus
gives too, so the check is the same; only when that run has none does the row run the whole corpus
(a failure may name a clause its scenario does not cite).
"""

from pathlib import Path

import pytest

from .adversary import (
    BAD_VERDICTS,
    INCOMPLETE,
    KNOWN_GAPS,
    LEGAL,
    MUTANTS,
    WARNED,
    Incomplete,
    Legal,
    Mutant,
    Warned,
    build,
    real_library,
    run_kit,
)

pytestmark = pytest.mark.slow


def rows(table: tuple[Mutant, ...] | tuple[Warned, ...] | tuple[Incomplete, ...] | tuple[Legal, ...]) -> list[object]:
    """The table's rows as parameters; a row of KNOWN_GAPS is expected to fail (strict)."""
    return [
        pytest.param(
            row,
            id=f"{row.klass}-{row.name if isinstance(row, Legal) else row.mutation}",
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[row.mutation])]
            if row.mutation in KNOWN_GAPS
            else [],
        )
        for row in table
    ]


@pytest.fixture(scope="module")
def real_lib() -> Path:
    return real_library()


@pytest.mark.parametrize("mutant", rows(MUTANTS))
def test_mutant_fails_naming_its_clause(mutant: Mutant, real_lib: Path, tmp_path: Path) -> None:
    library = build(mutant.mutation, tmp_path, real_lib)
    outcome = run_kit(library, tmp_path / "cited", "--clause", mutant.clause, *mutant.args)
    if mutant.also or not outcome.failing(mutant.clause, mutant.verdict):
        outcome = run_kit(library, tmp_path / "run", *mutant.args)
    assert outcome.exit_code == 1, outcome.describe()
    assert outcome.summary_exit == 1, outcome.describe()
    assert outcome.failing(mutant.clause, mutant.verdict), (
        f"no {mutant.verdict} names {mutant.clause}\n{outcome.describe()}"
    )
    unnamed = [c for c in mutant.also if not outcome.failing(c) and not outcome.failing(c, "CRASH")]
    assert not unnamed, f"no FAIL or CRASH names {unnamed}\n{outcome.describe()}"


@pytest.mark.parametrize("mutant", rows(WARNED))
def test_departure_from_a_reading_warns(mutant: Warned, real_lib: Path, tmp_path: Path) -> None:
    outcome = run_kit(build(mutant.mutation, tmp_path, real_lib), tmp_path / "run", *mutant.args)
    assert outcome.exit_code == mutant.exit_code, outcome.describe() + f"\n{outcome.gaps}"
    assert outcome.summary_exit == mutant.exit_code, outcome.describe()
    assert not any(outcome.counts[v] for v in BAD_VERDICTS), outcome.describe()
    assert outcome.warning(mutant.reading), f"no WARN names {mutant.reading}\n{outcome.describe()}"


@pytest.mark.parametrize("mutant", rows(INCOMPLETE))
def test_what_a_legal_refusal_kept_from_happening_is_not_demonstrated(
    mutant: Incomplete, real_lib: Path, tmp_path: Path
) -> None:
    outcome = run_kit(build(mutant.mutation, tmp_path, real_lib), tmp_path / "run", *mutant.args)
    assert outcome.exit_code == 2, outcome.describe()
    assert outcome.summary_exit == 2, outcome.describe()
    assert not any(outcome.counts[v] for v in BAD_VERDICTS), outcome.describe()
    missing = [c for c in mutant.clauses if c not in outcome.gaps]
    assert not missing, f"not named as not demonstrated: {missing}\n{outcome.gaps}"
    if mutant.reading is not None:
        assert all(f"{mutant.reading}:" in outcome.gaps[c] for c in mutant.clauses), outcome.gaps


@pytest.mark.parametrize("variation", rows(LEGAL))
def test_legal_variation_is_conformant(variation: Legal, real_lib: Path, tmp_path: Path) -> None:
    outcome = run_kit(build(variation.mutation, tmp_path, real_lib), tmp_path / "run", *variation.args)
    assert outcome.exit_code == variation.exit_code, outcome.describe() + f"\n{outcome.gaps}"
    assert outcome.summary_exit == variation.exit_code, outcome.describe()
    assert not any(outcome.counts[v] for v in BAD_VERDICTS), outcome.describe()
    assert outcome.counts["PASS"] > 0, outcome.describe()
    if variation.no_warn:
        assert not outcome.warned, outcome.warned


def test_a_waived_failure_leaves_what_it_hid_undemonstrated(real_lib: Path, tmp_path: Path) -> None:
    """M_MAP_ENOENT never delivers onPreempt: waiving that clause's FAILs leaves the run without a FAIL, but the
    clauses those failures hid, virtual-only ones included (the interposer runs the vnpu control's scenarios),
    are not demonstrated: incomplete, never "conformant with N waivers"."""
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        "waivers:\n  - clause: preempt-onpreempt-purpose\n    device: '*'\n    reason: a known missing onPreempt\n"
        "    expires: 2099-01-01\n",
        encoding="utf-8",
    )
    outcome = run_kit(build("M_MAP_ENOENT", tmp_path, real_lib), tmp_path / "run", "--waivers", str(waivers))
    assert outcome.exit_code == 2, outcome.describe()
    assert outcome.counts["WAIVED"] > 0 and not outcome.counts["FAIL"], outcome.describe()
    hidden = {c for c, why in outcome.gaps.items() if "hidden by a WAIVED on preempt-onpreempt-purpose" in why}
    assert "preempt-callback-any-thread" in hidden, outcome.gaps
    # virtual-only clauses the vnpu control's scenarios were to show: required of this device, not shown
    assert {"preempt-map-fails-after-callback", "preempt-after-free-race"} <= set(outcome.gaps), outcome.gaps
