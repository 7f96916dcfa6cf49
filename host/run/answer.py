"""A run's answer on stdout, as `npuconf run` prints it: the claim's headline, the verdict counts, the
configuration, what was not demonstrated, and the files written. `report --merge` prints a merged run
the same way."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reference_model.verdicts import Verdict
from reports.answers.claim import Claim


def print_answer(claim: Claim, counts: Mapping[Verdict, int], files: Mapping[str, Path]) -> None:
    shown = ", ".join(f"{v.value} {counts[v]}" for v in Verdict if counts.get(v))
    print(claim.headline)
    print(f"verdicts: {shown or 'nothing ran'}")
    print(f"configuration: {claim.configuration_text()}")
    for gap in claim.gaps:
        print(f"not demonstrated on {gap.line()}")
    for name, path in files.items():
        print(f"{name}: {path}")
