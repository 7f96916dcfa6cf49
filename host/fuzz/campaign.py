"""One fuzz run: open the targets as `npuconf run` does, and on every device in parallel (one worker each,
its own share of the seed's program stream) generate and run programs in batches until the budget is
spent, shrinking each new divergence on the device that found it. Everything found is appended to
fuzz.jsonl as it is found; fuzz.json and fuzz.html are written at the end, also after Ctrl-C."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from floor.safe_io import append_bytes, output_dir, remove_file, write_text
from floor.words import counted
from reference_model.errors import KitError
from reference_model.verdicts import Verdict
from reports.recorded.plan_options import FUZZ, OPTIONS
from reports.renderers.fuzz import FuzzDevice, FuzzDivergence, FuzzSummary, write_fuzz_reports

from ..errors import InfraError, RunInterrupted, UsageError
from ..probe import Pairs
from ..run import RunRequest, group_of, now_iso, open_targets, probed_pairs
from ..suite import load_catalogue
from ..targets import Target
from ..targets.adb import AdbTarget
from ..targets.kinds import target_kind
from ..targets.local import LocalTarget
from . import grammar
from .coverage import Coverage, judgeable_clauses, judged_of
from .device_profile import fuzz_profile
from .draw_ahead import Drawer, Order, Pending
from .execute import ProgramRunner, Result
from .generate import Drawn
from .replay import replay
from .shrink import Program, shrink, step_count
from .steer import kit_prior

SCENARIO_DIR: Final = "scenarios"
# Divergent programs as generated, written the moment they are found (outside SCENARIO_DIR, so that
# replaying the shrunk scenarios does not run them too).
FOUND_DIR: Final = "found"
RESULTS_FILE: Final = "fuzz.jsonl"
CHAPTER: Final = "fuzz"
DEFAULT_BATCH: Final = 50
SHRINK_BUDGET_S: Final = 120.0
# A time budget is for fuzzing first: a shrink starts only while the shrinking done so far (all devices
# together) is under this share of it; divergences found after stay as generated (and in the replay line).
SHRINK_SHARE: Final = 0.5
# While shrinking on the local target the probe's teardown waits this long for owed callbacks and
# deleters (instead of the target's own settle): a candidate that keeps a leak waits for it each time.
# The written scenario is run again with the target's own settle before it is reported.
SHRINK_SETTLE_MS: Final = 300
# The first batches are small, so that a divergence in the first programs shows early (with lanes too: a
# defect that makes every program wait out a settle would otherwise show only after a round of them).
FIRST_BATCHES: Final = (5, 10, 25)
# A campaign of this many programs starts its drawing process (host.fuzz.draw_ahead) as it prepares its devices.
WARM_FROM_PROGRAMS: Final = 1000
# Ctrl-C reaches the probe's processes too: a batch that ends with a CRASH or unrun programs is believed
# only if no interrupt arrives this long after it (the main thread sets the stop at once).
INTERRUPT_SETTLE_S: Final = 0.25
# After Ctrl-C: how long the workers get to finish their batch before the reports are written without them.
STOP_GRACE_S: Final = 5.0
# How many programs of one group are shrunk at most (the first it meets), and for how long in all: a
# divergence may have several routes, some racy or longer than others; the scenario kept is the one that
# replays most often, then the shortest. A shrink that finds nothing better does not say no other route
# exists, so only the count and the time end it (a slow shrink, of a defect whose every candidate waits
# out a settle, is not repeated).
GROUP_SHRINKS: Final = 5
GROUP_SHRINK_S: Final = 20.0
# --until-found fuzzes this long (by default) after a device's first divergence before the run may end: a defect that
# breaks several sentences shows first under whichever a program reached first, the steering then favours
# the clauses not failed yet, and each group found meanwhile is shrunk once (its sentence named on its own).
AFTER_FIRST_FIND_S: Final = 20.0
# How many times the written scenario is run again to check that it replays.
REPLAYS: Final = 3
BUDGET = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m)?\Z")

# A time budget bounds the whole command: fuzzing stops at the deadline or at a divergence, shrinking and
# replay confirmation must end by it (the shrink is cut short there, its best program so far written).
# What may still run after it: the probe batch in flight (its size follows the rate, so about one
# program's time), one replay confirmation run, the reports. The command ends within the budget plus this
# (docs/fuzz.md, "The time budget").
OVERRUN_S: Final = 15.0


@dataclass(frozen=True, slots=True)
class Activity:
    """What one device's worker is doing, for the progress line."""

    device: str
    phase: str = "fuzzing"  # or "shrinking", "confirming"
    clause: str = ""  # the group's clause (or verdict) while shrinking or confirming
    group: int = 0  # the group's place (1-based) among the groups found so far
    groups: int = 0
    candidates: int = 0  # shrinking candidates run so far
    replay: int = 0  # confirming: this replay (1-based) of `replays`
    replays: int = REPLAYS
    deadline: float | None = None  # time.monotonic() by which this phase must end


@dataclass(frozen=True, slots=True)
class FuzzProgress:
    programs: int
    fuzzing_s: float  # the longest device's fuzzing time (not shrinking)
    divergences: int
    activities: tuple[Activity, ...]
    left_s: float | None  # until the time budget's deadline (None: a count budget)


ProgressFn = Callable[[FuzzProgress], None]


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
        return counted(self.programs, "program") if self.programs is not None else f"{self.seconds:g}s"


@dataclass(frozen=True, slots=True)
class FuzzRequest:
    run: RunRequest
    seed: int = 0
    budget: Budget = field(default_factory=lambda: Budget(seconds=60.0))
    batch: int = DEFAULT_BATCH
    shrink_budget_s: float = SHRINK_BUDGET_S
    target_defaulted: bool = False  # no --target given: fuzz's own default (local), not run's
    # Stop every device once the first divergence is shrunk and written (still bounded by the budget), after
    # after_find_s of fuzzing past the device's first divergence.
    until_found: bool = False
    after_find_s: float = AFTER_FIRST_FIND_S


@dataclass(frozen=True, slots=True)
class FuzzOutcome:
    out_dir: Path
    summary: FuzzSummary
    paths: dict[str, Path]
    coverage: Coverage

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code


def _absolute(path: Path | None) -> str | None:
    return str(path.absolute()) if path is not None else None


def configuration(request: FuzzRequest) -> dict[str, Any]:
    """Everything that decides what the run found, by option name (without the dashes)."""
    rr = request.run
    options = rr.options
    config: dict[str, Any] = {
        "target": rr.target,
        "target_default": request.target_defaulted,
        "impl": _absolute(rr.impl),
        "personality": options.given("personality"),
        "policy": options.given("policy"),
        "capacity": options.capacity,
        "profile": options.given("profile"),
        "timeout_multiplier": options.given("timeout_multiplier"),
        "seed": request.seed,
        "budget": request.budget.text(),
        "budget_bounds": "the whole command" if request.budget.seconds is not None else "the programs fuzzed",
        "shrink_bound_s": request.shrink_budget_s,
        "until_found": request.until_found,
        "after_find_s": request.after_find_s if request.until_found else None,
        "batch": request.batch,
        "jobs": lanes(rr),
        "build_dir": _absolute(rr.build_dir),
    }
    for option in OPTIONS:  # the target kind's own fuzz options: devices; serials, adb servers
        if FUZZ in option.on and option.target == rr.target and option.key not in config:
            value = options.given(option.key)
            config[option.key] = list(value) if isinstance(value, tuple) else value
    return config


def lanes(rr: RunRequest) -> int:
    """Probe processes per device: `-j`, else the target kind's default, as for `npuconf run`."""
    jobs = rr.options.jobs
    return jobs if jobs is not None else target_kind(rr.target).default_lanes(int(rr.options.given("devices")))


def exit_code(divergences: int, devices: Sequence[FuzzDevice]) -> int:
    """1 for any divergence (a FAIL or CRASH is one however the run ended), else 2 when a device's part
    ended early (lost, not prepared), else 0."""
    if divergences:
        return 1
    return 2 if any(d.status in ("lost", "unprepared", "failed") for d in devices) else 0


def _scenario_id(signature: str, seed: int, program_id: str) -> str:
    index = program_id.rsplit("_", 1)[-1].split("-c")[0]
    return f"fuzz.{signature.lower()}.s{seed}_{index}"


def _scenario(program: Program, found: Result, seed: int, shrunk: bool = True) -> Program:
    scenario_id = _scenario_id(found.signature, seed, found.program_id)
    out = dict(program)
    out["id"] = scenario_id
    what = f"fails {found.clause}" if found.verdict is Verdict.FAIL and found.clause else "crashes the process"
    out["title"] = f"A random program of seed {seed}, {'shrunk' if shrunk else 'as generated'}: {what}"
    if found.verdict is Verdict.FAIL and found.clause:
        out["clauses"] = [found.clause]
    return {key: out[key] for key in ("id", "title", "clauses", "requires", "timeout_ms", "steps")}


_Divergent = tuple[Program, Result, int]  # a divergent program, its result, its position on the device


class _Stopped(Exception):
    """Raised into the shrinker when the run is interrupted: the divergence stays unshrunk."""


class _Run:
    """What the workers share: the stop signals, the divergences found so far and fuzz.jsonl."""

    def __init__(self, request: FuzzRequest, out_dir: Path) -> None:
        self.request = request
        self.out_dir = out_dir
        self.scenario_dir = out_dir / SCENARIO_DIR / CHAPTER
        self.found_dir = out_dir / FOUND_DIR / CHAPTER
        self.results = out_dir / RESULTS_FILE
        self.stop = threading.Event()  # Ctrl-C: stop now, shrinking included
        self.enough = threading.Event()  # --until-found: a divergence is written; stop at the next batch
        self.first_group: tuple[str, str] | None = None  # --until-found: the group shrunk first
        self.shrunk_at: float | None = None  # --until-found: when that group's last shrink ended
        self.lock = threading.Lock()
        # By (build, signature): the devices of one build (host.run.group_of) share a group, shrunk once.
        self.divergences: dict[tuple[str, str], FuzzDivergence] = {}
        self.shrinking_s: dict[tuple[str, str], float] = {}  # each group's shrinking time so far (GROUP_SHRINK_S)
        self.deadline: float | None = None  # a time budget's end (time.monotonic), set when the run starts
        catalogue = load_catalogue()
        self.quotes = catalogue.quotes()
        self.testability = {c.id: c.testability for c in catalogue.clauses}
        # What the programs reached and what the judge gave for them; set once the devices are prepared.
        self.coverage = Coverage(frozenset())
        self.prior = kit_prior()
        self.drawer = Drawer(self.prior)  # the campaign's (_drawing)

    def append(self, kind: str, **record: Any) -> None:
        line = json.dumps({"kind": kind, "at": now_iso(), **record}, sort_keys=False) + "\n"
        with self.lock:
            append_bytes(self.results, line.encode("utf-8", errors="replace"))

    def shrink_limit(self, build: str, signature: str) -> int:
        """How many programs of a group are shrunk at most: GROUP_SHRINKS; under --until-found only the first
        group shrunk has more than one (the run ends once it has had them), and every other group found
        before the run ends is shrunk once: the defect a run looks for may show first under another clause."""
        with self.lock:
            if not self.request.until_found:
                return GROUP_SHRINKS
            if self.first_group is None:
                self.first_group = (build, signature)
            return GROUP_SHRINKS if self.first_group == (build, signature) else 1

    def first_written(self) -> bool:
        """Sets `enough`; True for the first divergence written (the one that ends an --until-found run)."""
        with self.lock:
            first = not self.enough.is_set()
            self.enough.set()
            return first

    def put(self, build: str, divergence: FuzzDivergence) -> None:
        with self.lock:
            self.divergences[(build, divergence.signature)] = divergence

    def get(self, build: str, signature: str) -> FuzzDivergence | None:
        with self.lock:
            return self.divergences.get((build, signature))

    def claim(self, build: str, divergence: FuzzDivergence) -> FuzzDivergence | None:
        """Keep a new group unless another device of the build found it meanwhile: then that one."""
        with self.lock:
            known = self.divergences.get((build, divergence.signature))
            if known is None:
                self.divergences[(build, divergence.signature)] = divergence
            return known

    def count_again(self, build: str, known: FuzzDivergence) -> None:
        """One more program of a group the build already has."""
        with self.lock:
            current = self.divergences.get((build, known.signature), known)
            self.divergences[(build, known.signature)] = current.seen_again()

    def shrunk_for(self, build: str, signature: str, seconds: float) -> None:
        """Add to a group's shrinking time. A shrink of the first group (--until-found) restarts the wait for
        it to be met again; the other groups' shrinks do not hold the run up."""
        with self.lock:
            self.shrinking_s[(build, signature)] = self.shrinking_s.get((build, signature), 0.0) + seconds
            if (build, signature) == self.first_group:
                self.shrunk_at = time.monotonic()

    def shrinking_time(self, build: str, signature: str) -> float:
        with self.lock:
            return self.shrinking_s.get((build, signature), 0.0)

    def shrinking_share_spent(self) -> bool:
        """Whether the shrinking done so far took the share of a time budget it may have."""
        seconds = self.request.budget.seconds
        with self.lock:
            return seconds is not None and sum(self.shrinking_s.values()) >= SHRINK_SHARE * seconds

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def group_place(self, build: str, signature: str) -> tuple[int, int]:
        """The group's place (1-based) among the groups found so far, and how many there are."""
        with self.lock:
            keys = list(self.divergences)
        place = keys.index((build, signature)) + 1 if (build, signature) in keys else len(keys) + 1
        return place, max(place, len(keys))

    def snapshot(self) -> list[FuzzDivergence]:
        with self.lock:
            return sorted(self.divergences.values(), key=lambda d: (d.found_after_s, d.device))


class _Worker:
    """One device's part: program indices position, position + stride, ... of the seed's stream."""

    def __init__(self, run: _Run, target: Target, position: int, stride: int) -> None:
        self.run = run
        self.target = target
        self.name = target.serial
        self.position = position
        self.stride = stride
        request = run.request
        rr = request.run
        self.runner = ProgramRunner(target, run.quotes, str(rr.options.given("profile")),
                                    float(rr.options.given("timeout_multiplier")), lanes(rr), run.stop)
        self.programs = 0
        self.batches = 0  # batches run so far (FIRST_BATCHES, then a batch per lane)
        self.fuzzing_s = 0.0
        self.verdicts: Counter[str] = Counter()
        self.build = self.name  # the device's build (host.run.group_of), once it is prepared
        self.status = "running"
        self.detail = ""
        self.activity = Activity(self.name)
        # adb: the serial `npuconf run --serial` takes (the device's name may differ)
        self.adb_serial = target.adb_serial if isinstance(target, AdbTarget) else None
        self.setup_error: KitError | None = None
        self.error: BaseException | None = None
        self.control = False
        self.pointer64 = False
        # Pair discovery failed (isSupported broken, say): as `npuconf run` still runs the scenarios that
        # need no discovery, the programs then need no pair (requests, cookies, isSupported, onAlloc only).
        self.pair = True
        self.unsupported = False  # a pair the device does not support was found (`$unsupported.*`)
        self.capacity: int | None = None  # the capacity the device declares
        self.next: Pending | None = None  # the next batch's programs, drawn while this batch runs
        self.fuzzing_at_find: float | None = None  # --until-found: fuzzing_s when this device first diverged

    # -- preparation ---------------------------------------------------------------------------------
    def prepare(self) -> None:
        try:
            device = self.runner.prepare()
            self.control = device.caps.vnpu_control
            self.pointer64 = device.caps.pointer_bits == 64
            self.pair = device.discovery_failed is None
            self.unsupported = Pairs.from_caps(device.caps, probed_pairs()).unsupported is not None
            self.capacity = device.caps.capacity_bytes
            self.build = group_of(device)
        except UsageError as exc:
            self.setup_error = exc
        except Exception as exc:
            self.status, self.detail = "unprepared", str(exc) or type(exc).__name__

    # -- the loop ------------------------------------------------------------------------------------
    def index(self, j: int) -> int:
        return self.position + j * self.stride

    def spent(self) -> bool:
        budget = self.run.request.budget
        if budget.programs is not None:
            return self.index(self.programs) >= budget.programs
        left = self.run.left()
        return left is not None and left <= 0

    def program_s(self) -> float | None:
        """One generated program's run time on this device so far (None before the first batch)."""
        return self.fuzzing_s / self.programs if self.programs else None

    def main(self) -> None:
        try:
            self._loop()
        except _Stopped:
            self.status = "interrupted"
        except Exception as exc:  # a generator or harness bug: reported once the reports are written
            self.status, self.detail, self.error = "failed", f"{type(exc).__name__}: {exc}", exc
        if self.next is not None:
            self.next.cancel()
        self.run.append("device", device=self.name, status=self.status, detail=self.detail, programs=self.programs,
                        fuzzing_s=round(self.fuzzing_s, 3))

    def _loop(self) -> None:
        run = self.run
        while True:
            if run.stop.is_set():
                self.status = "interrupted"
                return
            if run.enough.is_set():
                self.status = "found" if self.status == "found" else "stopped"
                return
            if self.spent():
                self.status = "complete"
                return
            time_left = run.left()
            count = self._batch_size(self.batches, self.programs, time_left)
            self.batches += 1
            started = time.monotonic()
            drawn = self._draw(count)
            self._order_next(count, time_left)
            batch = [d.program for d in drawn]
            results = self.runner.run_programs(batch)
            elapsed = time.monotonic() - started
            suspicious = any(r is None or r.divergent or r.verdict is Verdict.NOT_EXECUTED for r in results)
            if run.stop.is_set() or (suspicious and run.stop.wait(INTERRUPT_SETTLE_S)):
                self.status = "interrupted"  # the batch's end may be the interrupt's, not the device's
                return
            self.fuzzing_s += elapsed
            if self.fuzzing_at_find is None and any(r is not None and r.divergent for r in results):
                self.fuzzing_at_find = self.fuzzing_s
            divergent: list[_Divergent] = []
            for one, result in zip(drawn, results, strict=True):
                program = one.program
                if result is None:
                    raise RuntimeError(f"generated program {program['id']} does not validate (a generator bug)")
                if result.verdict is Verdict.NOT_EXECUTED:
                    # The batch stopped: the device (or its connection) is gone. Its part ends here.
                    self.status, self.detail = "lost", result.reason
                    break
                self.programs += 1
                self.verdicts[result.verdict.value] += 1
                run.coverage.record(one.cells, judged_of(result.verdict, result.clause, result.reason,
                                                         result.demonstrated))
                if result.divergent:
                    divergent.append((program, result, self.programs))
            self._batch_divergent(divergent)
            if self.status == "lost":
                return
            self._settle_unless_met_again()

    def _batch_divergent(self, divergent: list[_Divergent]) -> None:
        """A batch's divergent programs, each group new to the build shrunk first. --until-found: a group new
        to the run is shrunk once with the time left, whatever shrinking took so far (the defect a run looks
        for may show under any of its groups; only a group's further shrinks keep to the share), also when a
        shrink of this batch settles the first group: the batch ran before the run had enough. Batches after
        that leave theirs as generated."""
        run = self.run
        ended = run.enough.is_set()
        for program, result, programs in self._new_groups_first(divergent):
            first_shrink = run.request.until_found and run.get(self.build, result.signature) is None
            shrink_it = not ended and self._time_to_shrink(share=not first_shrink)
            self._divergent(program, result, programs, shrink_it=shrink_it)

    def _new_groups_first(self, divergent: list[_Divergent]) -> list[_Divergent]:
        """The batch's divergences, the first program of each group new to the build before the others."""
        new: list[_Divergent] = []
        again: list[_Divergent] = []
        signatures: set[str] = set()
        for one in divergent:
            signature = one[1].signature
            fresh = signature not in signatures and self.run.get(self.build, signature) is None
            (new if fresh else again).append(one)
            signatures.add(signature)
        return new + again

    def _settle_unless_met_again(self) -> None:
        """--until-found ends the run once the group is shrunk and no program met it again for GROUP_SHRINK_S:
        a rare route is not waited for until the budget's end, unless its kept scenario replayed in none of
        its runs (another of its programs may still give one that does)."""
        run = self.run
        first = run.get(*run.first_group) if run.first_group is not None else None
        if first is not None and first.replayed == 0:
            return
        if (run.request.until_found and run.shrunk_at is not None and self._fuzzed_after_find()
                and time.monotonic() - run.shrunk_at >= GROUP_SHRINK_S and run.first_written()):
            self.status = "found"

    def _batch_size(self, batches: int, programs: int, time_left: float | None) -> int:
        """The programs of the batch after ``batches`` batches and ``programs`` programs, with ``time_left``
        of a time budget: the first batches small, as for one lane, then a batch per lane; none past a
        programs budget, and a batch that ends about when a time budget does, not a whole batch after it."""
        request = self.run.request
        first = batches < len(FIRST_BATCHES)
        count = min(request.batch, FIRST_BATCHES[batches]) if first else request.batch * self.runner.lanes
        if request.budget.programs is not None:
            count = min(count, -(-(request.budget.programs - self.position) // self.stride) - programs)
        program_s = self.program_s()
        if time_left is not None and program_s:
            count = max(1, min(count, int(time_left / program_s)))
        return count

    def _indices(self, count: int, after: int = 0) -> tuple[int, ...]:
        return tuple(self.index(self.programs + after + i) for i in range(count))

    def _order(self, indices: tuple[int, ...]) -> Order:
        """Programs ``indices`` chosen on the campaign's coverage as it stands now."""
        capabilities = {"vnpu_control": self.control, "pointer64": self.pointer64, "pair": self.pair,
                        "unsupported": self.unsupported, "capacity": self.capacity}
        return Order(self.run.request.seed, indices, capabilities, self.run.coverage.snapshot())

    def _draw(self, count: int) -> list[Drawn]:
        """The batch's programs: for each index, the best of its candidates (host.fuzz.steer), scored on the
        coverage as it stood when the batch before began (its order, host.fuzz.draw_ahead); the first batch
        on the coverage as it stands."""
        indices = self._indices(count)
        pending, self.next = self.next, None
        if pending is None or pending.order.indices[:1] != indices[:1]:
            if pending is not None:
                pending.cancel()
            pending = self.run.drawer.order(self._order(indices))
        return pending.programs(indices)

    def _order_next(self, count: int, time_left: float | None) -> None:
        """Order the next batch's programs, to be drawn while this batch (``count`` programs) runs."""
        program_s = self.program_s()
        then = time_left - count * program_s if time_left is not None and program_s else time_left
        size = self._batch_size(self.batches, self.programs + count, then)
        if size > 0:
            self.next = self.run.drawer.order(self._order(self._indices(size, after=count)))

    def _divergent(self, program: Program, found: Result, programs: int, shrink_it: bool) -> None:
        run = self.run
        known = run.get(self.build, found.signature)
        if known is not None:
            self._seen_again(program, found, known, shrink_it)
            return
        seed = run.request.seed
        generated = _scenario(program, found, seed, shrunk=False)
        path = run.found_dir / f"{generated['id']}.yaml"
        write_text(path, yaml.safe_dump(generated, sort_keys=False, width=120))
        steps = step_count(program)
        divergence = FuzzDivergence(
            signature=found.signature, verdict=found.verdict.value, clause=found.clause, quote=found.quote,
            reason=found.reason, program=found.program_id, found_after_s=round(self.fuzzing_s, 3),
            found_after_programs=programs, steps_before=steps, steps_after=steps, shrink_s=0.0, candidates=0,
            scenario=str(path), scenario_id=str(generated["id"]), replays=False, shrunk_reason="", count=1,
            device=self.name, shrunk=False,
        )  # fmt: skip
        raced = run.claim(self.build, divergence)
        if raced is not None:  # another device of the build found it first
            self._seen_again(program, found, raced, shrink_it)
            return
        # The evidence as the probe wrote it: the divergent program's whole trace (bounded like a run's).
        run.append("found", **dataclasses.asdict(divergence), trace=list(found.trace))
        if not shrink_it:
            return
        run.shrink_limit(self.build, found.signature)  # the first group shrunk under --until-found
        shrunk = self._shrink_and_write(program, found, divergence)
        current = run.get(self.build, found.signature)
        run.put(self.build, dataclasses.replace(shrunk, count=current.count if current is not None else 1))
        run.append("shrunk", **dataclasses.asdict(shrunk))
        run.shrunk_for(self.build, found.signature, shrunk.shrink_s)
        self._found_if_settled(shrunk)

    def _seen_again(self, program: Program, found: Result, known: FuzzDivergence, shrink_it: bool) -> None:
        """A divergence of a group the build already has: counted, or its program shrunk too while the
        group's shrinks are not spent (only once one shrink has ended: the group's first is one device's)."""
        if shrink_it and known.shrunk and self._shrinks_left(known):
            self._shrink_again(program, found, known)
        else:
            self.run.count_again(self.build, known)

    def _shrink_again(self, program: Program, found: Result, known: FuzzDivergence) -> None:
        """Another program of the group is shrunk (it may take another route to the same clause): the
        scenario that replays more often, then the shorter, is kept; the other file is removed."""
        run = self.run
        again = self._shrink_and_write(program, found, dataclasses.replace(
            known, program=found.program_id, steps_before=step_count(program)))
        run.shrunk_for(self.build, found.signature, again.shrink_s)
        current = run.get(self.build, found.signature) or known
        better = (again.replayed, -again.steps_after) > (current.replayed, -current.steps_after)
        kept, dropped = (again, current) if better else (current, again)
        if dropped.scenario != kept.scenario:
            with suppress(FileNotFoundError):
                remove_file(Path(dropped.scenario))  # never through a symlink planted on the way
        kept = dataclasses.replace(kept, count=current.count + 1, shrinks=again.shrinks)
        run.put(self.build, kept)
        if better:
            run.append("shrunk", **dataclasses.asdict(kept))
        self._found_if_settled(kept)

    def _found_if_settled(self, shrunk: FuzzDivergence) -> None:
        """--until-found ends the run once its first group is not shrunk again (the budget's end ends it too,
        with the scenarios kept so far)."""
        run = self.run
        if (run.request.until_found and run.first_group == (self.build, shrunk.signature)
                and not self._shrinks_left(shrunk) and self._fuzzed_after_find() and run.first_written()):
            self.status = "found"

    def _fuzzed_after_find(self) -> bool:
        """--until-found: this device fuzzed the request's after_find_s since its first divergence."""
        after = self.run.request.after_find_s
        return self.fuzzing_at_find is not None and self.fuzzing_s - self.fuzzing_at_find >= after

    def _shrinks_left(self, group: FuzzDivergence) -> bool:
        """Whether the group's next program is shrunk too: its count of shrinks and its shrinking time
        (GROUP_SHRINKS, GROUP_SHRINK_S) not spent, and time to shrink. A group whose kept scenario replayed
        in none of its runs has nothing to show yet: its shrinking time does not end its shrinks."""
        limit = self.run.shrink_limit(self.build, group.signature)
        in_time = group.replayed == 0 or self.run.shrinking_time(self.build, group.signature) < GROUP_SHRINK_S
        return group.shrinks < limit and in_time and self._time_to_shrink()

    def _confirm_reserve(self, found: Result | None = None) -> float:
        """Time kept before the deadline for the replay confirmations: REPLAYS runs of a program, of the
        divergent one when it ran longer than most (one that waits out a settle for a callback its device
        never delivers does so in each replay too)."""
        return REPLAYS * max(self.program_s() or 0.2, traced_s(found.trace) if found is not None else 0.0)

    def _time_to_shrink(self, share: bool = True) -> bool:
        """Whether a shrink may start: the replays' time left before the deadline, and (``share``) the
        shrinking so far under its share of the budget."""
        left = self.run.left()
        return (left is None or left > self._confirm_reserve()) and not (share and self.run.shrinking_share_spent())

    def _run_candidates(self, programs: Sequence[Program]) -> list[Result | None]:
        results = self._run_unless_stopped(programs)
        self.activity = dataclasses.replace(self.activity, candidates=self.activity.candidates + len(programs))
        return results

    def _run_unless_stopped(self, programs: Sequence[Program]) -> list[Result | None]:
        if self.run.stop.is_set():
            raise _Stopped
        results = self.runner.run_programs(programs)
        if self.run.stop.is_set():
            raise _Stopped
        return results

    def _shrink_and_write(self, program: Program, found: Result, first: FuzzDivergence) -> FuzzDivergence:
        try:
            return self._shrink_and_write_now(program, found, first)
        finally:
            self.activity = Activity(self.name)

    def _shrink_and_write_now(self, program: Program, found: Result, first: FuzzDivergence) -> FuzzDivergence:
        started = time.monotonic()
        run, request = self.run, self.run.request
        deadline = started + request.shrink_budget_s
        if run.deadline is not None:
            deadline = min(deadline, run.deadline - self._confirm_reserve(found))
        group, groups = run.group_place(self.build, found.signature)
        self.activity = Activity(self.name, "shrinking", found.clause or found.verdict.value, group, groups,
                                 deadline=deadline)
        with _short_settle(self.target):
            shrunk, tried = shrink(program, found, self._run_candidates, deadline, self.capacity)
        cut_short = time.monotonic() >= deadline
        scenario = _scenario(shrunk, found, request.seed)
        path = run.scenario_dir / f"{scenario['id']}.yaml"
        write_text(path, yaml.safe_dump(scenario, sort_keys=False, width=120))
        # The written scenario, run again as written (REPLAYS times, one run each, the last ones left out
        # once the budget's deadline passed): `replays` when every run gives the same verdict and clause;
        # how many did is reported too (a timing-bound divergence).
        runs: list[Result] = []
        for k in range(REPLAYS):
            if k and run.deadline is not None and time.monotonic() >= run.deadline:
                break
            self.activity = dataclasses.replace(self.activity, phase="confirming", replay=k + 1,
                                                deadline=run.deadline)
            runs += [r for r in self._run_unless_stopped([dict(scenario, id=f"{scenario['id']}-r{k}")])
                     if r is not None]
        same = [r for r in runs if r.verdict is found.verdict and r.signature == found.signature]
        replay = same[0] if same else (runs[0] if runs else None)
        return dataclasses.replace(
            first,
            steps_after=step_count(scenario),
            shrink_s=round(time.monotonic() - started, 3),
            candidates=tried,
            scenario=str(path),
            scenario_id=str(scenario["id"]),
            replays=len(same) == REPLAYS,
            replayed=len(same),
            replay_runs=len(runs),
            cut_short=cut_short,
            shrunk_reason=replay.reason if replay is not None else "",
            shrunk=True,
            shrinks=first.shrinks + 1,
        )

    def summary(self) -> FuzzDevice:
        stream = f"programs {self.position}, {self.position + self.stride}, ... of seed {self.run.request.seed}"
        if self.stride == 1:
            stream = f"programs 0, 1, ... of seed {self.run.request.seed}"
        return FuzzDevice(
            device=self.name,
            programs=self.programs,
            fuzzing_s=round(self.fuzzing_s, 3),
            programs_per_s=round(self.programs / self.fuzzing_s, 2) if self.fuzzing_s > 0 else 0.0,
            divergences=sum(1 for d in self.run.snapshot() if d.device == self.name),
            verdicts=dict(self.verdicts),
            status=self.status,
            detail=self.detail,
            stream=stream,
        )


def traced_s(trace: Sequence[str]) -> float:
    """Seconds from a trace's first event to its last (0 when they carry no time)."""
    if not trace:
        return 0.0
    first, last = _event_time(trace[0]), _event_time(trace[-1])
    return (last - first) / 1e9 if first is not None and last is not None and last >= first else 0.0


def _event_time(line: str) -> int | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    t = event.get("t") if isinstance(event, dict) else None
    return t if isinstance(t, int) else None


@contextmanager
def _short_settle(target: Target) -> Iterator[None]:
    if not isinstance(target, LocalTarget):
        yield
        return
    settle = target.settle_ms
    target.settle_ms = min(settle, SHRINK_SETTLE_MS)
    try:
        yield
    finally:
        target.settle_ms = settle


def _threads(workers: Sequence[_Worker], method: str) -> list[threading.Thread]:
    threads = [threading.Thread(target=getattr(w, method), name=f"fuzz-{w.name}", daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    return threads


@contextmanager
def _drawing(run: _Run, devices: int) -> Iterator[Drawer]:
    """The campaign's drawer, a process per device as cores allow; a campaign long enough to draw in it
    starts that process now, so that it is ready when the first large batch is ordered."""
    run.drawer = Drawer(run.prior, processes=min(devices, max(1, (os.cpu_count() or 1) - 1)))
    budget = run.request.budget
    if budget.seconds is not None or (budget.programs or 0) >= WARM_FROM_PROGRAMS:
        run.drawer.warm()
    try:
        yield run.drawer
    finally:
        run.drawer.close()


def fuzz(request: FuzzRequest, out_dir: Path, progress: ProgressFn | None = None) -> FuzzOutcome:
    """Fuzz every device of the target; on Ctrl-C the reports are written with what was found, then
    RunInterrupted is raised."""
    if (out_dir / "fuzz.json").exists() or (out_dir / RESULTS_FILE).exists():
        raise UsageError(f"--out {out_dir}: already holds a fuzz run; choose a new directory")
    output_dir(out_dir)
    rr = request.run
    profile = fuzz_profile(rr)
    run = _Run(request, out_dir)
    started = time.monotonic()
    if request.budget.seconds is not None:
        run.deadline = started + request.budget.seconds
    with open_targets(rr, rr.target, out_dir, profile) as targets, _drawing(run, len(targets)):
        ordered = sorted(targets, key=lambda t: t.serial)
        workers = [_Worker(run, target, k, len(ordered)) for k, target in enumerate(ordered)]
        try:
            for thread in _threads(workers, "prepare"):
                thread.join()
        except KeyboardInterrupt:
            raise RunInterrupted("interrupted while preparing the devices: nothing was fuzzed; run again", 0) from None
        for worker in workers:
            if worker.setup_error is not None:
                raise worker.setup_error  # before anything is fuzzed: exit 3, one line
        output_dir(run.scenario_dir)
        run.coverage = _coverage(run, workers)
        run.append("start", seed=request.seed, target=rr.target, impl=str(rr.impl) if rr.impl else None,
                   budget=request.budget.text(), until_found=request.until_found, config=configuration(request),
                   devices=[{"device": w.name, "position": w.position, "stride": w.stride, "status": w.status,
                             "detail": w.detail} for w in workers])
        active = [w for w in workers if w.status == "running"]
        interrupted = False
        threads: list[threading.Thread] = []
        try:
            threads = _threads(active, "main")
            while any(t.is_alive() for t in threads):
                for thread in threads:
                    thread.join(timeout=0.5)
                if progress:
                    progress(FuzzProgress(
                        programs=sum(w.programs for w in workers),
                        fuzzing_s=max((w.fuzzing_s for w in workers), default=0.0),
                        divergences=len(run.snapshot()),
                        activities=tuple(w.activity for w in active if w.status == "running"),
                        left_s=run.left(),
                    ))
        except KeyboardInterrupt:
            interrupted = True
            run.stop.set()
            deadline = time.monotonic() + STOP_GRACE_S
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            for worker in active:
                if worker.status == "running":
                    worker.status = "interrupted"
        with _no_interrupt():
            summary = _summary(run, workers, started, "interrupted" if interrupted else None)
            paths = write_fuzz_reports(summary, out_dir)
            run.append("coverage", **run.coverage.summary())
            run.append("end", status=summary.status, programs=summary.programs, divergences=len(summary.divergences),
                       exit_code=summary.exit_code)
    failed = next((w.error for w in workers if w.error is not None), None)
    if failed is not None and not isinstance(failed, KitError):
        raise failed  # a generator or harness bug: a traceback, after the reports
    if interrupted:
        unshrunk = len(summary.unshrunk)
        raise RunInterrupted(
            f"interrupted after {counted(summary.programs, 'program')}: "
            f"{counted(len(summary.divergences), 'divergence')} "
            f"({unshrunk} not shrunk) kept in {paths['json']} and {paths['html']}",
            len(summary.divergences),
        )
    if all(w.status == "unprepared" for w in workers):
        why = "; ".join(f"{w.name}: {w.detail}" for w in workers)
        raise InfraError(f"no device could be prepared ({why}); reports in {paths['json']}")
    return FuzzOutcome(out_dir, summary, paths, run.coverage)


def _coverage(run: _Run, workers: Sequence[_Worker]) -> Coverage:
    """The campaign's coverage, against the cells the grammar allows on its prepared devices."""
    ready = [w for w in workers if w.status == "running"]
    control = any(w.control for w in ready)
    allowed = grammar.allowed(control=control, loads=any(w.pair for w in ready),
                              pointer64=any(w.pointer64 for w in ready),
                              unsupported=any(w.unsupported for w in ready))
    return Coverage(allowed, judgeable_clauses(run.testability, control))


@contextmanager
def _no_interrupt() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM) while the reports are written would leave none: it waits until they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _summary(run: _Run, workers: Sequence[_Worker], started: float, status: str | None) -> FuzzSummary:
    request = run.request
    rr = request.run
    devices = tuple(w.summary() for w in workers)
    config = configuration(request)
    adb_serials = {w.name: w.adb_serial for w in workers if w.adb_serial}

    def serials(names: Sequence[str]) -> list[str]:
        return [adb_serials[n] for n in names if n in adb_serials]

    kept = run.snapshot()
    for d in kept:
        if not d.shrunk:  # kept as generated: replayed with the shrunk ones, from the scenarios directory
            as_generated = Path(d.scenario)
            write_text(run.scenario_dir / as_generated.name, as_generated.read_text(encoding="utf-8"))
    divergences = tuple(
        dataclasses.replace(d, replay=replay(config, run.out_dir / SCENARIO_DIR, d.scenario_id, serials([d.device])))
        for d in kept
    )
    found_on = sorted({d.device for d in divergences})
    verdicts: Counter[str] = Counter()
    for w in workers:
        verdicts.update(w.verdicts)
    if status is None:
        status = "found" if run.enough.is_set() else "complete"
    return FuzzSummary(
        seed=request.seed,
        target=rr.target,
        impl=str(rr.impl) if rr.impl else None,
        budget=request.budget.text(),
        programs=sum(d.programs for d in devices),
        fuzzing_s=round(max((w.fuzzing_s for w in workers), default=0.0), 3),
        elapsed_s=round(time.monotonic() - started, 3),
        programs_per_s=round(sum(d.programs_per_s for d in devices), 2),
        verdicts=dict(verdicts),
        divergences=divergences,
        scenarios_dir=str((run.out_dir / SCENARIO_DIR).absolute()),
        devices=devices,
        status=status,
        until_found=request.until_found,
        config=config,
        replay=replay(config, run.out_dir / SCENARIO_DIR, None, serials(found_on)) if found_on else "",
        exit_code=2 if status == "interrupted" else exit_code(len(divergences), devices),
    )
