"""Run time of the corpus, measured side by side in one run: what bounds a run and how far it is from the floor.

    .venv/bin/python bench/bench_probe.py [--repeat N] [--jobs 1,2,4,8,16] [--virtual-jobs 1,8] [--rounds N]

Every row is the median wall time of N runs of the real command line (`python -m host run -q ...`),
from the start of the process to its exit, with the same store for all of them (the durations it
keeps deal the lanes, as on a user's machine) after one warm-up run (which fills the user cache).
Rows:
- the whole corpus on the local target with each `-j` of --jobs and with the default lanes; the
  verdicts of every run are compared with those of `-j 1` (`same` or the number that differ);
- a one-scenario run (a short scenario: the fixed cost), and a one-scenario run of the longest
  scenario beside that scenario's own duration (the floor: no run can end before it);
- the whole corpus on one virtual device (the adb path), with the default lanes and each `-j` of
  --virtual-jobs; the default-lanes row is measured in alternation with local default runs (local,
  virtual, local, ...), and its ratio is the median of those pairs' ratios, so a machine whose speed
  drifts between rows moves both sides of the ratio alike;
- with --rounds N > 0, the raw throughput of one probe process over N copies of the corpus, without
  and with judging (no start-up, no reports).
The header gives the machine's load: figures from a shared machine are inflated, ratios less so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.probe import DEFAULT_BUILD_DIR, Pairs, ProbeBuild, build_probe, compile_program, compile_scenario, run_batch
from host.run.lanes import default_lanes
from host.suite import load_catalogue, load_corpus
from host.targets import DEFAULT_PAIRS
from reference_model.caps import DeviceCaps
from reference_model.judge import judge

SHORT_SCENARIO = "cookies.deleter_runs_without_allocation"


@dataclasses.dataclass
class Measured:
    name: str
    seconds: list[float] = dataclasses.field(default_factory=list)
    verdicts: dict[str, str] = dataclasses.field(default_factory=dict)
    exit_codes: set[int] = dataclasses.field(default_factory=set)
    results: Path | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


class Runs:
    def __init__(self, work: Path, repeat: int) -> None:
        self.work = work
        self.repeat = repeat
        self.count = 0

    def measure(self, name: str, *options: str) -> Measured:
        row = Measured(name)
        for _ in range(self.repeat):
            self._once(row, options)
        return row

    def alternate(
        self, name: str, other: str, options: tuple[str, ...], others: tuple[str, ...]
    ) -> tuple[Measured, Measured]:
        """Two rows measured in turn, run by run (A B A B ...): the pairs saw the same machine."""
        row, beside = Measured(name), Measured(other)
        for _ in range(self.repeat):
            self._once(beside, others)
            self._once(row, options)
        return row, beside

    def _once(self, row: Measured, options: tuple[str, ...]) -> None:
        self.count += 1
        out = self.work / f"run-{self.count}"
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "host", "run", "-q", "--out", str(out), *options],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        row.seconds.append(time.perf_counter() - started)
        row.exit_codes.add(done.returncode)
        row.verdicts = _verdicts(out)
        row.results = out / "results.jsonl"


def _verdicts(out: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    path = out / "results.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "result":
                found[record["scenario"]] = record["verdict"]
    return found


def _longest(results: Path) -> tuple[str, float]:
    durations = []
    for line in results.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "result" and record.get("duration_ms"):
            durations.append((float(record["duration_ms"]), record["scenario"]))
    ms, scenario = max(durations)
    return scenario, ms


def _raw_batch(build: ProbeBuild, rounds: int, with_judge: bool) -> tuple[float, int]:
    catalogue = load_catalogue()
    corpus = load_corpus(known_clauses=catalogue.ids())
    scenarios = [dataclasses.replace(s, id=f"{s.id}.r{i}") for i in range(rounds) for s in corpus]
    caps = DeviceCaps(supported_pairs=frozenset(DEFAULT_PAIRS), vnpu_control=True)
    compiled = [compile_scenario(s, Pairs(DEFAULT_PAIRS[0], (2, 1))) for s in scenarios]
    by_id = {c.scenario.id: c.scenario for c in compiled}
    quotes = catalogue.quotes()
    seen = 0

    def on_trace(trace):
        nonlocal seen
        seen += 1
        if with_judge:
            judge(by_id[trace.scenario_id], trace.lines, caps, quotes)

    command = [str(build.probe), "--impl", str(build.vnpu), "--settle-ms", "1000"]
    started = time.perf_counter()
    run_batch(command, compile_program(compiled), [c.scenario.id for c in compiled], [30.0] * len(compiled), on_trace)
    return time.perf_counter() - started, seen


def _same(row: Measured, reference: Measured) -> str:
    if not row.verdicts:
        return "no results"
    differ = sum(1 for k in reference.verdicts.keys() | row.verdicts.keys()
                 if reference.verdicts.get(k) != row.verdicts.get(k))  # fmt: skip
    return "same" if not differ else f"{differ} differ"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (the median is shown)")
    parser.add_argument("--jobs", default="1,2,4,8,16", help="-j values for the local target")
    parser.add_argument("--virtual-jobs", default="", help="-j values for one virtual device, besides its default")
    parser.add_argument("--rounds", type=int, default=0, help="corpus copies for the raw probe batch rows (0: none)")
    args = parser.parse_args()
    build = ProbeBuild(DEFAULT_BUILD_DIR)
    if not build.exists():
        build = build_probe()
    load = os.getloadavg()
    bytecode = "present" if (ROOT / "host" / "__pycache__").is_dir() else "absent (every start compiles the kit)"
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start; "
          f"PYTHONDONTWRITEBYTECODE={'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'unset'}, "
          f"kit bytecode {bytecode}; median of {args.repeat} runs per row")
    with tempfile.TemporaryDirectory() as tmp:
        runs = Runs(Path(tmp), args.repeat)
        runs.measure("warm-up", "--target", "local")
        local = {j: runs.measure(f"local -j {j}", "--target", "local", "-j", str(j))
                 for j in map(int, args.jobs.split(","))}  # fmt: skip
        default = runs.measure(f"local, default lanes ({default_lanes('local')})", "--target", "local")
        one_lane = local.get(1) or runs.measure("local -j 1", "--target", "local", "-j", "1")
        best_j = min(local, key=lambda j: local[j].median)
        short = runs.measure(f"one scenario ({SHORT_SCENARIO})", "--target", "local", "--scenario", SHORT_SCENARIO)
        floor_id, floor_ms = _longest(default.results) if default.results else ("?", 0.0)
        floor_run = runs.measure(f"one scenario, the longest ({floor_id})", "--target", "local", "--scenario", floor_id)
        lanes = default_lanes("virtual")
        virtual_default, local_beside = runs.alternate(
            f"virtual, 1 device, default lanes ({lanes})", "local, default lanes, in turn with the virtual row",
            ("--target", "virtual"), ("--target", "local"),
        )  # fmt: skip
        virtual = [virtual_default]
        for j in (int(x) for x in args.virtual_jobs.split(",") if x):
            virtual.append(runs.measure(f"virtual, 1 device, -j {j}", "--target", "virtual", "-j", str(j)))
        load_end = os.getloadavg()

    print()
    print(f"| {'measurement':<64} | {'wall s':>7} | {'vs default':>10} | verdicts vs -j 1 | exit |")
    print(f"|{'-' * 66}|{'-' * 9}:|{'-' * 11}:|------------------|------|")

    def row(m: Measured, note: str = "") -> None:
        ratio = m.median / default.median
        verdicts = note or _same(m, one_lane)
        codes = ",".join(map(str, sorted(m.exit_codes)))
        print(f"| {m.name:<64} | {m.median:7.2f} | {ratio:9.2f}x | {verdicts:<16} | {codes:<4} |")

    for j in sorted(local):
        row(local[j])
    row(default)
    row(short, "(partial)")
    row(floor_run, "(partial)")
    row(local_beside)
    for m in virtual:
        row(m)
    print()
    print(f"best -j on the local target: {best_j} ({local[best_j].median:.2f} s); "
          f"default: {default.median:.2f} s (target <= 2.0 s); -j 1 / default: {one_lane.median / default.median:.2f}x")
    print(f"one-scenario run: {short.median:.2f} s (target <= 0.6 s)")
    over_floor = default.median / max(floor_run.median, 1e-9)
    print(f"floor: the longest scenario, {floor_id}, takes {floor_ms / 1000:.3f} s inside the probe; "
          f"its one-scenario run {floor_run.median:.2f} s; the whole corpus takes {over_floor:.2f}x that")
    pairs = sorted(v / lo for v, lo in zip(virtual_default.seconds, local_beside.seconds, strict=True))
    print(f"virtual (1 device, default lanes) / local default, run in turn: {statistics.median(pairs):.2f}x "
          f"(target <= 1.2x; pairs {pairs[0]:.2f}-{pairs[-1]:.2f}x; "
          f"medians {virtual_default.median:.2f} / {local_beside.median:.2f} s)")
    print(f"load average at the end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    if args.rounds > 0:
        raw_s, raw_n = _raw_batch(build, args.rounds, False)
        judged_s, judged_n = _raw_batch(build, args.rounds, True)
        print(f"one probe process, {raw_n} scenarios ({args.rounds} copies of the corpus): "
              f"{raw_s:.2f} s ({raw_n / raw_s:.0f}/s) raw, {judged_s:.2f} s ({judged_n / judged_s:.0f}/s) judged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
