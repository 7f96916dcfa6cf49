"""From one scenario's raw trace to the fields of its result record (used by run and rejudge)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reference_model.caps import DeviceCaps
from reference_model.divergence import Divergence
from reference_model.judge import judge
from reference_model.scenario import Scenario
from reference_model.trace import Call, Cb, Ret, read_line
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver, failing_clauses, find_waiver

from . import digests as digest_memo

# How many times a scenario runs when the device legally refuses its allocations (see allocation_refused).
MAX_ATTEMPTS = 3


FORCED_ENOMEM = "fail_next=ENOMEM"


def allocation_refused(lines: Sequence[str], caps: DeviceCaps) -> bool:
    """An allocation answered ENOMEM on a device that declares no capacity: the published text allows
    it for any request (a real device may be out of memory), so the scenario passed without
    exercising what follows the allocation. A device with a declared capacity (the vnpu) has its
    ENOMEMs predicted exactly by the model: those are what the scenario tests, not a refusal. So are
    the ENOMEMs the scenario forced (`vnpu fail_next=ENOMEM` accepted): one onAlloc each."""
    if caps.capacity_bytes is not None:
        return False
    forcing: set[int] = set()  # steps of fail_next=ENOMEM commands
    forced = 0
    for number, line in enumerate(lines, 1):
        if '"ENOMEM"' not in line and FORCED_ENOMEM not in line and '"vnpu"' not in line:
            continue  # cheap filter: only such a line can carry a refusal or a forcing command
        event = read_line(line, number)
        if isinstance(event, Call) and event.op == "vnpu" and event.args.get("command") == FORCED_ENOMEM:
            forcing.add(event.step)
        elif isinstance(event, Ret) and event.step in forcing and event.op == "vnpu" and event.ret == 0:
            forced += 1
        elif isinstance(event, Cb) and event.kind == "alloc" and event.error == "ENOMEM":
            if forced == 0:
                return True
            forced -= 1
    return False


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reason: str
    divergence: Divergence | None
    discrepancy: str | None
    waiver: str | None
    demonstrated: tuple[str, ...] = ()  # PASS or WARN: the clauses the trace demonstrated (the judge's)


def judge_lines(
    scenario: Scenario,
    lines: Sequence[str],
    caps: DeviceCaps,
    catalogue: Mapping[str, str],
    profile: str,
    waivers: Sequence[Waiver],
    fingerprint: str,
    today: dt.date | None = None,
) -> Outcome:
    judgement = judge(scenario, lines, caps, catalogue, profile, digests=digest_memo.MEMO)
    divergence = judgement.divergence
    outcome = Outcome(judgement.verdict, judgement.reason, divergence, judgement.discrepancy, None,
                      judgement.demonstrated)
    if judgement.verdict is Verdict.FAIL and waivers:
        named = failing_clauses(divergence.clause if divergence else None, scenario.clauses)
        waiver = find_waiver(waivers, scenario.id, named, fingerprint, today or dt.date.today())
        if waiver is not None:
            return Outcome(Verdict.WAIVED, outcome.reason, divergence, outcome.discrepancy, waiver.reason)
    return outcome


def not_run(verdict: Verdict, reason: str) -> Outcome:
    return Outcome(verdict, reason, None, None, None)
