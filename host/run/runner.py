"""One run: plan, prepare devices, discover pairs, execute batches, judge as traces arrive, append results."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict, run_exit
from reports.safe_io import DISK_ERRNOS, OutputFailed, output_dir

from ..probe import CompiledScenario, CompileError, Pairs, ScenarioTrace, compile_program, compile_scenario
from ..targets import Device, Target
from .device_session import missing_capability, prepare_device
from .discovery import probed_pairs
from .judging import Outcome, judge_lines, not_run
from .plan import Resume, RunPlan
from .results_writer import ResultsWriter, now_iso, plan_record, result_record
from .shard import EstimatesFn, execute_sharded

# Per-scenario budget the probe gets on top of the scenario's own timeout: teardown settling.
SETTLE_ALLOWANCE_S = 2.0

ProgressFn = Callable[[str, Verdict, int, int], None]


class DeviceRun:
    """Executes the plan on one prepared target and appends a result record per scenario."""

    def __init__(
        self,
        plan: RunPlan,
        target: Target,
        writer: ResultsWriter,
        progress: ProgressFn | None,
        resume: Resume | None = None,
    ) -> None:
        self.plan = plan
        self.target = target
        self.writer = writer
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
        self._lock = threading.Lock()
        self._done = 0

    def _record(self, scenario: Scenario, outcome: Outcome, **kwargs: Any) -> None:
        self.writer.write(result_record(self.target.serial, scenario, outcome, **kwargs))
        with self._lock:
            self.verdicts[outcome.verdict] += 1
            self._done += 1
            done = self._done
        if self.on_recorded is not None:
            self.on_recorded(scenario.id)
        if self.progress:
            self.progress(self.target.serial, outcome.verdict, done, self.total)

    def record_not_run(self, scenario: Scenario, verdict: Verdict, reason: str) -> None:
        self._record(scenario, not_run(verdict, reason))

    def execute(self) -> Device | None:
        try:
            device = prepare_device(self.target)
        except Exception as exc:
            if self.describe:
                serial = self.target.serial
                self.writer.write({"kind": "device", "device": serial, "info": {"serial": serial}})
            extra = _host_origin(exc)
            for scenario in self.scenarios:
                self._record(scenario, not_run(Verdict.ERROR, f"device preparation failed: {exc}"), extra=extra)
            return None
        if self.describe:
            self.writer.write({"kind": "device", "device": device.serial, "info": device.info})
        self._run_scenarios(device)
        return device

    def _run_scenarios(self, device: Device) -> None:
        runnable = self.compile_for(device, self.scenarios)
        lanes = [runnable[i :: self.plan.jobs] for i in range(self.plan.jobs)]
        threads = [threading.Thread(target=self._run_lane, args=(device, lane)) for lane in lanes if lane]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def compile_for(self, device: Device, scenarios: Sequence[Scenario]) -> list[CompiledScenario]:
        """The scenarios the device can run, compiled; the others are recorded NOT_APPLICABLE here."""
        pairs = Pairs.from_caps(device.caps, probed_pairs())
        runnable: list[CompiledScenario] = []
        for scenario in scenarios:
            missing = missing_capability(scenario, device.caps, pairs)
            if missing is not None:
                self._record(scenario, not_run(Verdict.NOT_APPLICABLE, missing))
                continue
            try:
                runnable.append(compile_scenario(scenario, pairs))
            except CompileError as exc:
                self._record(scenario, not_run(Verdict.NOT_APPLICABLE, str(exc)))
        return runnable

    def _run_lane(self, device: Device, lane: list[CompiledScenario]) -> None:
        unrun = self.run_lane(device, lane)
        if unrun is not None:
            reason, scenarios = unrun
            for scenario in scenarios:
                self._record(scenario, not_run(Verdict.NOT_EXECUTED, reason))

    def run_lane(self, device: Device, lane: list[CompiledScenario]) -> tuple[str, list[Scenario]] | None:
        """Run the lane as one batch, recording each result as it arrives.

        Returns None when every scenario got a record, else why the batch stopped and the scenarios it
        never reported (not recorded: the caller decides whether they are NOT_EXECUTED or run elsewhere).
        """
        by_id = {c.scenario.id: c for c in lane}
        reported: set[str] = set()
        fingerprint = str(device.info.get("fingerprint", device.serial))

        def on_trace(trace: ScenarioTrace) -> None:
            compiled = by_id[trace.scenario_id]
            reported.add(trace.scenario_id)
            if trace.infra_error is not None:
                outcome = not_run(Verdict.ERROR, trace.infra_error)
            elif trace.timed_out is not None:
                outcome = not_run(Verdict.TIMEOUT, trace.timed_out)
            else:
                outcome = judge_lines(
                    compiled.scenario,
                    trace.lines,
                    device.caps,
                    self.plan.catalogue,
                    self.plan.profile,
                    self.plan.waivers,
                    fingerprint,
                )
            extra: dict[str, Any] = {}
            context = getattr(self.target, "failure_context", None)
            if context is not None and outcome.verdict in (Verdict.FAIL, Verdict.CRASH, Verdict.TIMEOUT):
                extra["logcat"] = list(context(trace.scenario_id))
            self._record(
                compiled.scenario,
                outcome,
                lines=trace.lines,
                slots=dict(compiled.slots),
                duration_ms=trace.duration_ms,
                extra=extra,
            )

        limits = [
            (c.scenario.timeout_ms / 1000.0 + SETTLE_ALLOWANCE_S) * self.plan.timeout_multiplier
            for c in lane
        ]
        started = time.monotonic()
        try:
            outcome = self.target.run_batch(compile_program(lane), [c.scenario.id for c in lane], limits, on_trace)
        except Exception as exc:
            reason = f"batch stopped after {time.monotonic() - started:.1f} s: {exc}"
            if _host_origin(exc):
                for compiled in lane:
                    if compiled.scenario.id not in reported:
                        self._record(compiled.scenario, not_run(Verdict.ERROR, reason), extra=_host_origin(exc))
                return None
        else:
            if outcome.api_missing is not None:
                missing = ", ".join(outcome.api_missing)
                for compiled in lane:
                    if compiled.scenario.id not in reported:
                        reported.add(compiled.scenario.id)
                        reason = f"implementation lacks {missing}"
                        self._record(compiled.scenario, not_run(Verdict.NOT_APPLICABLE, reason))
                return None
            reason = outcome.error or "the probe stopped before this scenario ran"
        unreported = [c.scenario for c in lane if c.scenario.id not in reported]
        return (reason, unreported) if unreported else None


def _host_origin(exc: BaseException) -> dict[str, Any]:
    """`origin: host` for an error the host caused (its disk full): `--resume` runs those scenarios again."""
    if isinstance(exc, OutputFailed) or (isinstance(exc, OSError) and exc.errno in DISK_ERRNOS):
        return {"origin": "host"}
    return {}


def execute_run(
    plan: RunPlan,
    targets: Sequence[Target],
    progress: ProgressFn | None = None,
    resume: Resume | None = None,
    estimates: EstimatesFn | None = None,
) -> int:
    """Run the plan on every target in parallel (one lane per device); return the exit code.

    With `resume`, results.jsonl already holds the plan: only the pairs left to run are run and
    appended, and the end record counts the kept results too. With `plan.shard`, each build's devices
    share its scenarios (host/run/shard.py; `estimates` gives measured durations for the balance).
    """
    output_dir(plan.out_dir)
    results_path = plan.out_dir / "results.jsonl"
    with ResultsWriter(results_path) as writer:
        if resume is None:
            writer.write(plan_record(plan, [t.serial for t in targets]))
        counts: Counter[Verdict] = Counter(resume.kept if resume is not None else ())
        if plan.shard:

            def make_run(target: Target) -> DeviceRun:
                return DeviceRun(plan, target, writer, progress, None)

            counts.update(execute_sharded(plan, targets, writer, make_run, resume, estimates))
        else:
            runs = [DeviceRun(plan, target, writer, progress, resume) for target in targets]
            threads = [threading.Thread(target=run.execute, name=f"device-{run.target.serial}") for run in runs]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for run in runs:
                counts.update(run.verdicts)
        exit_code = int(run_exit(counts.elements())) if counts else 2
        writer.write(
            {
                "kind": "end",
                "finished": now_iso(),
                "counts": {v.value: n for v, n in counts.items()},
                "exit_code": exit_code,
            }
        )
    if writer.failed is not None:
        raise writer.failed
    return exit_code
