"""results.jsonl as values (docs/formats.md §6): the only input of every report.

`load_results` never raises on bad content: a line that does not parse, or lacks a field a report
needs, is skipped and described in `RunResults.problems` with its line number; the rest is used.
Planned scenario × device pairs with no result record become NOT_EXECUTED.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar, cast

from floor.safe_io import safe_text as safe_text
from reference_model.divergence import Divergence as Divergence
from reference_model.divergence import render_value as render_value
from reference_model.trace import Call, Cb, read_line
from reference_model.verdicts import Verdict
from reference_model.vocabulary import Op

from .kit import KitFacts, kit_facts
from .plan_options import read_plan_options
from .records import RESULTS_NAME as RESULTS_NAME
from .records import RESULTS_SCHEMA as RESULTS_SCHEMA
from .records import DeviceRecord as DeviceRecord
from .records import EndRecord as EndRecord
from .records import LostRecord as LostRecord
from .records import Plan as Plan
from .records import PlannedScenario as PlannedScenario
from .records import Records, read_records
from .records import ResultRecord as ResultRecord
from .records import ResultsUnreadable as ResultsUnreadable
from .records import ResumeRecord as ResumeRecord
from .records import read_results_bytes as read_results_bytes
from .records import unreadable_json as unreadable_json

NOT_EXECUTED_REASON: Final = "planned, but results.jsonl holds no result for it"

_Derived = TypeVar("_Derived")


@dataclass(frozen=True, slots=True)
class RunResults:
    path: Path
    plan: Plan | None
    devices: Mapping[str, Mapping[str, object]]
    results: tuple[ResultRecord, ...]
    end: EndRecord | None
    problems: tuple[str, ...] = field(default=())
    groups: Mapping[str, str] = field(default_factory=dict)  # device -> shard group (device records' `group`)
    kit: KitFacts = field(default_factory=kit_facts)  # what the claim takes from the kit, not the records
    lost: Mapping[str, str] = field(default_factory=dict)  # device -> why a sharded run lost it mid-run
    # what is derived once and read many times (the claim, results by device): values are immutable, the
    # records are, so a derived value never goes stale; `dataclasses.replace` starts a new one
    _derived: dict[object, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.plan.run_id if self.plan else ""

    @property
    def device_serials(self) -> tuple[str, ...]:
        """Planned devices first (plan order), then any other device that has info or results."""
        seen: dict[str, None] = {}
        if self.plan:
            seen.update(dict.fromkeys(self.plan.devices))
        seen.update(dict.fromkeys(self.devices))
        seen.update(dict.fromkeys(r.device for r in self.results))
        return tuple(seen)

    def derived(self, derive: Callable[[RunResults], _Derived]) -> _Derived:
        """`derive(self)`, computed once and kept with the run: what every report asks for and each derivation
        reads every result of (the claim, reports.answers.claim.claim_of)."""
        if derive not in self._derived:
            self._derived[derive] = derive(self)
        return cast(_Derived, self._derived[derive])

    def for_device(self, serial: str) -> tuple[ResultRecord, ...]:
        """The device's results, in run order (indexed once: a loop over devices stays linear)."""
        index = self._derived.get("by_device")
        if not isinstance(index, dict):
            grouped: dict[str, list[ResultRecord]] = {}
            for record in self.results:
                grouped.setdefault(record.device, []).append(record)
            index = self._derived["by_device"] = {device: tuple(records) for device, records in grouped.items()}
        found = index.get(serial, ())
        return found if isinstance(found, tuple) else ()


# ---------------------------------------------------------------------------------------------
# aggregation helpers


def empty_counts() -> dict[Verdict, int]:
    return dict.fromkeys(Verdict, 0)


def count_verdicts(records: Iterable[ResultRecord]) -> dict[Verdict, int]:
    counts = empty_counts()
    for record in records:
        counts[record.verdict] += 1
    return counts


def counts_by_device(run: RunResults) -> dict[str, dict[Verdict, int]]:
    out = {serial: empty_counts() for serial in run.device_serials}
    for record in run.results:
        out[record.device][record.verdict] += 1
    return out


def counts_by_chapter(run: RunResults) -> dict[str, dict[Verdict, int]]:
    out: dict[str, dict[Verdict, int]] = {}
    for record in run.results:
        out.setdefault(record.chapter, empty_counts())[record.verdict] += 1
    return dict(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class Latency:
    """One callback's delay: the `t` of its `cb` minus the `t` of the latest preceding call of its op."""

    call_line: int  # 1-based lines of the record's trace
    cb_line: int
    ns: int


def callback_latencies(record: ResultRecord, op: Op, kind: str) -> list[Latency]:
    """For each `cb kind=<kind>` in the trace: its `t` minus the `t` of the latest preceding `op` call
    (onAlloc after allocAsync: `Op.ALLOC`, "alloc"; onLoad after loadAsync: `Op.BUF_LOAD`, "load")."""
    latencies: list[Latency] = []
    last_call: tuple[int, int] | None = None  # (line, t)
    for number, line in enumerate(record.trace, 1):
        if op not in line and "cb" not in line:
            continue  # neither such a call nor a callback: not worth decoding
        event = read_line(line, number)  # a malformed line is skipped: the latencies of the others stand
        if isinstance(event, Call) and event.op == op and event.t is not None:
            last_call = (number, event.t)
        elif isinstance(event, Cb) and event.kind == kind and event.t is not None and last_call is not None:
            latencies.append(Latency(last_call[0], number, max(0, event.t - last_call[1])))
    return latencies


def alloc_callback_latencies_ns(record: ResultRecord) -> list[int]:
    """For each `cb kind=alloc` in the trace: its `t` minus the `t` of the latest preceding `alloc` call."""
    return [latency.ns for latency in callback_latencies(record, Op.ALLOC, "alloc")]


def format_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            value = ns / scale
            return f"{value:.3g} {unit}"
    return f"{ns:.0f} ns"


def percentile(values: Sequence[int], q: float) -> float:
    """The smallest value with at least the fraction `q` of `values` at or below it (nearest rank)."""
    ordered = sorted(values)
    k = max(0, math.ceil(q * len(ordered)) - 1)
    return float(ordered[k])


# ---------------------------------------------------------------------------------------------
# loading


def _completed(record: ResultRecord, planned: PlannedScenario | None) -> ResultRecord:
    """A record's chapter, title and clauses, where its line says nothing, from the plan."""
    chapter = record.chapter or (planned.chapter if planned else record.scenario.split(".", 1)[0])
    title = record.title or (planned.title if planned else "")
    clauses = record.clauses or (planned.clauses if planned else ())
    if (chapter, title, clauses) == (record.chapter, record.title, record.clauses):
        return record
    return dataclasses.replace(record, chapter=chapter, title=title, clauses=clauses)


def _not_executed(device: str, planned: PlannedScenario) -> ResultRecord:
    return ResultRecord(
        device=device,
        scenario=planned.id,
        chapter=planned.chapter,
        title=planned.title,
        clauses=planned.clauses,
        verdict=Verdict.NOT_EXECUTED,
        reason=NOT_EXECUTED_REASON,
        divergence=None,
        discrepancy=None,
        waiver=None,
        slots={},
        trace=(),
        exit=None,
        duration_ms=None,
        finished=None,
        line=None,
        recorded=False,
    )


def load_results(path: Path, kit: KitFacts | None = None, records: Records | None = None) -> RunResults:
    """Read results.jsonl (or the run directory holding it) into values; see the module docstring.

    `kit` (default: this kit's own, reports/recorded/kit.py) gives the clauses a released scenario cites: a
    record's own `clauses` are shown only for scenarios the kit did not release, and never count.
    `records`: the file's records when already read (`verify` reads a bundle's member once)."""
    records = records if records is not None else read_records(path)
    path, name = records.path, records.path.name
    problems = list(records.problems)
    plan: Plan | None = None
    planned_by_id: dict[str, PlannedScenario] = {}
    devices: dict[str, Mapping[str, object]] = {}
    groups: dict[str, str] = {}
    lost: dict[str, str] = {}  # device -> why a sharded run lost it (`lost` records since the last resume)
    chosen: dict[tuple[str, str], ResultRecord] = {}
    end: EndRecord | None = None

    for number, record in records.lines:
        if isinstance(record, Plan):
            plan = record
            planned_by_id = {s.id: s for s in plan.scenarios}
        elif isinstance(record, DeviceRecord):
            if record.device in devices:
                problems.append(safe_text(f"{name} line {number}: device {record.device} described again; "
                                          "the later description is used"))
            devices[record.device] = record.info
            if record.group:
                groups[record.device] = record.group
        elif isinstance(record, ResultRecord):
            result = _completed(record, planned_by_id.get(record.scenario))
            key = (result.device, result.scenario)
            previous = chosen.get(key)
            if previous is None or (result.finished or "") >= (previous.finished or ""):
                chosen[key] = result
        elif isinstance(record, EndRecord):
            end = record
            for device, why in record.lost.items():  # the end record repeats them: one edit hides none
                lost.setdefault(device, why)
        elif isinstance(record, ResumeRecord):
            lost.clear()  # a resume opens every planned device again; the store reads its host
        elif isinstance(record, LostRecord):
            lost[record.device] = record.reason

    if plan is None:
        problems.append(f"{name}: no plan record; NOT_EXECUTED cannot be computed and the run counts as incomplete")

    if plan is not None:
        problems.extend(safe_text(f"{name}: {m}") for m in read_plan_options(plan.options).problems)
    results = (
        _sharded_results(plan, groups, chosen) if plan is not None and plan.shard else _ordered_results(plan, chosen)
    )
    kit = kit if kit is not None else kit_facts()
    results = tuple(_cited_by_kit(r, kit) for r in results)
    return RunResults(path, plan, devices, results, end, tuple(problems), groups, kit, lost)


def _cited_by_kit(record: ResultRecord, kit: KitFacts) -> ResultRecord:
    cited = kit.clauses_of(record.scenario)
    return dataclasses.replace(record, clauses=cited) if cited and cited != record.clauses else record


def _ordered_results(plan: Plan | None, chosen: Mapping[tuple[str, str], ResultRecord]) -> tuple[ResultRecord, ...]:
    """Plan order (device, then scenario) with NOT_EXECUTED filled in, then unplanned results."""
    ordered: list[ResultRecord] = []
    used: set[tuple[str, str]] = set()
    if plan is not None:
        for device in plan.devices:
            for planned in plan.scenarios:
                key = (device, planned.id)
                record = chosen.get(key)
                ordered.append(record if record is not None else _not_executed(device, planned))
                used.add(key)
    rest = sorted((k for k in chosen if k not in used), key=lambda k: (k[0], k[1]))
    ordered.extend(chosen[k] for k in rest)
    return tuple(ordered)


def _sharded_results(
    plan: Plan, groups: Mapping[str, str], chosen: Mapping[tuple[str, str], ResultRecord]
) -> tuple[ResultRecord, ...]:
    """A sharded run: per group (devices of one build), each planned scenario once, from whichever of the
    group's devices ran it (the latest when several did); NOT_EXECUTED, on the group's first device, when
    none did. A device with no `group` in its device record is a group of its own. Then unplanned results.
    """
    members: dict[str, list[str]] = {}
    for device in plan.devices:
        members.setdefault(groups.get(device, f"device:{device}"), []).append(device)
    ordered: list[ResultRecord] = []
    used: set[tuple[str, str]] = set()
    for devices in members.values():
        for planned in plan.scenarios:
            found = [chosen[(d, planned.id)] for d in devices if (d, planned.id) in chosen]
            used.update((d, planned.id) for d in devices)
            if found:
                ordered.append(max(found, key=lambda r: r.finished or ""))
            else:
                ordered.append(_not_executed(devices[0], planned))
    rest = sorted((k for k in chosen if k not in used), key=lambda k: (k[0], k[1]))
    ordered.extend(chosen[k] for k in rest)
    return tuple(ordered)
