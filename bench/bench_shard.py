"""Sharding throughput: the corpus on 1, 2 and 4 virtual devices with `--shard`, as a ratio to one device.

    python bench/bench_shard.py [--rounds N] [--delay-us US] [--repeat R]

Everything in one run, against one private adb server with 4 virtual devices started beforehand:

- for each vnpu `callback_delay_us` setting (0, and --delay-us: every asynchronous callback of the
  virtual NPU is delayed that long, set through the device profile file the adb target pushes, see
  docs/vnpu.md §2), a warm-up run on all 4 devices (deploys the probe, so later preparation only
  checks hashes), then sharded runs of the corpus on the first 1, 2 and 4 devices;
- a sharded run is `execute_run` of a plan with `shard=True`, exactly as `npuconf run --shard`:
  preparation and pair discovery, chunks, judging and results.jsonl included; the time is its wall time;
- the 2- and 4-device runs get the durations the 1-device run measured, as a lab's store would give them.

Without the delay the host's two cores (probe I/O, adb, the judge) are the bottleneck; with it the
devices are, as in a real lab. Each run must PASS every scenario exactly once, else the bench fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.probe import DEFAULT_BUILD_DIR, build_probe
from host.run import RunPlan
from host.run.runner import execute_run
from host.suite import load_catalogue, load_corpus
from host.targets import VnpuProfile
from host.targets.adb import AdbTarget
from host.targets.virtual_device import Fleet, start_fleet, stop_fleet
from reports.recorded.plan_options import PlanOptions


def corpus(rounds: int):
    catalogue = load_catalogue()
    scenarios = load_corpus(known_clauses=catalogue.ids())
    if rounds > 1:
        scenarios = [dataclasses.replace(s, id=f"{s.id}.r{i}") for i in range(rounds) for s in scenarios]
    return dict(catalogue.quotes()), tuple(scenarios)


def one_run(fleet: Fleet, count: int, delay_us: int, catalogue, scenarios, estimates, work: Path):
    server = fleet.server.address
    targets = [
        AdbTarget(server, d.adb_serial, serial=d.name, profile=VnpuProfile(callback_delay_us=delay_us))
        for d in fleet.devices[:count]
    ]
    out = Path(tempfile.mkdtemp(prefix=f"x{count}-", dir=work))
    plan = RunPlan(
        run_id=out.name, out_dir=out, scenarios=scenarios, catalogue=catalogue, target_name="adb",
        options=PlanOptions(profile="published-37", shard=True),
    )  # fmt: skip
    began = time.monotonic()
    execute_run(plan, targets, estimates=(lambda _fingerprint: estimates) if estimates else None)
    elapsed = time.monotonic() - began
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    results = [r for r in records if r["kind"] == "result"]
    once = Counter(r["scenario"] for r in results) == Counter(s.id for s in scenarios)
    verdicts = Counter(r["verdict"] for r in results)
    if not once or set(verdicts) != {"PASS"}:
        raise SystemExit(f"x{count} delay {delay_us} us: not every scenario PASSed exactly once: {dict(verdicts)}")
    per_device = Counter(r["device"] for r in results)
    durations = {r["scenario"]: float(r["duration_ms"]) for r in results if r.get("duration_ms")}
    return elapsed, per_device, durations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="the corpus this many times per run (ids made unique)")
    parser.add_argument("--delay-us", type=int, default=50000, help="vnpu callback_delay_us for the device-bound rows")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the median is shown")
    args = parser.parse_args()

    build_probe(DEFAULT_BUILD_DIR)
    catalogue, scenarios = corpus(args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-shard-") as tmp:
        work = Path(tmp)
        fleet = start_fleet(4, work / "fleet")
        rows = []
        try:
            for delay in (0, args.delay_us):
                one_run(fleet, 4, delay, catalogue, scenarios, {}, work)  # warm-up: deploys, fills caches
                base = None
                estimates: dict[str, float] = {}
                for count in (1, 2, 4):
                    times = []
                    shares: Counter[str] = Counter()
                    for _ in range(args.repeat):
                        elapsed, shares, durations = one_run(fleet, count, delay, catalogue, scenarios, estimates, work)
                        times.append(elapsed)
                        if count == 1:
                            estimates = durations
                    elapsed = statistics.median(times)
                    base = base or elapsed
                    rows.append((delay, count, elapsed, len(scenarios) / elapsed, base / elapsed, shares))
                    print(f"callback_delay_us={delay} devices={count}: {elapsed:.2f} s", file=sys.stderr, flush=True)
        finally:
            stop_fleet(fleet)

    print(f"corpus: {len(scenarios)} scenarios per run; sharded (`--shard`); median of {args.repeat} run(s) per cell")
    print()
    print("| callback_delay_us | devices | wall time (s) | scenarios/s | ratio to 1 device | scenarios per device |")
    print("|---:|---:|---:|---:|---:|---|")
    for delay, count, elapsed, rate, ratio, shares in rows:
        split = " / ".join(str(shares[d]) for d in sorted(shares))
        print(f"| {delay} | {count} | {elapsed:.2f} | {rate:.1f} | {ratio:.2f}x | {split} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
