"""`npuconf report RUN --baseline OLD`: per clause and device, what newly fails and what was fixed, and
what changed in the behaviour atlas.

Both runs are read through the one clause answer (reports.clause_answers): a clause *fails* on a device
when a FAIL or CRASH names it there. A **new failure** fails in the run and did not in the baseline; a
**fix** failed in the baseline and no longer does (its answer now is shown: PASS, or not demonstrated).
The **atlas changes** are the questions of the behaviour atlas (reports.atlas) whose answer differs
between the two devices' atlases. Devices are matched by serial; when each run has exactly one device
and their serials differ (two local runs, one phone re-attached), those two are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .atlas import ASPECT_TITLES, AtlasChange, atlas_changes, device_atlas
from .clause_answers import ClauseAnswers, clause_answers
from .results import RunResults
from .words import counted

# The console lists at most this many atlas changes per aspect (report.html and atlas.json hold them all).
ATLAS_LINES_PER_ASPECT: Final = 5


@dataclass(frozen=True, slots=True)
class ClauseChange:
    clause: str
    device: str
    before: str  # the baseline's answer ("absent": the baseline has no answer for it there)
    now: str

    def line(self) -> str:
        return f"{self.clause} on {self.device}: {self.before} -> {self.now}"


@dataclass(frozen=True, slots=True)
class BaselineComparison:
    baseline: str  # run id
    run: str
    devices: tuple[tuple[str, str], ...]  # (baseline device, run device) compared
    new_failures: tuple[ClauseChange, ...]
    fixed: tuple[ClauseChange, ...]
    atlas: tuple[tuple[str, AtlasChange], ...] = ()  # (run device, change)

    def lines(self) -> list[str]:
        pairs = ", ".join(old if old == new else f"{old} -> {new}" for old, new in self.devices) or "none"
        out = [
            f"baseline {self.baseline}: {counted(len(self.new_failures), 'clause')} newly failing, "
            f"{len(self.fixed)} fixed "
            f"(devices: {pairs})"
        ]
        out += [f"  new failure: {c.line()}" for c in self.new_failures]
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
    for old_device, device in pairs:
        for clause in clauses:
            was, fails = _failing(before, clause, old_device), _failing(now, clause, device)
            if was == fails:
                continue
            change = ClauseChange(clause, device, _answer_text(before, clause, old_device),
                                  _answer_text(now, clause, device))
            (new_failures if fails else fixed).append(change)
    changed = tuple(
        (device, change)
        for old_device, device in pairs
        for change in atlas_changes(device_atlas(baseline, old_device), device_atlas(run, device))
    )
    return BaselineComparison(baseline_id, run_id, pairs, tuple(new_failures), tuple(fixed), changed)
