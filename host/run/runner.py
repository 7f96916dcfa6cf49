"""One run: plan, prepare devices, discover pairs, execute batches, judge as traces arrive, append results."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from floor.safe_io import DISK_ERRNOS, OutputFailed, output_dir
from reference_model.caps import DeviceCaps
from reference_model.errors import KitError
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver
from reports.recorded.outputs import RESULTS_FILE
from reports.recorded.records import DeviceRecord, EndRecord, Record

from ..errors import UsageError
from ..probe import RUNNING_PROBES, CompiledScenario, Pairs, ScenarioTrace, api_missing_line, compile_program
from ..targets import Device, Target
from .decision import (
    Decision,
    DeviceFacts,
    Judging,
    NotRun,
    WhatHappened,
    after_running,
    before_running,
    decide,
    device_facts,
    device_fingerprint,
)
from .digests import load_digests, save_digests
from .discovery_cache import BuildDiscoveries
from .judging import MAX_ATTEMPTS, Outcome, not_run
from .lanes import EstimatesFn, deal_lanes, known_estimates, needs_device_alone
from .plan import Resume, RunPlan
from .prepared_device import prepare_device
from .results_writer import ResultsWriter, now_iso, plan_record, result_record, resume_record
from .shard import execute_sharded, group_of

# Per-scenario budget the probe gets on top of the scenario's own timeout: teardown settling.
SETTLE_ALLOWANCE_S = 2.0

# serial, verdict, done, total, pool (the shared work the device counts against; None: its own)
ProgressFn = Callable[[str, Verdict, int, int, str | None], None]

# How a run prepares a device: the probe made runnable there, its pairs discovered (prepared_device.py).
PrepareFn = Callable[[Target], Device]

# Why a lane stopped, and the scenarios it never reported (None: every scenario got a record).
Unrun = tuple[str, list[Scenario]] | None


class RecordSink(Protocol):
    """Where a device's records go: the run's ResultsWriter (results.jsonl), or a fuzz run's memory."""

    def write(self, record: Record) -> None: ...


class DeviceWork(Protocol):
    """What a device's run reads of its plan: the run's RunPlan, or what a fuzz run gives its programs."""

    @property
    def scenarios(self) -> tuple[Scenario, ...]: ...
    @property
    def catalogue(self) -> dict[str, str]: ...
    @property
    def target_name(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def jobs(self) -> int: ...
    @property
    def timeout_multiplier(self) -> float: ...
    @property
    def waivers(self) -> tuple[Waiver, ...]: ...
    @property
    def waivers_as_of(self) -> dt.date | None: ...


class DeviceRun:
    """Executes the plan on one target: prepared first (before the plan is written), then run, appending a
    result record per scenario."""

    def __init__(
        self,
        plan: DeviceWork,
        target: Target,
        writer: RecordSink | None = None,
        progress: ProgressFn | None = None,
        resume: Resume | None = None,
        estimates: EstimatesFn | None = None,
        prepare: PrepareFn | None = None,
    ) -> None:
        self.plan = plan
        self.target = target
        self._prepare = prepare or prepare_device  # the run's: its devices of one build discover once
        self.estimates = estimates  # measured durations, to deal the lanes longest first
        self._writer = writer
        self.progress = progress
        self.scenarios = plan.scenarios
        self.describe = True
        if resume is not None:
            wanted = set(resume.todo.get(target.serial, ()))
            self.scenarios = tuple(s for s in plan.scenarios if s.id in wanted)
            self.describe = target.serial not in resume.described
        self.verdicts: Counter[Verdict] = Counter()
        self.total = len(self.scenarios)
        # Called with each scenario id once its record is written (the shard scheduler's bookkeeping).
        self.on_recorded: Callable[[str], None] | None = None
        # The work `total` counts (progress): None, the device's own; sharded, its build's group.
        self.progress_pool: str | None = None
        self.device: Device | None = None
        self.stop = threading.Event()
        self.setup_error: KitError | None = None
        self.prepare_error: str | None = None
        self.prepare_origin: str | None = None
        self._lock = threading.Lock()
        self._done = 0

    @property
    def writer(self) -> RecordSink:
        if self._writer is None:  # pragma: no cover - execute_run sets it before executing
            raise RuntimeError("DeviceRun has no results writer")
        return self._writer

    @writer.setter
    def writer(self, writer: RecordSink) -> None:
        self._writer = writer

    def _record(self, scenario: Scenario, outcome: Outcome, **kwargs: Any) -> None:
        if self.stop.is_set():
            return  # interrupted: results from now on would be the interrupt's, not the device's
        self.writer.write(result_record(self.target.serial, scenario, outcome, **kwargs))
        with self._lock:
            self.verdicts[outcome.verdict] += 1
            self._done += 1
            done = self._done
        if self.on_recorded is not None:
            self.on_recorded(scenario.id)
        if self.progress:
            self.progress(self.target.serial, outcome.verdict, done, self.total, self.progress_pool)

    def record_not_run(self, scenario: Scenario, verdict: Verdict, reason: str) -> None:
        self._record(scenario, not_run(verdict, reason))

    def prepare(self) -> None:
        """Prepare the device and discover its pairs (before the plan is written).

        A setup error (a missing build, a bad --impl) is kept in `setup_error`: the run stops with exit 3
        before any scenario; any other failure makes every scenario of the device ERROR.
        """
        try:
            self.device = self._prepare(self.target)
        except UsageError as exc:
            self.setup_error = exc
        except Exception as exc:
            self.prepare_error = f"device preparation failed: {exc}"
            self.prepare_origin = _host_origin(exc)

    def execute(self) -> Device | None:
        device = self.device
        if device is None:
            if self.describe:
                serial = self.target.serial
                self.writer.write(DeviceRecord(serial, {"serial": serial}))
            reason = self.prepare_error or "device preparation failed"
            unavailable = DeviceFacts(DeviceCaps(), Pairs(None, None), unavailable=reason)
            judging = Judging(self.plan.catalogue, self.plan.profile)
            for scenario in self.scenarios:
                happened = WhatHappened(scenario, unavailable, self.target.serial)
                self._record(scenario, decide(happened, judging).outcome, origin=self.prepare_origin)
            return None
        if self.describe:
            self.writer.write(DeviceRecord(device.serial, device.info))
        self._run_scenarios(device, self.scenarios)
        return device

    def _run_scenarios(self, device: Device, scenarios: Sequence[Scenario]) -> None:
        runnable = self.compile_for(device, scenarios)
        alone: list[CompiledScenario] = []
        if self.plan.jobs > 1:
            alone = [c for c in runnable if needs_device_alone(self.plan.target_name, c.scenario.requires)]
        shared = [c for c in runnable if not any(c is a for a in alone)] if alone else runnable
        known = known_estimates(self.estimates, group_of(device))
        lanes = deal_lanes(shared, self.plan.jobs, lambda c: c.scenario.id, known)
        threads = [threading.Thread(target=self._run_lane, args=(device, lane)) for lane in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if alone:  # after the others, in one lane: nothing else runs on the device meanwhile
            self._run_lane(device, alone)

    def compile_for(self, device: Device, scenarios: Sequence[Scenario]) -> list[CompiledScenario]:
        """The scenarios the device can run, compiled; the others get their verdict here (decision.py,
        steps 1-2: a failed discovery is ERROR for what needs the pairs, never a note, while what does
        not still runs, so a device whose isSupported is broken gets its FAILs)."""
        facts = device_facts(device)
        runnable: list[CompiledScenario] = []
        for scenario in scenarios:
            decided = before_running(scenario, facts)
            if isinstance(decided, Decision):
                self._record(scenario, decided.outcome)
            else:
                runnable.append(decided)
        return runnable

    def _run_lane(self, device: Device, lane: list[CompiledScenario]) -> None:
        unrun = self.run_lane(device, lane)
        if unrun is not None:
            reason, scenarios = unrun
            for scenario in scenarios:
                self._record(scenario, not_run(Verdict.NOT_EXECUTED, reason))

    def run_lane(self, device: Device, lane: list[CompiledScenario]) -> Unrun:
        """Run the lane's scenarios in one batch; scenarios whose allocations the device legally refused
        (allocation_refused) run again, in a batch of their own, up to MAX_ATTEMPTS times.

        Returns None when every scenario got a record, else why a batch stopped and the scenarios never
        recorded (the caller decides whether they are NOT_EXECUTED or run elsewhere).
        """
        attempts: dict[str, int] = {}
        while lane:
            retry: list[CompiledScenario] = []
            for compiled in lane:
                attempts[compiled.scenario.id] = attempts.get(compiled.scenario.id, 0) + 1
            unrun = self._run_batch(device, lane, attempts, retry)
            if unrun is not None:
                reason, scenarios = unrun
                return reason, scenarios + [c.scenario for c in retry]
            lane = retry
        return None

    def _run_batch(
        self,
        device: Device,
        lane: list[CompiledScenario],
        attempts: dict[str, int],
        retry: list[CompiledScenario],
    ) -> Unrun:
        by_id = {c.scenario.id: c for c in lane}
        reported: set[str] = set()
        facts = device_facts(device)
        fingerprint = device_fingerprint(device)
        judging = Judging(self.plan.catalogue, self.plan.profile, self.plan.waivers, self.plan.waivers_as_of)

        def on_trace(trace: ScenarioTrace) -> None:
            compiled = by_id[trace.scenario_id]
            reported.add(trace.scenario_id)
            lines = trace.recorded_lines()
            decision = after_running(WhatHappened(compiled.scenario, facts, fingerprint, lines), judging)
            outcome, refused = decision.outcome, decision.allocations_refused
            attempt = attempts[trace.scenario_id]
            if refused and attempt < MAX_ATTEMPTS:
                retry.append(compiled)  # not recorded: the next attempt's result is
                return
            logcat = self.target.failure_context(trace.scenario_id) if outcome.verdict.device_log else ()
            self._record(
                compiled.scenario,
                outcome,
                lines=lines,
                slots=dict(compiled.slots),
                duration_ms=trace.duration_ms,
                attempts=attempt,
                # Passed, but a legal refusal kept it from exercising its clauses (reports/answers/claim.py).
                allocations_refused=refused,
                logcat=logcat,
            )

        limits = [(c.scenario.timeout_ms / 1000.0 + SETTLE_ALLOWANCE_S) * self.plan.timeout_multiplier for c in lane]
        started = time.monotonic()
        try:
            outcome = self.target.run_batch(compile_program(lane), [c.scenario.id for c in lane], limits, on_trace)
        except Exception as exc:
            reason = f"batch stopped after {time.monotonic() - started:.1f} s: {exc}"
            origin = _host_origin(exc)
            if origin is not None:
                failed = NotRun(Verdict.ERROR, reason)
                for compiled in lane:
                    if compiled.scenario.id not in reported:
                        happened = WhatHappened(compiled.scenario, facts, fingerprint, not_run=failed)
                        decided = after_running(happened, judging).outcome
                        self._record(compiled.scenario, decided, origin=origin)
                return None
        else:
            if outcome.api_missing is not None:
                # The probe's api_missing event is kept as the evidence the verdict is decided from.
                evidence = (api_missing_line(outcome.api_missing),)
                for compiled in lane:
                    if compiled.scenario.id not in reported:
                        reported.add(compiled.scenario.id)
                        happened = WhatHappened(compiled.scenario, facts, fingerprint, evidence)
                        self._record(compiled.scenario, after_running(happened, judging).outcome, lines=evidence)
                return None
            reason = outcome.error or "the probe stopped before this scenario ran"
        unreported = [c.scenario for c in lane if c.scenario.id not in reported]
        return (reason, unreported) if unreported else None


def _host_origin(exc: BaseException) -> str | None:
    """`origin: host` for an error the host caused (its disk full): `--resume` runs those scenarios again."""
    if isinstance(exc, OutputFailed) or (isinstance(exc, OSError) and exc.errno in DISK_ERRNOS):
        return "host"
    return None


# After Ctrl-C: how long the device threads get to notice the stop before the run gives up on them.
STOP_GRACE_S = 5.0


def _start(runs: Sequence[DeviceRun], method: str) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=getattr(run, method), name=f"device-{run.target.serial}", daemon=True) for run in runs
    ]
    for thread in threads:
        thread.start()
    return threads


def _join(threads: Sequence[threading.Thread], runs: Sequence[DeviceRun]) -> None:
    """Wait for the device threads; on Ctrl-C, stop every run from recording and re-raise."""
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        _stop(runs, threads)
        raise


def _stop(runs: Sequence[DeviceRun], threads: Sequence[threading.Thread] = ()) -> None:
    for run in runs:
        run.stop.set()
    RUNNING_PROBES.kill_all()  # the lanes are daemon threads: their probes would outlive the command
    deadline = time.monotonic() + STOP_GRACE_S
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def execute_run(
    plan: RunPlan,
    targets: Sequence[Target],
    progress: ProgressFn | None = None,
    resume: Resume | None = None,
    estimates: EstimatesFn | None = None,
    prepare: PrepareFn | None = None,
) -> None:
    """Run the plan on every target in parallel (lanes per device), appending to results.jsonl.

    Every device is prepared first (by `prepare`, when they were prepared ahead, host/run/head_start.py):
    a setup error stops the run before anything is written. With
    `resume`, results.jsonl already holds the plan: only the pairs left to run are run and appended,
    and the end record counts the kept results too. With `plan.shard`, each build's devices share its
    scenarios (host/run/shard.py; `estimates` gives measured durations for the balance). On Ctrl-C
    nothing more is recorded (a probe killed by the signal would give ERRORs that are not the
    device's), no end record is written, and KeyboardInterrupt propagates: what is recorded stays, for
    `--resume`.
    """
    digests = load_digests()
    if prepare is None:
        builds = BuildDiscoveries()  # devices of one build discover once

        def prepare(target: Target) -> Device:
            return prepare_device(target, builds)

    # A sharded run gives each device its build's share, so every device starts from the whole plan.
    runs = [
        DeviceRun(
            plan, target, progress=progress, resume=None if plan.shard else resume, estimates=estimates, prepare=prepare
        )
        for target in targets
    ]
    _join(_start(runs, "prepare"), runs)
    for run in runs:
        if run.setup_error is not None:
            raise run.setup_error  # before anything is written: exit 3, one line
    output_dir(plan.out_dir)
    results_path = plan.out_dir / RESULTS_FILE
    with ResultsWriter(results_path) as writer:
        if resume is None:
            writer.write(plan_record(plan, [t.serial for t in targets]))
        else:
            writer.write(resume_record(plan))
        for run in runs:
            run.writer = writer
        counts: Counter[Verdict] = Counter(resume.kept if resume is not None else ())
        if plan.shard:
            try:
                counts.update(execute_sharded(plan, runs, writer, resume, estimates))
            except KeyboardInterrupt:
                _stop(runs)
                raise
        else:
            _join(_start(runs, "execute"), runs)
            for run in runs:
                counts.update(run.verdicts)
        # The end record says the run finished; its answer is derived by every reader (reports/answers/claim.py),
        # never stamped here.
        writer.write(EndRecord(now_iso(), {v.value: n for v, n in counts.items()}, lost=dict(writer.lost)))
    if writer.failed is not None:
        raise writer.failed
    save_digests(digests)
