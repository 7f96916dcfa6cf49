"""results.jsonl records (docs/formats.md §6): every kind typed once, one way to write them, one way to read.

Each line is one record: `Plan` (always first), `DeviceRecord`, `ResultRecord`, `LostRecord`,
`ResumeRecord` and `EndRecord`. A record is written with `to_json()` through `ResultsWriter` (appending,
as a run finishes scenarios) or `write_records` (a whole new file: rejudge, merge); a line is read with
`parse_line`, a file with `read_records`. `reports.recorded.results.load_results` builds the run from what
`read_records` gives; the tools that rewrite a run (rejudge, merge) and verify's checks of what each line
says use the same records.

Reading never raises on bad content: a line that does not parse, or lacks a field its kind needs, is
skipped and described with its line number; an optional field of the wrong type is ignored and noted,
and the record is kept. Fields of a newer kit that this one does not model are kept as they were
(`extra`), so a rewriting tool never drops them.
"""

from __future__ import annotations

import errno
import json
import math
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final

from floor.jsonl import dump_line
from floor.limits import limit, over
from floor.safe_io import (
    DISK_ERRNOS,
    OutputFailed,
    UnsafeOutput,
    atomic_output,
    open_append,
    read_unfollowed,
    safe_text,
)
from reference_model.divergence import Divergence, render_value
from reference_model.errors import KitError
from reference_model.verdicts import Verdict

from .outputs import RESULTS_FILE

RESULTS_SCHEMA: Final = 1
RESULTS_NAME: Final = RESULTS_FILE
KINDS: Final = ("plan", "device", "result", "lost", "resume", "end")


class ResultsUnreadable(KitError, OSError):
    """results.jsonl cannot be opened at all (missing file, permission, a directory), or it declares more
    than the kit's limits allow."""

    def __init__(self, path: Path, cause: str) -> None:
        self.path = path
        self.cause = cause
        super().__init__(
            f"{path}: cannot read the run's results ({cause}); pass the run's output directory or its results.jsonl"
        )

    def __reduce__(self) -> tuple[type[ResultsUnreadable], tuple[Path, str]]:
        return (type(self), (self.path, self.cause))


class BadRecord(Exception):
    """A line that holds no usable record; the message says why."""


# ---------------------------------------------------------------------------------------------
# the record kinds


@dataclass(frozen=True, slots=True)
class PlannedScenario:
    id: str
    title: str
    chapter: str
    clauses: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "chapter": self.chapter, "clauses": list(self.clauses)}


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
    host: str | None = None  # the SHA-256 of the recording user's host id (reports/store/identity.py)
    rejudged_from: Mapping[str, object] | None = None  # `npuconf rejudge`: the run it came from
    merged_from: tuple[Mapping[str, object], ...] | None = None  # `npuconf report --merge`: the runs merged
    extra: Mapping[str, object] = field(default_factory=dict)  # fields this kit does not model, as written

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": "plan",
            "schema": self.schema,
            "run_id": self.run_id,
            "started": self.started,
            "kit_version": self.kit_version,
            "vocabulary": self.vocabulary,
            "profile": self.profile,
            "target": self.target,
            "devices": list(self.devices),
            "scenarios": [s.to_json() for s in self.scenarios],
            "corpus_hash": self.corpus_hash,
            "model_hash": self.model_hash,
            "options": dict(self.options),
        }
        if self.host is not None:
            out["host"] = self.host
        if self.shard:
            out["shard"] = True
        if self.claim_basis is not None:
            out["claim_basis"] = dict(self.claim_basis)
        if self.rejudged_from is not None:
            out["rejudged_from"] = dict(self.rejudged_from)
        if self.merged_from is not None:
            out["merged_from"] = [dict(m) for m in self.merged_from]
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}


@dataclass(frozen=True, slots=True)
class DeviceRecord:
    device: str
    info: Mapping[str, object]
    group: str | None = None  # a sharded run: the device's shard group (its build)

    def to_json(self) -> dict[str, object]:
        group = {"group": self.group} if self.group else {}
        return {"kind": "device", "device": self.device, **group, "info": dict(self.info)}


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One scenario on one device: a `result` record, or a computed NOT_EXECUTED (`recorded` false).

    As read from its line, `chapter`, `title` and `clauses` are what the line says ("" and () when it says
    nothing); `load_results` completes them from the plan and takes the clauses of a released scenario
    from the kit."""

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
    logcat: tuple[str, ...] = ()  # an excerpt of a real device's log, for a verdict whose meaning keeps it
    # PASS or WARN: the clauses the trace demonstrated, as the model judged it (sorted); `verify` derives
    # them again from the trace. Empty in a record of an older kit: it then demonstrates nothing.
    demonstrated: tuple[str, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)  # fields this kit does not model, as written

    def trace_excerpt(self, lines: int = 40) -> tuple[str, ...]:
        return self.trace[-lines:] if lines > 0 else ()

    @property
    def failing_clause(self) -> str | None:
        """The clause a FAIL, CRASH or WAIVED result's divergence names (None: none recorded)."""
        return self.divergence.clause if self.divergence is not None and self.verdict.failed else None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": "result",
            "device": self.device,
            "scenario": self.scenario,
            "chapter": self.chapter,
            "title": self.title,
            "clauses": list(self.clauses),
            "verdict": self.verdict.value,
            "reason": self.reason,
            "divergence": self.divergence.to_json() if self.divergence is not None else None,
            "discrepancy": self.discrepancy,
            "waiver": self.waiver,
            "slots": dict(self.slots),
            "trace": list(self.trace),
        }
        if self.exit is not None:
            out["exit"] = dict(self.exit)
        out["duration_ms"] = self.duration_ms
        out["finished"] = self.finished
        if self.attempts != 1:
            out["attempts"] = self.attempts
        if self.allocations_refused:
            out["allocations_refused"] = True
        if self.demonstrated:
            out["demonstrated"] = list(self.demonstrated)
        if self.logcat:
            out["logcat"] = list(self.logcat)
        if self.origin:
            out["origin"] = self.origin
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}


@dataclass(frozen=True, slots=True)
class LostRecord:
    """A sharded run lost this device mid-run (its remaining share went to the build's other devices)."""

    device: str
    group: str | None
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"kind": "lost", "device": self.device, "group": self.group, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ResumeRecord:
    """The first line each `npuconf run --resume` appends: which host resumed the run, and when."""

    run_id: str
    host: str | None
    started: str

    def to_json(self) -> dict[str, object]:
        return {"kind": "resume", "run_id": self.run_id, "host": self.host, "started": self.started}


@dataclass(frozen=True, slots=True)
class EndRecord:
    """The run finished. Its answer is derived by every reader; `exit_code` is only ever read (older kits)."""

    finished: str
    counts: Mapping[str, int]
    exit_code: int | None = None
    line: int | None = None
    # device -> why: the devices the run lost since it started or was last resumed, as its `lost` records
    # say; kept here too, so that removing one record cannot hide that a device was lost
    lost: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": "end", "finished": self.finished, "counts": dict(self.counts)}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.lost:
            out["lost"] = [{"device": device, "reason": reason} for device, reason in self.lost.items()]
        return out


Record = Plan | DeviceRecord | ResultRecord | LostRecord | ResumeRecord | EndRecord


def verdict_counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """An end record's `counts`: verdict -> how many, in the order first seen."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.value] = counts.get(verdict.value, 0) + 1
    return counts


# ---------------------------------------------------------------------------------------------
# writing


def encoded(record: Record) -> bytes:
    """The record's line, newline included."""
    return (dump_line(record.to_json()) + "\n").encode("utf-8")


def write_records(path: Path, records: Iterable[Record]) -> None:
    """Write a whole results.jsonl, replacing `path` atomically (rejudge, merge)."""
    with atomic_output(path) as handle:
        for record in records:
            handle.write(encoded(record))


class ResultsWriter:
    """Thread-safe appender: every record is one line, flushed before the call returns.

    The file is opened without following a symlink. A record that cannot be written (disk full) is
    not retried: the first failure is kept in `failed`, later records are dropped, and the run
    reports it (exit 2) once its threads are done; `--resume` repairs the torn last line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open_append(path)
        self._lock = threading.Lock()
        self.failed: OutputFailed | None = None
        self.lost: dict[str, str] = {}  # the `lost` records written: the end record repeats them

    def write(self, record: Record) -> None:
        data = encoded(record)
        with self._lock:
            if self.failed is not None or self._file.closed:
                return  # a full disk stopped the writer, or a device thread finished after an interrupt
            if isinstance(record, LostRecord):
                self.lost.setdefault(record.device, record.reason)
            try:
                self._file.write(data)
                self._file.flush()
            except OSError as exc:
                if exc.errno not in DISK_ERRNOS:
                    raise
                self.failed = OutputFailed(self.path, exc)

    def close(self) -> None:
        with self._lock:
            try:
                self._file.close()
            except OSError as exc:
                if exc.errno not in DISK_ERRNOS:
                    raise
                self.failed = self.failed or OutputFailed(self.path, exc)

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# reading one line


def _need_str(obj: Mapping[str, object], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        if key not in obj:
            raise BadRecord(f"lacks {key!r}")
        raise BadRecord(f"field {key!r} must be a non-empty string, found {value!r}")
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


def _extra(obj: Mapping[str, object], modelled: Iterable[str]) -> dict[str, object]:
    known = {"kind", *modelled}
    return {k: v for k, v in obj.items() if k not in known}


_PLAN_FIELDS: Final = (
    "schema", "run_id", "started", "kit_version", "vocabulary", "profile", "target", "devices", "scenarios",
    "corpus_hash", "model_hash", "options", "shard", "claim_basis", "host", "rejudged_from", "merged_from",
)
_RESULT_FIELDS: Final = (
    "device", "scenario", "chapter", "title", "clauses", "verdict", "reason", "divergence", "discrepancy", "waiver",
    "slots", "trace", "exit", "duration_ms", "finished", "origin", "allocations_refused", "attempts", "logcat",
    "demonstrated",
)


def _parse_plan(obj: Mapping[str, object], notes: list[str]) -> Plan:
    fields = _Fields(obj)
    schema = obj.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise BadRecord(f"plan field 'schema' must be an integer, found {schema!r}")
    if schema > RESULTS_SCHEMA:
        notes.append(f"plan schema {schema} is newer than this reader (schema {RESULTS_SCHEMA}); read as schema 1")
    run_id = _need_str(obj, "run_id")
    devices = fields.strings("devices") or ()
    raw_scenarios = obj.get("scenarios")
    if not isinstance(raw_scenarios, list):
        raise BadRecord(f"plan field 'scenarios' must be a list, found {raw_scenarios!r}")
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
    host = obj.get("host")
    merged = obj.get("merged_from")
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
        host=host if isinstance(host, str) else None,
        rejudged_from=fields.mapping("rejudged_from"),
        merged_from=tuple(m for m in merged if isinstance(m, dict)) if isinstance(merged, list) else None,
        extra=_extra(obj, _PLAN_FIELDS),
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


def _parse_result(obj: Mapping[str, object], line: int, notes: list[str]) -> ResultRecord:
    device = _need_str(obj, "device")
    scenario = _need_str(obj, "scenario")
    if "verdict" not in obj:
        raise BadRecord("lacks 'verdict'")
    raw_verdict = obj["verdict"]
    try:
        verdict = Verdict(str(raw_verdict))
    except ValueError:
        expected = ", ".join(Verdict)
        raise BadRecord(f"verdict {raw_verdict!r} is not one of {expected}") from None
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
        chapter=fields.text("chapter"),
        title=fields.text("title"),
        clauses=fields.strings("clauses") or (),
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
        logcat=fields.strings("logcat") or (),
        demonstrated=fields.strings("demonstrated") or (),
        extra=_extra(obj, _RESULT_FIELDS),
    )
    notes.extend(fields.notes)
    return record


def _parse_device(obj: Mapping[str, object]) -> DeviceRecord:
    serial = _need_str(obj, "device")
    info = obj.get("info")
    if not isinstance(info, dict):
        raise BadRecord(f"field 'info' must be an object, found {info!r}")
    group = obj.get("group")
    return DeviceRecord(serial, info, group if isinstance(group, str) and group else None)


def _parse_end(obj: Mapping[str, object], line: int, notes: list[str]) -> EndRecord:
    fields = _Fields(obj)
    raw_counts = obj.get("counts")
    counts = {k: v for k, v in raw_counts.items() if isinstance(v, int)} if isinstance(raw_counts, dict) else {}
    lost: dict[str, str] = {}
    raw_lost = obj.get("lost", [])
    for entry in raw_lost if isinstance(raw_lost, list) else [None]:
        device = entry.get("device") if isinstance(entry, dict) else None
        if not isinstance(device, str) or not device:
            notes.append("field 'lost' holds an entry that is not a {device, reason} object; taken as a lost device")
            device = "(unnamed device)"
        reason = entry.get("reason") if isinstance(entry, dict) else None
        lost[device] = reason if isinstance(reason, str) and reason else "device lost"
    end = EndRecord(fields.text("finished"), counts, _optional_int(obj.get("exit_code")), line, lost)
    notes.extend(fields.notes)
    return end


def _parse_lost(obj: Mapping[str, object]) -> LostRecord:
    serial = _need_str(obj, "device")
    reason, group = obj.get("reason"), obj.get("group")
    return LostRecord(
        serial,
        group if isinstance(group, str) and group else None,
        reason if isinstance(reason, str) and reason else "device lost",
    )


def _parse_resume(obj: Mapping[str, object]) -> ResumeRecord:
    run_id, host, started = obj.get("run_id"), obj.get("host"), obj.get("started")
    return ResumeRecord(
        run_id if isinstance(run_id, str) else "",
        host if isinstance(host, str) and host else None,
        started if isinstance(started, str) else "",
    )


def parse_record(obj: Mapping[str, object], line: int, notes: list[str]) -> Record:
    """The record a decoded line holds; BadRecord when it holds none. Odd but ignorable fields are
    described in `notes`."""
    kind = obj.get("kind")
    if kind == "plan":
        return _parse_plan(obj, notes)
    if kind == "device":
        return _parse_device(obj)
    if kind == "result":
        return _parse_result(obj, line, notes)
    if kind == "end":
        return _parse_end(obj, line, notes)
    if kind == "lost":
        return _parse_lost(obj)
    if kind == "resume":
        return _parse_resume(obj)
    if kind is None:
        raise BadRecord("lacks 'kind'")
    raise BadRecord(f"unknown kind {kind!r} (expected {', '.join(KINDS[:-1])} or {KINDS[-1]})")


def unreadable_json(exc: ValueError | RecursionError) -> str:
    """Why a line that is JSON text could not be decoded, other than a syntax error (one line)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"an integer of more than {sys.get_int_max_str_digits()} digits"


def parse_line(raw: bytes, line: int) -> tuple[Record | None, list[str]]:
    """The record on one line of results.jsonl (None when it holds none) and what is wrong with the line
    (each a phrase, without the line number)."""
    problems: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        problems.append("not valid UTF-8; undecodable bytes replaced by U+FFFD")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [*problems, f"not JSON ({exc.msg} at column {exc.colno}); line skipped"]
    except (ValueError, RecursionError) as exc:  # the int-string digit limit, or nesting too deep
        return None, [*problems, f"not readable JSON ({unreadable_json(exc)}); line skipped"]
    if not isinstance(obj, dict):
        return None, [*problems, f"expected a JSON object, found {type(obj).__name__}; line skipped"]
    try:
        return parse_record(obj, line, problems), problems
    except BadRecord as exc:
        return None, [*problems, f"{exc}; line skipped"]


# ---------------------------------------------------------------------------------------------
# reading a file


def results_file(path: Path) -> Path:
    """`path` itself, or the results.jsonl inside it when it is a directory."""
    return path / RESULTS_NAME if path.is_dir() else path


def read_results_bytes(path: Path) -> bytes:
    """The bytes of a results.jsonl, never read through a symlink (safe_io.read_unfollowed), and never
    more than limit `results_bytes`: a larger file is refused in one line before it is read."""
    most = limit("results_bytes")
    try:
        data = read_unfollowed(path, most)
    except UnsafeOutput:
        raise ResultsUnreadable(path, "another user's symlink is on its path, never read through") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsUnreadable(path, "it is a symlink; the kit never reads a run's results through one") from None
        raise ResultsUnreadable(path, exc.strerror or type(exc).__name__) from exc
    if len(data) > most:
        raise ResultsUnreadable(path, over("results_bytes", f"it holds more than {most} bytes"))
    return data


@dataclass(frozen=True, slots=True)
class Records:
    """Every record of a results.jsonl with its line number (1-based), in file order, and the problems of
    the lines (each "results.jsonl line N: ...")."""

    path: Path
    lines: tuple[tuple[int, Record], ...]
    problems: tuple[str, ...]

    def at(self, line: int) -> Record | None:
        return next((record for number, record in self.lines if number == line), None)

    def by_line(self) -> dict[int, Record]:
        return dict(self.lines)

    @property
    def plan(self) -> Plan | None:
        return next((r for _, r in self.lines if isinstance(r, Plan)), None)

    @property
    def devices(self) -> tuple[DeviceRecord, ...]:
        return tuple(r for _, r in self.lines if isinstance(r, DeviceRecord))

    @property
    def results(self) -> tuple[ResultRecord, ...]:
        return tuple(r for _, r in self.lines if isinstance(r, ResultRecord))


def iter_lines(data: bytes) -> Iterator[bytes]:
    """The lines of `data` without their newlines (a final newline ends the last line, it opens none), one
    at a time (no second copy of the whole)."""
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end]
        start = end + 1


def read_records(path: Path) -> Records:
    """Read results.jsonl (or the run directory holding it) record by record; see the module docstring.

    ResultsUnreadable when the file cannot be read, or a plan or the device records exceed the kit's
    limits (hostile.md): those are refused in one line, not read in part."""
    path = results_file(path)
    return parse_records(read_results_bytes(path), path)


def parse_records(data: bytes, path: Path) -> Records:
    """The records of the results.jsonl bytes `data`, named as `path` in problems (`read_records`)."""
    if len(data) > limit("results_bytes"):
        raise ResultsUnreadable(path, over("results_bytes", f"it holds more than {limit('results_bytes')} bytes"))
    name = path.name
    problems: list[str] = []
    lines: list[tuple[int, Record]] = []
    plans = devices = results = unplanned = 0
    planned_devices: frozenset[str] = frozenset()
    planned_ids: frozenset[str] = frozenset()
    for number, raw in enumerate(iter_lines(data), start=1):
        if not raw.strip():
            continue
        record, found = parse_line(raw, number)
        if isinstance(record, Plan):
            plans += 1
            if plans > 1:
                record, found = None, [*found, "a second plan record; line skipped"]
            else:
                if number != 1:
                    found.append("the plan record should be the first line")
                planned_devices = frozenset(record.devices)
                planned_ids = frozenset(s.id for s in record.scenarios)
                entries = len(record.scenarios) * max(1, len(record.devices))
                if entries > limit("plan_entries"):
                    declared = f"the plan declares {len(record.scenarios)} scenarios x {len(record.devices)} devices"
                    raise ResultsUnreadable(path, over("plan_entries", declared))
        elif isinstance(record, DeviceRecord):
            devices += 1
            most = limit("device_records")
            if devices > most:
                raise ResultsUnreadable(path, over("device_records", f"more than {most} device records"))
        elif isinstance(record, ResultRecord):
            results += 1
            most = limit("result_records")
            if results > most:
                raise ResultsUnreadable(path, over("result_records", f"more than {most} result records"))
            if record.device not in planned_devices or record.scenario not in planned_ids:
                unplanned += 1  # only an edited file has them; every report shows each one
                most = limit("unplanned_records")
                if unplanned > most:
                    raise ResultsUnreadable(
                        path, over("unplanned_records", f"more than {most} results for pairs the plan does not name")
                    )
        problems.extend(safe_text(f"{name} line {number}: {what}") for what in found)
        if record is not None:
            lines.append((number, record))
    return Records(path, tuple(lines), tuple(problems))
