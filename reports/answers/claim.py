"""The claim of a run ("The answer of a run" in the design): one pure function over the recorded run.

`claim_of(run)` reads the recorded run (the plan's profile and filters, the device records and the
result records: their verdicts) and takes from the kit itself (reports/recorded/kit.py) every fact the kit
knows: the clauses each scenario cites, the device-testable clauses, those a device without buffers
or with 32-bit pointers can exercise, and the hash of the corpus it releases. Every place that states
a run's answer (`npuconf run`, `rejudge`, `report`, `verify`, the HTML header, summary.json, junit.xml
properties, the bundle manifest) calls it; there is no second implementation.

Levels and exit codes:
- conformant (0): the whole released corpus under published-37, no filter, no FAIL, CRASH, TIMEOUT,
  ERROR or NOT_EXECUTED, and every device-testable clause demonstrated on every device
  (reports/answers/demonstration.py: a PASS or WARN whose trace showed the behaviour the clause speaks of) — and on
  a device that ran the scenarios of virtual-only clauses (the vnpu control, a declared capacity), those
  clauses too;
- conformant without NPU buffers (0): as above, for a device that declares no `android.hardware.npu`
  feature and supports no pair, judged on the device-testable clauses that apply without a buffer;
- non-conformant (1): any FAIL or CRASH, also in a partial run;
- incomplete (2): nothing failed, but something was not judged or a clause the claim requires was not
  demonstrated on some device (named, with what stood in the way); also a run whose plan records no
  claim basis (older kit),
  and a sharded run that lost a device mid-run (`lost` records: docs/sharding.md);
- partial (0): a filtered run (or one whose filters are malformed), another profile or another corpus:
  never a conformance claim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from floor.safe_io import safe_text
from reference_model.profiles import PUBLISHED
from reference_model.verdicts import SEVERITY, UNJUDGED_ORDER, RunExit, Verdict

from ..recorded.plan_filters import filters_of
from ..recorded.plan_options import read_plan_options
from ..recorded.results import ResultRecord, RunResults
from .demonstration import AnswerIndex

NORMATIVE_PROFILE: Final = PUBLISHED.name
NPU_FEATURE: Final = "android.hardware.npu"
PARTIAL_HEADLINE: Final = "partial run, not a conformance claim"


class ClaimLevel(StrEnum):
    CONFORMANT = "conformant"
    CONFORMANT_WITHOUT_BUFFERS = "conformant without NPU buffers"
    NON_CONFORMANT = "non-conformant"
    INCOMPLETE = "incomplete"
    PARTIAL = "partial"


_EXIT: Final = {
    ClaimLevel.CONFORMANT: RunExit.CONFORMANT,
    ClaimLevel.CONFORMANT_WITHOUT_BUFFERS: RunExit.CONFORMANT,
    ClaimLevel.NON_CONFORMANT: RunExit.NON_CONFORMANT,
    ClaimLevel.INCOMPLETE: RunExit.INCOMPLETE,
    ClaimLevel.PARTIAL: RunExit.CONFORMANT,
}


@dataclass(frozen=True, slots=True)
class Gap:
    """Clauses the claim requires that a device did not demonstrate, and what stood in the way."""

    device: str
    why: str
    clauses: tuple[str, ...]

    def line(self) -> str:
        return f"{self.device}: {len(self.clauses)} not demonstrated ({self.why}): {', '.join(self.clauses)}"


@dataclass(frozen=True, slots=True)
class Claim:
    level: ClaimLevel
    exit_code: RunExit
    headline: str
    partial: tuple[str, ...]  # why the run is partial (empty: the run could be a claim)
    gaps: tuple[Gap, ...]  # required clauses not demonstrated, per device and reason
    without_buffers: tuple[str, ...]  # devices judged in the "without NPU buffers" scope
    waivers: int
    warnings: int
    configuration: tuple[tuple[str, str], ...]  # (name, value) of every outcome-changing option
    lost: tuple[tuple[str, str], ...] = ()  # (device, why) a sharded run lost mid-run

    @property
    def is_claim(self) -> bool:
        return self.level in (ClaimLevel.CONFORMANT, ClaimLevel.CONFORMANT_WITHOUT_BUFFERS)

    def configuration_text(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in self.configuration)

    def to_json(self) -> dict[str, object]:
        return {
            "level": self.level.value,
            "exit_code": int(self.exit_code),
            "headline": self.headline,
            "partial": list(self.partial),
            "not_demonstrated": [{"device": g.device, "why": g.why, "clauses": list(g.clauses)} for g in self.gaps],
            "without_npu_buffers": list(self.without_buffers),
            "waivers": self.waivers,
            "warnings": self.warnings,
            "configuration": dict(self.configuration),
            **({"lost_devices": [{"device": d, "reason": r} for d, r in self.lost]} if self.lost else {}),
        }


def _text(value: object, default: str = "-") -> str:
    return default if value is None or value == "" else str(value)


def configuration(run: RunResults) -> tuple[tuple[str, str], ...]:
    """The run's outcome-changing options as recorded in its plan."""
    plan = run.plan
    if plan is None:
        return ()
    options = read_plan_options(plan.options)
    filters = filters_of(options).flags()
    return (
        ("target", _text(plan.target)),
        ("impl", _text(options.impl, "vnpu")),
        ("personality", _text(options.personality)),
        ("policy", _text(options.policy)),
        ("capacity", _text(options.capacity, "default")),
        ("profile", _text(plan.profile)),
        ("filters", "; ".join(filters) or "none"),
        ("waivers", _text(options.waivers, "none")),
    )


def partial_reasons(run: RunResults) -> tuple[str, ...]:
    """Why the recorded run cannot be a conformance claim whatever its verdicts."""
    plan = run.plan
    if plan is None:
        return ()
    reasons: list[str] = []
    if plan.profile != NORMATIVE_PROFILE:
        reasons.append(f"profile {plan.profile or '?'} (only {NORMATIVE_PROFILE} is normative)")
    reasons.extend(filters_of(read_plan_options(plan.options)).reasons())
    if plan.corpus_hash != run.kit.basis.corpus_hash:
        reasons.append("the corpus is not the one this kit released (corpus hash differs)")
    return tuple(reasons)


def _device_without_buffers(info: Mapping[str, object]) -> bool:
    """Declares no NPU feature and discovery found no supported pair (an empty list, not unknown)."""
    return info.get("npu_feature") is False and info.get("supported_pairs") == []


# The capabilities that decide NOT_APPLICABLE: devices of one shard group must agree on them for the
# group's union of results to stand for each of them (docs/sharding.md).
_CAPABILITIES: Final = ("supported_pairs", "vnpu_control", "npu_feature", "capacity", "policy")


def _units(run: RunResults) -> list[tuple[str, tuple[str, ...]]]:
    """What the claim is earned on: each device, or in a sharded run each build (shard group) whose
    devices report the same capabilities, over the union of its results. A group whose devices differ
    falls back to its devices one by one: the union must not cover a clause one of them could not."""
    plan = run.plan
    if plan is None or not plan.shard:
        return [(serial, (serial,)) for serial in run.device_serials]
    members: dict[str, list[str]] = {}
    for serial in run.device_serials:
        members.setdefault(run.groups.get(serial, f"device:{serial}"), []).append(serial)
    units: list[tuple[str, tuple[str, ...]]] = []
    for group, serials in members.items():
        caps = {tuple(repr(run.devices.get(s, {}).get(key)) for key in _CAPABILITIES) for s in serials}
        if len(serials) == 1 or len(caps) > 1:
            units.extend((serial, (serial,)) for serial in serials)
        else:
            units.append((f"build {group} ({', '.join(serials)})", tuple(serials)))
    return units


def required_clauses(
    run: RunResults, records: Sequence[ResultRecord], infos: Sequence[Mapping[str, object]]
) -> frozenset[str]:
    """What the claim requires of a device (or of a build's devices, ``records`` being their results):
    every device-testable clause (without the 64-bit-pointer ones on a 32-bit device; only those that apply
    without a buffer on a device without NPU buffers), and every virtual-only clause cited by a scenario
    that needs a virtual NPU (KitFacts.virtual_scenarios) and that the device could run (anything but
    NOT_APPLICABLE): a target that runs those scenarios is judged on them."""
    basis = run.kit.basis
    required = basis.device_testable
    if any(info.get("pointer_bits") == 32 for info in infos):
        required = required - basis.pointer_64_only  # a 32-bit pointer cannot carry a 64-bit cookie
    if infos and all(_device_without_buffers(info) for info in infos):
        return required & basis.without_buffers
    virtual = run.kit.virtual_scenarios
    ran = {c for r in records if r.scenario in virtual and r.verdict is not Verdict.NOT_APPLICABLE
           for c in run.kit.clauses_of(r.scenario)}
    return required | (basis.virtual_only & ran)


def _gaps(run: RunResults, label: str, records: Sequence[ResultRecord], required: frozenset[str]) -> list[Gap]:
    """The required clauses whose answer over ``records`` is "not demonstrated" (the answer every output
    gives: demonstration.AnswerIndex), grouped by what stood in the way."""
    index = AnswerIndex(label, records, run.kit.clauses_of)
    by_why: dict[str, list[str]] = {}
    for clause in sorted(required):
        answer = index.answer(clause)
        if answer.verdict is None:
            by_why.setdefault(answer.why, []).append(clause)
    return [Gap(label, why, tuple(clauses)) for why, clauses in sorted(by_why.items(), key=lambda i: -len(i[1]))]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def claim_of(run: RunResults) -> Claim:
    """The claim of a recorded run (see the module docstring), derived once per run: every report and every
    device's section asks for it, and deriving it reads every result."""
    return run.derived(_claim)


def problems_of(run: RunResults) -> tuple[str, ...]:
    """What a reader of the run is told is wrong with it: the records' problems (`RunResults.problems`) and,
    where its end record states an exit code other than its claim's, that disagreement (the results are used)."""
    end = run.end
    if end is None or end.exit_code is None:
        return run.problems
    claim = claim_of(run)
    if end.exit_code == claim.exit_code:
        return run.problems
    return (
        *run.problems,
        safe_text(
            f"{run.path.name} line {end.line}: the end record says exit code {end.exit_code}, "
            f"the results give {int(claim.exit_code)} ({claim.headline}); the results are used"
        ),
    )


def _claim(run: RunResults) -> Claim:
    config = configuration(run)
    lost = tuple(sorted(run.lost.items()))
    verdicts = [r.verdict for r in run.results]
    waivers = sum(1 for v in verdicts if v is Verdict.WAIVED)
    warnings = sum(1 for v in verdicts if v is Verdict.WARN)

    def make(
        level: ClaimLevel,
        headline: str,
        partial: Sequence[str] = (),
        gaps: Sequence[Gap] = (),
        scope: Sequence[str] = (),
    ) -> Claim:
        return Claim(
            level, _EXIT[level], headline, tuple(partial), tuple(gaps), tuple(scope), waivers, warnings, config, lost
        )

    plan = run.plan
    if plan is None:
        return make(ClaimLevel.INCOMPLETE, "incomplete: results.jsonl has no plan record")
    if not run.results:
        return make(ClaimLevel.INCOMPLETE, "incomplete: nothing ran")
    partial = partial_reasons(run)
    blocking = [v for v in SEVERITY if v.blocking and v in verdicts]
    suffix = f" ({PARTIAL_HEADLINE})" if partial else ""
    if blocking:
        counts = ", ".join(f"{sum(1 for v in verdicts if v is b)} {b.value}" for b in blocking)
        return make(ClaimLevel.NON_CONFORMANT, f"non-conformant: {counts}{suffix}", partial)
    unjudged = [(v, sum(1 for x in verdicts if x is v)) for v in UNJUDGED_ORDER if v in verdicts]
    if unjudged:
        counts = ", ".join(f"{n} {v.value}" for v, n in unjudged)
        reasons = Counter(r.reason for r in run.results if r.verdict in UNJUDGED_ORDER and r.reason)
        why = f" ({reasons.most_common(1)[0][0]})" if reasons else ""
        return make(ClaimLevel.INCOMPLETE, f"incomplete: {counts} not judged{why}{suffix}", partial)
    if plan.claim_basis is None:
        return make(
            ClaimLevel.INCOMPLETE,
            "incomplete: the plan records no claim basis (a run of an older kit); run it again to make a claim",
        )
    if lost:
        device, why = lost[0]
        more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
        headline = (
            f"incomplete: the run lost device {device}{more} mid-run ({why}); its build's other devices ran "
            "its scenarios, but a run that lost a device is no claim"
        )
        return make(ClaimLevel.INCOMPLETE, headline + suffix, partial)
    if partial:
        return make(ClaimLevel.PARTIAL, f"{PARTIAL_HEADLINE}: {'; '.join(partial)}", partial)
    gaps: list[Gap] = []
    scope: list[str] = []
    units = _units(run)
    for label, serials in units:
        infos = [run.devices.get(serial, {}) for serial in serials]
        records = [r for r in run.results if r.device in serials]
        if all(_device_without_buffers(info) for info in infos):
            scope.append(label)
        gaps.extend(_gaps(run, label, records, required_clauses(run, records, infos)))
    if gaps:
        first = gaps[0]
        total = sum(len(g.clauses) for g in gaps)
        devices = sorted({g.device for g in gaps})
        where = first.device if len(devices) == 1 else f"{len(devices)} devices"
        clause = f"{first.clauses[0]}: " if len(first.clauses) == 1 else ""
        counted = _plural(total, "required clause")
        headline = f"incomplete: {counted} not demonstrated on {where} ({clause}{first.why})"
        return make(ClaimLevel.INCOMPLETE, headline, gaps=gaps, scope=scope)
    named = [_plural(n, word) for n, word in ((waivers, "waiver"), (warnings, "warning")) if n]
    level = ClaimLevel.CONFORMANT_WITHOUT_BUFFERS if scope else ClaimLevel.CONFORMANT
    headline = level.value + (f" with {', '.join(named)}" if named else "")
    if scope and len(scope) < len(units):
        headline += f" ({', '.join(scope)} without NPU buffers)"
    return make(level, headline, scope=scope)
