"""The kit judged by implementations that change one behaviour of libvnpu (issue 11).

Each row of `adversary.MUTANTS` is a violation of the published text: `npuconf run` must exit 1 and a
FAIL must name the row's clause. Each row of `adversary.LEGAL` is allowed by the text: the run must
exit 0 with no FAIL, CRASH, TIMEOUT or ERROR. Both run the whole corpus through the real CLI.
"""

from pathlib import Path

import pytest

from .adversary import BAD_VERDICTS, LEGAL, MUTANTS, Legal, Mutant, build, real_library, run_kit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_lib() -> Path:
    return real_library()


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: f"{m.klass}-{m.mutation}")
def test_mutant_fails_naming_its_clause(mutant: Mutant, real_lib: Path, tmp_path: Path) -> None:
    outcome = run_kit(build(mutant.mutation, tmp_path, real_lib), tmp_path / "run")
    assert outcome.exit_code == 1, outcome.describe()
    assert outcome.summary_exit == 1, outcome.describe()
    assert outcome.failing(mutant.clause), f"no FAIL names {mutant.clause}\n{outcome.describe()}"


@pytest.mark.parametrize("variation", LEGAL, ids=lambda v: f"{v.klass}-{v.mutation}")
def test_legal_variation_is_conformant(variation: Legal, real_lib: Path, tmp_path: Path) -> None:
    outcome = run_kit(build(variation.mutation, tmp_path, real_lib), tmp_path / "run")
    assert outcome.exit_code == 0, outcome.describe()
    assert outcome.summary_exit == 0, outcome.describe()
    assert not any(outcome.counts[v] for v in BAD_VERDICTS), outcome.describe()
    assert outcome.counts["PASS"] > 0, outcome.describe()
