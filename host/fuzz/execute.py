"""Running generated programs on one prepared target through the run's own machinery: the same compiler,
probe batches (a fork per program inside the probe), retries of legally refused allocations and judge
as `npuconf run` (host.run.DeviceRun), on one or more lanes (host.fuzz.lanes). Records stay in memory: a
fuzz run writes no results.jsonl."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reference_model.errors import ScenarioInvalid
from reference_model.scenario import Scenario, parse_scenario
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver
from reports.recorded.records import Record, ResultRecord

from ..run import DeviceRun
from ..targets import Device, Target
from .lanes import run_in_lanes


@dataclass(frozen=True, slots=True)
class Result:
    """One program's verdict; ``signature`` groups divergences (the clause of a FAIL, CRASH alone)."""

    program_id: str
    verdict: Verdict
    reason: str
    clause: str | None
    quote: str | None
    trace: tuple[str, ...]  # as the probe wrote it
    demonstrated: tuple[str, ...] = ()  # PASS or WARN: the clauses the trace demonstrated

    @property
    def divergent(self) -> bool:
        return self.verdict.blocking

    @property
    def signature(self) -> str:
        return self.clause if self.verdict is Verdict.FAIL and self.clause else self.verdict.value


class _Collector:
    """Where the DeviceRun's records go (its RecordSink): the results, kept in memory by scenario."""

    def __init__(self) -> None:
        self.records: dict[str, ResultRecord] = {}
        self._guard = threading.Lock()

    def write(self, record: Record) -> None:
        if isinstance(record, ResultRecord):
            with self._guard:
                self.records[record.scenario] = record


@dataclass(frozen=True, slots=True)
class _Programs:
    """What the DeviceRun reads of its work (its DeviceWork): programs come batch by batch (run_programs),
    judged under ``profile``, one lane, no waivers."""

    catalogue: dict[str, str]
    profile: str
    timeout_multiplier: float
    scenarios: tuple[Scenario, ...] = ()
    target_name: str = "fuzz"
    jobs: int = 1
    waivers: tuple[Waiver, ...] = ()
    waivers_as_of: dt.date | None = None


class ProgramRunner:
    """A prepared target that runs lists of programs (scenario mappings) and answers one Result each, on
    ``lanes`` probe processes at once; ``stop`` set, no more of them start."""

    def __init__(self, target: Target, catalogue: Mapping[str, str], profile: str,
                 timeout_multiplier: float = 1.0, lanes: int = 1, stop: threading.Event | None = None) -> None:
        self.catalogue = dict(catalogue)
        self.known = frozenset(self.catalogue)
        self._collector = _Collector()
        self.run = DeviceRun(_Programs(self.catalogue, profile, timeout_multiplier), target, writer=self._collector)
        self.target = target
        self.lanes = max(1, lanes)
        self._stop = stop
        self.program_s: float | None = None  # a program's run time in a probe batch, smoothed (lanes.chunks)
        self._timing = threading.Lock()

    def prepare(self) -> Device:
        """Prepare the device and discover its pairs, as `npuconf run` does; a setup error is raised. A device
        whose pair discovery failed is returned: programs that need no pair still run on it."""
        self.run.prepare()
        if self.run.setup_error is not None:
            raise self.run.setup_error
        device = self.run.device
        if device is None:
            raise RuntimeError(self.run.prepare_error or "device preparation failed")
        return device  # a failed pair discovery is the session's to handle (device.discovery_failed)

    @property
    def device(self) -> Device:
        if self.run.device is None:  # pragma: no cover - prepare() comes first
            raise RuntimeError("the target is not prepared")
        return self.run.device

    def parse(self, program: Mapping[str, Any]) -> Scenario:
        return parse_scenario(program, "fuzz", "fuzz", self.known)

    def _parsed(self, program: Mapping[str, Any]) -> Scenario | None:
        try:
            return self.parse(program)
        except ScenarioInvalid:
            return None

    def _ran(self, seconds: float, programs: int) -> None:
        """One probe batch's time per program, into the smoothed figure (lanes write it in turn)."""
        each = seconds / programs
        with self._timing:
            self.program_s = each if self.program_s is None else 0.7 * self.program_s + 0.3 * each

    def run_programs(self, programs: Sequence[Mapping[str, Any]]) -> list[Result | None]:
        """Each program's Result, in order; None for a program that does not validate (a shrinking step
        that broke it)."""
        scenarios: dict[int, Scenario | None] = {}
        self._collector.records.clear()

        def run_chunk(chunk: list[int]) -> str | None:
            parsed = {k: self._parsed(programs[k]) for k in chunk}
            scenarios.update(parsed)
            compiled = self.run.compile_for(self.device, [s for s in parsed.values() if s is not None])
            started = time.monotonic()
            unrun = self.run.run_lane(self.device, compiled) if compiled else None
            if compiled and unrun is None:
                self._ran(time.monotonic() - started, len(compiled))
            return unrun[0] if unrun is not None else None

        stopped = run_in_lanes(programs, self.lanes, run_chunk, self._stop, self.program_s)
        results: list[Result | None] = []
        for k, program in enumerate(programs):
            scenario = scenarios[k] if k in scenarios else self._parsed(program)  # a chunk never started
            if scenario is None:
                results.append(None)
                continue
            record = self._collector.records.get(scenario.id)
            if record is None:
                results.append(Result(scenario.id, Verdict.NOT_EXECUTED, stopped or "no result", None, None, ()))
                continue
            clause, quote = (record.divergence.clause, record.divergence.quote) if record.divergence else (None, None)
            results.append(Result(scenario.id, record.verdict, record.reason, clause, quote, record.trace,
                                  record.demonstrated))
        return results
