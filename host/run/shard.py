"""`npuconf run --shard`: one build's corpus split across the devices of that build.

Devices whose prepared info reports the same build fingerprint form a group. Each group runs every
planned scenario once, on whichever of its devices the scheduler gives it to:

- **Balance.** Scenarios are dealt longest first to the device with the least estimated work
  (estimates: the mean measured duration of the scenario in earlier runs of the store, on this build
  when it has any, else on any build; lanes.py `DEFAULT_ESTIMATE_MS` for a scenario never measured).
- **Chunks.** A device lane takes a chunk of its own queue at a time and runs it as one probe batch,
  so the probe start and the program push are paid once per chunk, not once per scenario. Chunks
  shrink as the group's work runs out (guided self-scheduling): a chunk is about the group's
  remaining estimated work / (live lanes x `CHUNKS_PER_LANE`), within `MIN_CHUNK_MS`..`MAX_CHUNK_MS`
  and at most `MAX_CHUNK` scenarios, so early chunks are long and the last ones end close together.
- **Stealing.** A lane whose device queue is empty takes the back half of the most loaded queue of
  its group. A lane with nothing to take waits while other lanes still have chunks in flight: a
  device lost with a chunk in flight gives those scenarios back, and they must find a live device.
- **Loss.** A batch that raises or stops early marks its device lost: the scenarios it did not report
  and the device's whole queue go back to the live devices of the group, least loaded first.
  NOT_EXECUTED is recorded only for scenarios left when every device of the group is lost.

The union of a group's results is the group's answer (docs/sharding.md): every result record names the
device that ran it, every device record names its group, and the plan record says `"shard": true`.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reports.recorded.records import DeviceRecord, LostRecord

from ..probe import CompiledScenario
from ..targets import Device, Target
from .decision import needs_discovery
from .lanes import EstimatesFn, estimate_all, known_estimates
from .plan import Resume, RunPlan
from .results_writer import ResultsWriter

MIN_CHUNK_MS = 100.0
MAX_CHUNK_MS = 10_000.0
MAX_CHUNK = 64
CHUNKS_PER_LANE = 3  # a chunk: the group's remaining estimated work / (live lanes x this), within the bounds

@dataclass(frozen=True, slots=True)
class Leftover:
    """A scenario no live device could run: the device that last held it and why that device was lost."""

    scenario_id: str
    device: str
    reason: str


class ShardScheduler:
    """Hands out chunks of one group's scenarios to its devices (see the module docstring). Thread-safe."""

    def __init__(
        self, scenario_ids: Sequence[str], estimates: Mapping[str, float], devices: Sequence[str], lanes: int = 1
    ) -> None:
        if not devices:
            raise ValueError("a shard group needs at least one device")
        self._est = estimate_all(scenario_ids, estimates)
        self._lanes = max(lanes, 1)
        self._cond = threading.Condition()
        self._queues: dict[str, deque[str]] = {d: deque() for d in devices}
        self._load: dict[str, float] = dict.fromkeys(devices, 0.0)
        self._in_flight: dict[str, set[str]] = {d: set() for d in devices}
        self._lost: dict[str, str] = {}
        self._orphans: list[tuple[str, str]] = []  # (scenario id, device that held it) with no live device
        self._done: set[str] = set()
        self.steals = 0
        self.requeued = 0
        self._deal(list(scenario_ids))
        for queue in self._queues.values():  # longest first within each queue
            ordered = sorted(queue, key=lambda i: -self._est[i])
            queue.clear()
            queue.extend(ordered)

    # -- bookkeeping (caller holds the lock) --

    def _alive(self) -> list[str]:
        return [d for d in self._queues if d not in self._lost]

    def _deal(self, ids: list[str], holder: str = "") -> None:
        """Longest first, each to the live device with the least queued estimated work."""
        alive = self._alive()
        if not alive:
            self._orphans.extend((i, holder) for i in ids)
            return
        for scenario_id in sorted(ids, key=lambda i: -self._est[i]):
            device = min(alive, key=lambda d: (self._load[d], d))
            self._queues[device].append(scenario_id)
            self._load[device] += self._est[scenario_id]

    def _steal_for(self, device: str) -> bool:
        victims = [d for d in self._alive() if d != device and self._queues[d]]
        if not victims:
            return False
        victim = max(victims, key=lambda d: (self._load[d], d))
        queue = self._queues[victim]
        # Take from the back (the victim works from the front) until about half its load has moved.
        half = self._load[victim] / 2
        moved = 0.0
        taken: list[str] = []
        while queue and (not taken or moved + self._est[queue[-1]] <= half):
            scenario_id = queue.pop()
            taken.append(scenario_id)
            moved += self._est[scenario_id]
        self._load[victim] -= moved
        self._queues[device].extend(reversed(taken))
        self._load[device] += moved
        self.steals += 1
        return True

    def _has_work_in_flight(self) -> bool:
        # Lost devices count too: another lane of a lost device may still give its chunk back.
        return any(self._in_flight.values())

    # -- the lanes' side --

    def take(self, device: str) -> list[str]:
        """The next chunk for one of `device`'s lanes; empty when the group has nothing left for it."""
        with self._cond:
            while True:
                if device in self._lost:
                    return []
                if self._queues[device] or self._steal_for(device):
                    break
                if not self._has_work_in_flight():
                    return []
                self._cond.wait()
            queue = self._queues[device]
            alive = self._alive()
            remaining = sum(self._load[d] for d in alive)
            limit = min(MAX_CHUNK_MS, max(MIN_CHUNK_MS, remaining / (len(alive) * self._lanes * CHUNKS_PER_LANE)))
            chunk: list[str] = []
            budget = 0.0
            while queue and len(chunk) < MAX_CHUNK and (not chunk or budget + self._est[queue[0]] <= limit):
                scenario_id = queue.popleft()
                chunk.append(scenario_id)
                budget += self._est[scenario_id]
            self._load[device] -= budget
            self._in_flight[device].update(chunk)
            return chunk

    def finished(self, device: str, scenario_id: str) -> None:
        with self._cond:
            self._in_flight[device].discard(scenario_id)
            self._done.add(scenario_id)
            self._cond.notify_all()

    def lost(self, device: str, reason: str, unfinished: Sequence[str]) -> None:
        """`device` is gone: give `unfinished` (its lane's chunk) and its queue to the live devices."""
        with self._cond:
            self._lost.setdefault(device, reason)
            back = [i for i in unfinished if i not in self._done]
            self._in_flight[device].difference_update(back)
            back.extend(self._queues[device])
            self._queues[device].clear()
            self._load[device] = 0.0
            self.requeued += len(back)
            self._deal(back, holder=device)
            self._cond.notify_all()

    def leftovers(self) -> list[Leftover]:
        """Scenarios that ended with no live device to run them (call after every lane has returned)."""
        with self._cond:
            found = [Leftover(i, holder, self._lost.get(holder, "device lost")) for i, holder in self._orphans]
            for device, queue in self._queues.items():
                found.extend(Leftover(i, device, self._lost.get(device, "device lost")) for i in queue)
            return [item for item in found if item.scenario_id not in self._done]

    @property
    def lost_devices(self) -> Mapping[str, str]:
        with self._cond:
            return dict(self._lost)


class LaneRunner(Protocol):
    """What the scheduler needs of a device's runner (runner.DeviceRun)."""

    target: Target
    verdicts: Counter[Verdict]
    total: int
    on_recorded: Callable[[str], None] | None
    progress_pool: str | None
    device: Device | None  # None when preparation failed (prepare_error says why)
    prepare_error: str | None

    def compile_for(self, device: Device, scenarios: Sequence[Scenario]) -> list[CompiledScenario]: ...

    def run_lane(self, device: Device, lane: list[CompiledScenario]) -> tuple[str, list[Scenario]] | None: ...

    def record_not_run(self, scenario: Scenario, verdict: Verdict, reason: str) -> None: ...


def group_of(device: Device) -> str:
    """A device's shard group: its build fingerprint (a device that reports none is a group of its own)."""
    fingerprint = device.info.get("fingerprint")
    return fingerprint if isinstance(fingerprint, str) and fingerprint else f"device:{device.serial}"


def execute_sharded(
    plan: RunPlan,
    runs: Sequence[LaneRunner],
    writer: ResultsWriter,
    resume: Resume | None,
    estimates: EstimatesFn | None,
) -> Counter[Verdict]:
    """Group the prepared devices by build and shard each group's scenarios; the verdict counts."""
    by_serial = {run.target.serial: run for run in runs}
    prepared = {serial: run.device for serial, run in by_serial.items() if run.device is not None}
    described = resume.described if resume is not None else frozenset()
    groups: dict[str, list[str]] = {}
    for serial, run in by_serial.items():
        device = run.device
        group = group_of(device) if device is not None else f"device:{serial}"
        groups.setdefault(group, []).append(serial)
        if serial not in described:
            info = device.info if device is not None else {"serial": serial}
            writer.write(DeviceRecord(serial, info, group))

    by_id = {s.id: s for s in plan.scenarios}
    jobs: list[Callable[[], None]] = []
    schedulers: list[tuple[ShardScheduler, dict[str, LaneRunner]]] = []
    for group, serials in groups.items():
        wanted = _group_todo(plan, serials, resume)
        # A device whose pair discovery failed takes no share of its build while another device can
        # judge everything.
        alive = [s for s in serials if s in prepared and prepared[s].discovery_failed is None]
        if not wanted:
            continue
        for serial in serials:  # progress: each device counts its share of the group's scenarios
            by_serial[serial].total = len(wanted)
            by_serial[serial].progress_pool = group
        undiscovered = [s for s in serials if s in prepared]
        if not alive and undiscovered:
            # As without --shard: what needs the pairs is ERROR (once for the build), what does not still
            # runs, so a build whose isSupported is broken gets its FAILs.
            first = prepared[undiscovered[0]]
            reason = first.discovery_failed or "pair discovery failed"
            for scenario in wanted:
                if needs_discovery(scenario):
                    by_serial[first.serial].record_not_run(scenario, Verdict.ERROR, reason)
            wanted = [s for s in wanted if not needs_discovery(s)]
            alive = undiscovered
            if not wanted:
                continue
        if not alive:  # a device that could not be prepared is a group of its own: ERROR, as without --shard
            for serial in serials:
                for scenario in wanted:
                    device = prepared.get(serial)
                    reason = (device.discovery_failed if device is not None else None) or (
                        by_serial[serial].prepare_error or "device preparation failed"
                    )
                    by_serial[serial].record_not_run(scenario, Verdict.ERROR, reason)
            continue
        scheduler = ShardScheduler([s.id for s in wanted], known_estimates(estimates, group), alive, plan.jobs)
        group_runs = {s: by_serial[s] for s in alive}
        for serial, run in group_runs.items():
            run.on_recorded = _finisher(scheduler, serial)
            jobs.extend(_bind(_lane, run, prepared[serial], scheduler, by_id) for _ in range(plan.jobs))
        schedulers.append((scheduler, group_runs))
    _parallel(jobs, "shard")
    for scheduler, group_runs in schedulers:
        for serial, why in scheduler.lost_devices.items():  # recorded: the claim says the run lost a device
            writer.write(LostRecord(serial, group_of(prepared[serial]), why))
        for item in scheduler.leftovers():
            reason = f"every device of this build was lost (last: {item.reason})"
            group_runs[item.device].record_not_run(by_id[item.scenario_id], Verdict.NOT_EXECUTED, reason)
    counts: Counter[Verdict] = Counter()
    for run in runs:
        counts.update(run.verdicts)
    return counts


def _bind(function: Callable[..., None], *args: object) -> Callable[[], None]:
    return lambda: function(*args)


def _finisher(scheduler: ShardScheduler, serial: str) -> Callable[[str], None]:
    return lambda scenario_id: scheduler.finished(serial, scenario_id)




def _group_todo(plan: RunPlan, serials: Sequence[str], resume: Resume | None) -> list[Scenario]:
    """The group's scenarios: all planned ones, or on resume those left for any device of the group."""
    if resume is None:
        return list(plan.scenarios)
    left = {i for s in serials for i in resume.todo.get(s, ())}
    return [s for s in plan.scenarios if s.id in left]


def _lane(run: LaneRunner, device: Device, scheduler: ShardScheduler, by_id: Mapping[str, Scenario]) -> None:
    serial = run.target.serial
    while True:
        chunk = scheduler.take(serial)
        if not chunk:
            return
        try:
            runnable = run.compile_for(device, [by_id[i] for i in chunk])
            unrun = run.run_lane(device, runnable) if runnable else None
        except Exception as exc:  # a host-side bug: give the chunk back (what was recorded stays) rather than hang
            unrun = (f"the lane stopped: {exc}", [by_id[i] for i in chunk])
        if unrun is not None:
            reason, scenarios = unrun
            scheduler.lost(serial, reason, [s.id for s in scenarios])
            return


def _parallel(jobs: Sequence[Callable[[], None]], name: str) -> None:
    # Daemon threads: after Ctrl-C the run stops recording and leaves; a batch still running must not
    # keep the process alive.
    threads = [threading.Thread(target=job, name=f"{name}-{i}", daemon=True) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
