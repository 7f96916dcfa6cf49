"""`npuconf report RUN --baseline OLD`: per clause and device, what newly fails and what was fixed, and
what changed in the behaviour atlas.

Both runs are read through the one clause answer (reports.answers.clause_answers): a clause *fails* on a device
when a FAIL or CRASH names it there. A **new failure** fails in the run and did not in the baseline; a
**fix** failed in the baseline and now has an answer that is no failure (PASS, WARN, WAIVED). What the
run stopped showing counts as new too (**new gaps**): a clause answered in the baseline and not
demonstrated now, and a scenario judged in the baseline that is ERROR, TIMEOUT or NOT_EXECUTED now, so a
run that shows less never passes `--fail-on-new` as if nothing had changed.
The **atlas changes** are the questions of the behaviour atlas (reports.answers.atlas) whose answer differs
between the two devices' atlases. Devices are matched by serial; when each run has exactly one device
and their serials differ (two local runs, one phone re-attached), those two are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from floor.words import counted
from reference_model.verdicts import UNJUDGED_ORDER

from ..recorded.results import RunResults
from .atlas import ASPECT_TITLES, AtlasChange, atlas_changes, device_atlas
from .clause_answers import ClauseAnswers, clause_answers

# The console lists at most this many atlas changes per aspect (report.html and atlas.json hold them all).
ATLAS_LINES_PER_ASPECT: Final = 5


@dataclass(frozen=True, slots=True)
class ClauseChange:
    clause: str  # a clause; for a "not judged" change, the scenario
    device: str
    before: str  # the baseline's answer ("absent": the baseline has no answer for it there)
    now: str
    kind: str = "new failure"  # or "not demonstrated", "not judged" (a new gap), "fixed"

    def line(self) -> str:
        return f"{self.clause} on {self.device}: {self.before} -> {self.now}"


# A result that judged nothing: in the run, where the baseline judged the scenario, it is a new gap.
UNJUDGED: Final = frozenset(UNJUDGED_ORDER)


@dataclass(frozen=True, slots=True)
class BaselineComparison:
    baseline: str  # run id
    run: str
    devices: tuple[tuple[str, str], ...]  # (baseline device, run device) compared
    new_failures: tuple[ClauseChange, ...]
    fixed: tuple[ClauseChange, ...]
    atlas: tuple[tuple[str, AtlasChange], ...] = ()  # (run device, change)
    new_gaps: tuple[ClauseChange, ...] = ()  # kind "not demonstrated" (a clause) or "not judged" (a scenario)

    @property
    def new(self) -> int:
        """What `--fail-on-new` fails on: new failures and new gaps."""
        return len(self.new_failures) + len(self.new_gaps)

    def lines(self) -> list[str]:
        pairs = ", ".join(old if old == new else f"{old} -> {new}" for old, new in self.devices) or "none"
        out = [
            f"baseline {self.baseline}: {counted(len(self.new_failures), 'clause')} newly failing, "
            f"{len(self.fixed)} fixed, {len(self.new_gaps)} newly not demonstrated or not judged (devices: {pairs})"
        ]
        out += [f"  new failure: {c.line()}" for c in self.new_failures]
        out += [f"  newly {c.kind}: {c.line()}" for c in self.new_gaps]
        out += [f"  fixed: {c.line()}" for c in self.fixed]
        out.append(f"atlas: {counted(len(self.atlas), 'answer')} changed since the baseline")
        for aspect in ASPECT_TITLES:
            changes = [(device, c) for device, c in self.atlas if c.aspect is aspect]
            out += [f"  atlas on {device}: {c.line()}" for device, c in changes[:ATLAS_LINES_PER_ASPECT]]
            if len(changes) > ATLAS_LINES_PER_ASPECT:
                out.append(f"  atlas: and {len(changes) - ATLAS_LINES_PER_ASPECT} more {aspect} changes "
                           "(report.html lists them all)")
        return out


def _answer_text(answers: ClauseAnswers, clause: str, device: str) -> str:
    answer = answers.get(clause, device)
    return answer.text() if answer is not None else "absent"


def _failing(answers: ClauseAnswers, clause: str, device: str) -> bool:
    answer = answers.get(clause, device)
    return answer is not None and answer.verdict is not None and answer.verdict.blocking


def _answered(answers: ClauseAnswers, clause: str, device: str) -> bool:
    """The clause has an answer there (demonstrated, warned, waived or failing), not "not demonstrated"."""
    answer = answers.get(clause, device)
    return answer is not None and answer.verdict is not None


def device_pairs(old: Sequence[str], new: Sequence[str]) -> tuple[tuple[str, str], ...]:
    common = [serial for serial in new if serial in old]
    if not common and len(old) == 1 and len(new) == 1:
        return ((old[0], new[0]),)
    return tuple((serial, serial) for serial in common)


def compare_runs(baseline: RunResults, run: RunResults, baseline_id: str, run_id: str) -> BaselineComparison:
    before, now = clause_answers(baseline), clause_answers(run)
    pairs = device_pairs(before.devices, now.devices)
    clauses = sorted(set(before.by_clause) | set(now.by_clause))
    new_failures: list[ClauseChange] = []
    fixed: list[ClauseChange] = []
    gaps: list[ClauseChange] = []
    for old_device, device in pairs:
        for clause in clauses:
            was, fails = _failing(before, clause, old_device), _failing(now, clause, device)
            texts = (_answer_text(before, clause, old_device), _answer_text(now, clause, device))
            if fails and not was:
                new_failures.append(ClauseChange(clause, device, *texts))
            elif _answered(before, clause, old_device) and not _answered(now, clause, device):
                gaps.append(ClauseChange(clause, device, *texts, kind="not demonstrated"))
            elif was and not fails:
                fixed.append(ClauseChange(clause, device, *texts, kind="fixed"))
        judged = {r.scenario: r.verdict for r in baseline.for_device(old_device)}
        for record in run.for_device(device):
            earlier = judged.get(record.scenario)
            if record.verdict in UNJUDGED and earlier is not None and earlier not in UNJUDGED:
                gaps.append(ClauseChange(record.scenario, device, str(earlier), str(record.verdict), "not judged"))
    changed = tuple(
        (device, change)
        for old_device, device in pairs
        for change in atlas_changes(device_atlas(baseline, old_device), device_atlas(run, device))
    )
    return BaselineComparison(baseline_id, run_id, pairs, tuple(new_failures), tuple(fixed), changed, tuple(gaps))
