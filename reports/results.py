"""results.jsonl as values (docs/formats.md §6): the only input of every report.

`load_results` never raises on bad content: a line that does not parse, or lacks a field a report
needs, is skipped and described in `RunResults.problems` with its line number; the rest is used.
Planned scenario × device pairs with no result record become NOT_EXECUTED.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from reference_model.errors import KitError
from reference_model.trace import Call, Cb, read_line
from reference_model.verdicts import RunExit, Verdict, worst
from reference_model.vocabulary import Op

from .claim import Claim, claim_of
from .kit import KitFacts, kit_facts
from .limits import limit, over
from .plan_filters import plan_filters
from .safe_io import UnsafeOutput, read_unfollowed, visible_escape

RESULTS_SCHEMA: Final = 1
RESULTS_NAME: Final = "results.jsonl"

# Worst last: the order a matrix cell uses to pick "the worst verdict" among several scenarios.

NOT_EXECUTED_REASON: Final = "planned, but results.jsonl holds no result for it"

# Characters XML 1.0 forbids (and lone surrogates, which no UTF-8 writer accepts).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def safe_text(text: str) -> str:
    """`text` with every character XML 1.0 forbids written as a visible escape (`\\x1b`, `\\ud800`)."""
    return _FORBIDDEN.sub(visible_escape, text)


def unreadable_json(exc: ValueError | RecursionError) -> str:
    """Why a line that is JSON text could not be decoded, other than a syntax error (one line)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"an integer of more than {sys.get_int_max_str_digits()} digits"


def render_value(value: object) -> str:
    """One-line text for a JSON value: strings as they are, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def read_results_bytes(path: Path) -> bytes:
    """The bytes of a results.jsonl, never read through a symlink (safe_io.read_unfollowed)."""
    try:
        return read_unfollowed(path)
    except UnsafeOutput:
        raise ResultsUnreadable(path, "another user's symlink is on its path, never read through") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsUnreadable(path, "it is a symlink; the kit never reads a run's results through one") from None
        raise ResultsUnreadable(path, exc.strerror or type(exc).__name__) from exc


class ResultsUnreadable(KitError, OSError):
    """results.jsonl cannot be opened at all (missing file, permission, a directory)."""

    def __init__(self, path: Path, cause: str) -> None:
        self.path = path
        self.cause = cause
        super().__init__(
            f"{path}: cannot read the run's results ({cause}); pass the run's output directory or its results.jsonl"
        )

    def __reduce__(self) -> tuple[type[ResultsUnreadable], tuple[Path, str]]:
        return (type(self), (self.path, self.cause))


@dataclass(frozen=True, slots=True)
class PlannedScenario:
    id: str
    title: str
    chapter: str
    clauses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    schema: int
    run_id: str
    started: str
    kit_version: str
    vocabulary: str
    profile: str
    target: str
    devices: tuple[str, ...]
    scenarios: tuple[PlannedScenario, ...]
    corpus_hash: str
    model_hash: str
    options: Mapping[str, object]
    shard: bool = False  # `npuconf run --shard`: each group (build) runs every scenario once, on one of its devices
    claim_basis: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first event the model could not accept (formats §6)."""

    step: int | None
    event: int | None
    observed: object
    allowed: tuple[object, ...]
    clause: str
    quote: str
    message: str

    def one_line(self) -> str:
        where = f"step {self.step}" if self.step is not None else "teardown"
        return f"{self.clause}: {where}: observed {render_value(self.observed)}; allowed: {self.allowed_text()}"

    def allowed_text(self) -> str:
        return " | ".join(render_value(a) for a in self.allowed) or "nothing"

    def full_text(self) -> str:
        lines = [self.one_line()]
        if self.message:
            lines.append(self.message)
        lines.append(f"step: {self.step if self.step is not None else '-'}")
        lines.append(f"trace event: {self.event if self.event is not None else '-'}")
        lines.append(f"observed: {render_value(self.observed)}")
        lines.append(f"allowed: {self.allowed_text()}")
        lines.append(f"clause: {self.clause}")
        if self.quote:
            lines.append(f"spec: \u201c{self.quote}\u201d")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One scenario on one device: a `result` record, or a computed NOT_EXECUTED (`recorded` false)."""

    device: str
    scenario: str
    chapter: str
    title: str
    clauses: tuple[str, ...]
    verdict: Verdict
    reason: str
    divergence: Divergence | None
    discrepancy: str | None
    waiver: str | None
    slots: Mapping[str, object]
    trace: tuple[str, ...]
    exit: Mapping[str, object] | None
    duration_ms: float | None
    finished: str | None
    line: int | None
    recorded: bool = True
    origin: str | None = None  # "host": an ERROR the host caused (disk full); `--resume` runs it again
    allocations_refused: bool = False  # passed, but the device legally refused its allocations
    attempts: int = 1

    def trace_excerpt(self, lines: int = 40) -> tuple[str, ...]:
        return self.trace[-lines:] if lines > 0 else ()


@dataclass(frozen=True, slots=True)
class EndRecord:
    finished: str
    counts: Mapping[str, int]
    exit_code: int | None
    line: int


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

    @property
    def claim(self) -> Claim:
        """The run's claim (reports/claim.py, the one implementation)."""
        return claim_of(self)

    @property
    def exit_code(self) -> RunExit:
        return self.claim.exit_code

    @property
    def answer(self) -> str:
        return self.claim.level.value

    def for_device(self, serial: str) -> tuple[ResultRecord, ...]:
        return tuple(r for r in self.results if r.device == serial)


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


def counts_by_clause(run: RunResults) -> dict[str, dict[Verdict, int]]:
    out: dict[str, dict[Verdict, int]] = {}
    for record in run.results:
        for clause in record.clauses:
            out.setdefault(clause, empty_counts())[record.verdict] += 1
    return dict(sorted(out.items()))


def worst_by_clause(run: RunResults) -> dict[str, Verdict]:
    """Clause → the worst verdict of any scenario citing it, on any device."""
    out: dict[str, Verdict] = {}
    for clause, counts in counts_by_clause(run).items():
        found = worst(v for v, n in counts.items() if n)
        if found is not None:
            out[clause] = found
    return out


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


def clause_matrix(run: RunResults) -> dict[str, dict[str, list[ResultRecord]]]:
    """Clause → device → the results of the scenarios citing that clause on that device."""
    out: dict[str, dict[str, list[ResultRecord]]] = {}
    for record in run.results:
        for clause in record.clauses:
            out.setdefault(clause, {}).setdefault(record.device, []).append(record)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------
# loading


class _BadRecord(Exception):
    """A record that cannot be used; the message says why (internal to the loader)."""


def _need_str(obj: Mapping[str, object], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        if key not in obj:
            raise _BadRecord(f"lacks {key!r}")
        raise _BadRecord(f"field {key!r} must be a non-empty string, found {value!r}")
    return value


class _Fields:
    """Optional fields: a wrong type falls back to the default and is noted, the record is kept."""

    def __init__(self, obj: Mapping[str, object]) -> None:
        self.obj = obj
        self.notes: list[str] = []

    def _wrong(self, key: str, expected: str) -> None:
        found = repr(self.obj[key])
        found = found if len(found) <= 80 else f"{found[:60]}... ({len(found)} characters)"
        self.notes.append(f"field {key!r} should be {expected}, found {found}; ignored")

    def text(self, key: str, default: str = "") -> str:
        value = self.obj.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        self._wrong(key, "a string")
        return default

    def opt_text(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return value
        self._wrong(key, "a string or null")
        return None

    def number(self, key: str) -> float | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer beyond a float's range
                number = math.inf
            if math.isfinite(number):
                return number
        self._wrong(key, "a finite number")
        return None

    def strings(self, key: str) -> tuple[str, ...] | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self._wrong(key, "a list of strings")
        return None

    def mapping(self, key: str) -> dict[str, object] | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, dict):
            return value
        self._wrong(key, "an object")
        return None


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _parse_plan(obj: Mapping[str, object], notes: list[str]) -> Plan:
    fields = _Fields(obj)
    schema = obj.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise _BadRecord(f"plan field 'schema' must be an integer, found {schema!r}")
    if schema > RESULTS_SCHEMA:
        notes.append(f"plan schema {schema} is newer than this reader (schema {RESULTS_SCHEMA}); read as schema 1")
    run_id = _need_str(obj, "run_id")
    devices = fields.strings("devices") or ()
    raw_scenarios = obj.get("scenarios")
    if not isinstance(raw_scenarios, list):
        raise _BadRecord(f"plan field 'scenarios' must be a list, found {raw_scenarios!r}")
    scenarios: list[PlannedScenario] = []
    for index, item in enumerate(raw_scenarios):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            notes.append(f"plan scenarios[{index}] has no 'id'; ignored")
            continue
        sub = _Fields(item)
        scenario_id: str = item["id"]
        scenarios.append(
            PlannedScenario(
                id=scenario_id,
                title=sub.text("title"),
                chapter=sub.text("chapter") or scenario_id.split(".", 1)[0],
                clauses=sub.strings("clauses") or (),
            )
        )
        notes.extend(f"plan scenarios[{index}]: {note}" for note in sub.notes)
    plan = Plan(
        schema=schema,
        run_id=run_id,
        started=fields.text("started"),
        kit_version=fields.text("kit_version"),
        vocabulary=fields.text("vocabulary"),
        profile=fields.text("profile"),
        target=fields.text("target"),
        devices=devices,
        scenarios=tuple(scenarios),
        corpus_hash=fields.text("corpus_hash"),
        model_hash=fields.text("model_hash"),
        options=fields.mapping("options") or {},
        shard=obj.get("shard") is True,
        claim_basis=fields.mapping("claim_basis"),
    )
    notes.extend(fields.notes)
    return plan


def _parse_divergence(value: object, notes: list[str]) -> Divergence | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        notes.append(f"field 'divergence' should be an object, found {value!r}; ignored")
        return None
    fields = _Fields(value)
    allowed = value.get("allowed")
    divergence = Divergence(
        step=_optional_int(value.get("step")),
        event=_optional_int(value.get("event")),
        observed=value.get("observed"),
        allowed=tuple(allowed) if isinstance(allowed, list) else (() if allowed is None else (allowed,)),
        clause=fields.text("clause", "?"),
        quote=fields.text("quote"),
        message=fields.text("message"),
    )
    notes.extend(f"divergence: {note}" for note in fields.notes)
    return divergence


def _waiver_text(value: object, notes: list[str]) -> str | None:
    """A waiver is written as its reason; a mapping gives its `reason` (plus what it matched)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        reason = value.get("reason")
        rest = {k: v for k, v in value.items() if k != "reason"}
        text = reason if isinstance(reason, str) else ""
        if rest:
            text = f"{text} ({render_value(rest)})" if text else render_value(rest)
        return text or None
    notes.append(f"field 'waiver' should be a string or an object, found {value!r}; ignored")
    return None


def _parse_result(
    obj: Mapping[str, object], line: int, planned_by_id: Mapping[str, PlannedScenario], notes: list[str]
) -> ResultRecord:
    device = _need_str(obj, "device")
    scenario = _need_str(obj, "scenario")
    if "verdict" not in obj:
        raise _BadRecord("lacks 'verdict'")
    raw_verdict = obj["verdict"]
    try:
        verdict = Verdict(str(raw_verdict))
    except ValueError:
        expected = ", ".join(Verdict)
        raise _BadRecord(f"verdict {raw_verdict!r} is not one of {expected}") from None
    planned = planned_by_id.get(scenario)
    fields = _Fields(obj)
    trace_value = obj.get("trace")
    trace: tuple[str, ...] = ()
    if isinstance(trace_value, list):
        trace = tuple(t if isinstance(t, str) else render_value(t) for t in trace_value)
    elif trace_value is not None:
        notes.append(f"field 'trace' should be a list of lines, found {type(trace_value).__name__}; ignored")
    exit_value = obj.get("exit")
    exit_info: dict[str, object] | None = None
    if isinstance(exit_value, dict):
        exit_info = exit_value
    elif exit_value is not None:
        exit_info = {"value": exit_value}
    record = ResultRecord(
        device=device,
        scenario=scenario,
        chapter=fields.text("chapter") or (planned.chapter if planned else scenario.split(".", 1)[0]),
        title=fields.text("title") or (planned.title if planned else ""),
        clauses=fields.strings("clauses") or (planned.clauses if planned else ()),
        verdict=verdict,
        reason=fields.text("reason"),
        divergence=_parse_divergence(obj.get("divergence"), notes),
        discrepancy=fields.opt_text("discrepancy"),
        waiver=_waiver_text(obj.get("waiver"), notes),
        slots=fields.mapping("slots") or {},
        trace=trace,
        exit=exit_info,
        duration_ms=fields.number("duration_ms"),
        finished=fields.opt_text("finished"),
        line=line,
        origin="host" if obj.get("origin") == "host" else None,
        allocations_refused=obj.get("allocations_refused") is True,
        attempts=attempts if isinstance(attempts := obj.get("attempts"), int) and attempts > 0 else 1,
    )
    notes.extend(fields.notes)
    return record


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


def _split_lines(data: bytes) -> Sequence[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def load_results(path: Path, kit: KitFacts | None = None) -> RunResults:
    """Read results.jsonl (or the run directory holding it) into values; see the module docstring.

    `kit` (default: this kit's own, reports/kit.py) gives the clauses a released scenario cites: a
    record's own `clauses` are shown only for scenarios the kit did not release, and never count."""
    if path.is_dir():
        path = path / RESULTS_NAME
    data = read_results_bytes(path)

    name = path.name
    problems: list[str] = []

    def problem(line: int, what: str) -> None:
        problems.append(safe_text(f"{name} line {line}: {what}"))

    plan: Plan | None = None
    planned_by_id: dict[str, PlannedScenario] = {}
    devices: dict[str, Mapping[str, object]] = {}
    groups: dict[str, str] = {}
    device_records = 0
    lost: dict[str, str] = {}  # device -> why a sharded run lost it (`lost` records since the last resume)
    chosen: dict[tuple[str, str], ResultRecord] = {}
    end: EndRecord | None = None

    for number, raw in enumerate(_split_lines(data), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            problem(number, "not valid UTF-8; undecodable bytes replaced by U+FFFD")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            problem(number, f"not JSON ({exc.msg} at column {exc.colno}); line skipped")
            continue
        except (ValueError, RecursionError) as exc:  # the int-string digit limit, or nesting too deep
            problem(number, f"not readable JSON ({unreadable_json(exc)}); line skipped")
            continue
        if not isinstance(obj, dict):
            problem(number, f"expected a JSON object, found {type(obj).__name__}; line skipped")
            continue
        kind = obj.get("kind")
        notes: list[str] = []
        try:
            if kind == "plan":
                if plan is not None:
                    raise _BadRecord("a second plan record")
                if number != 1:
                    notes.append("the plan record should be the first line")
                plan = _parse_plan(obj, notes)
                entries = len(plan.scenarios) * max(1, len(plan.devices))
                if entries > limit("plan_entries"):
                    raise ResultsUnreadable(
                        path,
                        over(
                            "plan_entries",
                            f"the plan declares {len(plan.scenarios)} scenarios x {len(plan.devices)} devices",
                        ),
                    )
                planned_by_id = {s.id: s for s in plan.scenarios}
            elif kind == "device":
                device_records += 1
                if device_records > limit("device_records"):
                    raise ResultsUnreadable(
                        path, over("device_records", f"more than {limit('device_records')} device records")
                    )
                serial = _need_str(obj, "device")
                info = obj.get("info")
                if not isinstance(info, dict):
                    raise _BadRecord(f"field 'info' must be an object, found {info!r}")
                if serial in devices:
                    notes.append(f"device {serial} described again; the later description is used")
                devices[serial] = info
                group = obj.get("group")
                if isinstance(group, str) and group:
                    groups[serial] = group
            elif kind == "result":
                record = _parse_result(obj, number, planned_by_id, notes)
                key = (record.device, record.scenario)
                previous = chosen.get(key)
                if previous is None or (record.finished or "") >= (previous.finished or ""):
                    chosen[key] = record
            elif kind == "end":
                fields = _Fields(obj)
                raw_counts = obj.get("counts")
                counts = (
                    {k: v for k, v in raw_counts.items() if isinstance(v, int)} if isinstance(raw_counts, dict) else {}
                )
                end = EndRecord(
                    finished=fields.text("finished"),
                    counts=counts,
                    exit_code=_optional_int(obj.get("exit_code")),
                    line=number,
                )
                notes.extend(fields.notes)
            elif kind == "resume":
                lost.clear()  # a resume opens every planned device again; the store reads its host
            elif kind == "lost":
                serial = _need_str(obj, "device")
                reason = obj.get("reason")
                lost[serial] = reason if isinstance(reason, str) and reason else "device lost"
            elif kind is None:
                raise _BadRecord("lacks 'kind'")
            else:
                raise _BadRecord(f"unknown kind {kind!r} (expected plan, device, result, lost, resume or end)")
        except _BadRecord as exc:
            problem(number, f"{exc}; line skipped")
            continue
        for note in notes:
            problem(number, note)

    if plan is None:
        problems.append(f"{name}: no plan record; NOT_EXECUTED cannot be computed and the run counts as incomplete")

    if plan is not None:
        problems.extend(safe_text(f"{name}: {m}") for m in plan_filters(plan.options).malformed)
    results = (
        _sharded_results(plan, groups, chosen) if plan is not None and plan.shard else _ordered_results(plan, chosen)
    )
    kit = kit if kit is not None else kit_facts()
    results = tuple(_cited_by_kit(r, kit) for r in results)
    run = RunResults(path, plan, devices, results, end, tuple(problems), groups, kit, lost)
    if end is not None and end.exit_code is not None and end.exit_code != run.exit_code:
        problems.append(
            safe_text(
                f"{name} line {end.line}: the end record says exit code {end.exit_code}, "
                f"the results give {int(run.exit_code)} ({run.claim.headline}); the results are used"
            )
        )
        run = dataclasses.replace(run, problems=tuple(problems))
    return run


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
