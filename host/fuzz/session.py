"""One fuzz run: open the target as `npuconf run` does, generate and run programs in batches until the
budget is spent, shrink each new divergence, write the shrunk scenarios, fuzz.json and fuzz.html."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from reference_model.verdicts import Verdict
from reports.fuzz import FuzzDivergence, FuzzSummary, write_fuzz_reports
from reports.safe_io import output_dir, write_text

from ..errors import UsageError
from ..run import RunRequest, open_targets
from ..suite import load_catalogue
from ..targets import DEFAULT_CAPACITY, LocalTarget, VnpuProfile
from .execute import ProgramRunner, Result
from .generate import generate
from .shrink import Program, shrink, step_count

SCENARIO_DIR: Final = "scenarios"
CHAPTER: Final = "fuzz"
DEFAULT_BATCH: Final = 50
SHRINK_BUDGET_S: Final = 120.0
# While shrinking on the local target the probe's teardown waits this long for owed callbacks and
# deleters (instead of the target's own settle): a candidate that keeps a leak waits for it each time.
# The written scenario is run again with the target's own settle before it is reported.
SHRINK_SETTLE_MS: Final = 300
# The first batches are small, so that a divergence in the first programs shows early.
FIRST_BATCHES: Final = (5, 10, 25)
BUDGET = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m)?\Z")

ProgressFn = Callable[[int, float, int], None]  # programs run, elapsed seconds, divergences found


@dataclass(frozen=True, slots=True)
class Budget:
    seconds: float | None = None
    programs: int | None = None

    @staticmethod
    def parse(text: str) -> Budget:
        """`60s`, `2m` (time) or `500` (a count of programs)."""
        match = BUDGET.match(text.strip())
        if match is None or float(match.group(1)) <= 0:
            raise UsageError(f"--budget {text}: expected a time such as 60s or 2m, or a number of programs")
        value, unit = float(match.group(1)), match.group(2)
        if unit is None:
            if not value.is_integer():
                raise UsageError(f"--budget {text}: a number of programs is a whole number")
            return Budget(programs=int(value))
        return Budget(seconds=value * (60 if unit == "m" else 1))

    def spent(self, programs: int, elapsed: float) -> bool:
        if self.programs is not None:
            return programs >= self.programs
        return elapsed >= (self.seconds or 0.0)

    def text(self) -> str:
        return f"{self.programs} programs" if self.programs is not None else f"{self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class FuzzRequest:
    run: RunRequest
    seed: int = 0
    budget: Budget = field(default_factory=lambda: Budget(seconds=60.0))
    batch: int = DEFAULT_BATCH
    shrink_budget_s: float = SHRINK_BUDGET_S


@dataclass(frozen=True, slots=True)
class FuzzOutcome:
    out_dir: Path
    summary: FuzzSummary
    paths: dict[str, Path]

    @property
    def exit_code(self) -> int:
        return 1 if self.summary.divergences else 0


def _scenario_id(signature: str, seed: int, program_id: str) -> str:
    index = program_id.rsplit("_", 1)[-1].split("-c")[0]
    return f"fuzz.{signature.lower()}.s{seed}_{index}"


def _shrunk_scenario(program: Program, found: Result, seed: int) -> Program:
    scenario_id = _scenario_id(found.signature, seed, found.program_id)
    out = dict(program)
    out["id"] = scenario_id
    what = f"fails {found.clause}" if found.verdict is Verdict.FAIL and found.clause else "crashes the process"
    out["title"] = f"A random program of seed {seed}, shrunk: {what}"
    if found.verdict is Verdict.FAIL and found.clause:
        out["clauses"] = [found.clause]
    return {key: out[key] for key in ("id", "title", "clauses", "requires", "timeout_ms", "steps")}


def fuzz(request: FuzzRequest, out_dir: Path, progress: ProgressFn | None = None) -> FuzzOutcome:
    catalogue = load_catalogue()
    if (out_dir / "fuzz.json").exists():
        raise UsageError(f"--out {out_dir}: already holds fuzz.json; choose a new directory")
    output_dir(out_dir)
    scenario_dir = output_dir(output_dir(out_dir / SCENARIO_DIR) / CHAPTER)
    rr = request.run
    profile = VnpuProfile(capacity=rr.capacity if rr.capacity is not None else DEFAULT_CAPACITY, policy=rr.policy,
                          personality=rr.personality, declared_capacity=rr.capacity)
    verdicts: Counter[str] = Counter()
    divergences: dict[str, FuzzDivergence] = {}
    with open_targets(rr, rr.target, out_dir, profile) as targets:
        target = targets[0]
        runner = ProgramRunner(target, catalogue.quotes(), rr.profile, out_dir, rr.timeout_multiplier)
        device = runner.prepare()
        control = device.caps.vnpu_control
        pointer64 = device.caps.pointer_bits == 64
        # Pair discovery failed (isSupported broken, say): as `npuconf run` still runs the scenarios that need
        # no discovery, the programs then need no pair (requests, cookies, isSupported, onAlloc only).
        pair = device.discovery_failed is None
        started = time.monotonic()
        fuzzing_s = 0.0  # time spent generating and running programs (not shrinking)
        programs = 0
        batches = 0
        while not request.budget.spent(programs, fuzzing_s):
            count = min(request.batch, FIRST_BATCHES[batches]) if batches < len(FIRST_BATCHES) else request.batch
            batches += 1
            if request.budget.programs is not None:
                count = min(count, request.budget.programs - programs)
            batch_started = time.monotonic()
            batch = [generate(request.seed, programs + i, vnpu_control=control, pointer64=pointer64, pair=pair)
                     for i in range(count)]
            results = runner.run_programs(batch)
            fuzzing_s += time.monotonic() - batch_started
            for program, result in zip(batch, results, strict=True):
                programs += 1
                if result is None:
                    raise RuntimeError(f"generated program {program['id']} does not validate (a generator bug)")
                verdicts[result.verdict.value] += 1
                if not result.divergent:
                    continue
                known = divergences.get(result.signature)
                if known is not None:
                    divergences[result.signature] = known.seen_again()
                    continue
                divergences[result.signature] = _shrink_and_write(
                    runner, request, program, result, scenario_dir, found_after_s=fuzzing_s, programs=programs
                )
            if progress:
                progress(programs, fuzzing_s, len(divergences))
        elapsed = time.monotonic() - started
        summary = FuzzSummary(
            seed=request.seed,
            target=rr.target,
            device=target.serial,
            impl=str(rr.impl) if rr.impl else None,
            budget=request.budget.text(),
            programs=programs,
            fuzzing_s=round(fuzzing_s, 3),
            elapsed_s=round(elapsed, 3),
            programs_per_s=round(programs / fuzzing_s, 2) if fuzzing_s > 0 else 0.0,
            verdicts=dict(verdicts),
            divergences=tuple(sorted(divergences.values(), key=lambda d: d.found_after_s)),
            scenarios_dir=str(out_dir / SCENARIO_DIR),
        )
    paths = write_fuzz_reports(summary, out_dir)
    return FuzzOutcome(out_dir, summary, paths)


def _shrink_and_write(runner: ProgramRunner, request: FuzzRequest, program: Program, found: Result,
                      scenario_dir: Path, found_after_s: float, programs: int) -> FuzzDivergence:
    started = time.monotonic()
    target = runner.target
    settle = target.settle_ms if isinstance(target, LocalTarget) else None
    if isinstance(target, LocalTarget):
        target.settle_ms = min(target.settle_ms, SHRINK_SETTLE_MS)
    try:
        shrunk, tried = shrink(program, found, runner.run_programs, started + request.shrink_budget_s)
    finally:
        if isinstance(target, LocalTarget) and settle is not None:
            target.settle_ms = settle
    scenario = _shrunk_scenario(shrunk, found, request.seed)
    path = scenario_dir / f"{scenario['id']}.yaml"
    write_text(path, yaml.safe_dump(scenario, sort_keys=False, width=120))
    # The written scenario, run once more as written: it must give the same verdict and clause.
    (replay,) = runner.run_programs([scenario])
    replays = replay is not None and replay.verdict is found.verdict and replay.signature == found.signature
    return FuzzDivergence(
        signature=found.signature,
        verdict=found.verdict.value,
        clause=found.clause,
        quote=found.quote,
        reason=found.reason,
        program=found.program_id,
        found_after_s=round(found_after_s, 3),
        found_after_programs=programs,
        steps_before=step_count(program),
        steps_after=step_count(scenario),
        shrink_s=round(time.monotonic() - started, 3),
        candidates=tried,
        scenario=str(path),
        scenario_id=str(scenario["id"]),
        replays=replays,
        shrunk_reason=replay.reason if replay is not None else "",
        count=1,
    )

