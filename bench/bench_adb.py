"""Throughput through adb: virtual devices against the local target and the naive one-shell-per-scenario way.

    python bench/bench_adb.py [--rounds N] [--naive-rounds M]

All measured in the same run, on the replicated corpus (every scenario N times, ids made unique),
with judging overlapped as `npuconf run` does:
- local: one probe process on this host (the local target);
- virtual x1 / x4: the adb target on 1 and on 4 virtual devices behind an adb server on a loopback TCP
  port, as a phone's (so through adbutils, host/targets/adb_clients.py), one probe process per device,
  the program pushed and the trace streamed back over shell v2;
- naive: one adbutils `shell()` per scenario on one virtual device (programs pushed beforehand,
  outside the timing), judged the same way.
Device preparation (getprop, push of the probe, op table and pair discovery) is timed apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.probe import DEFAULT_BUILD_DIR, PROBE_NAME, Pairs, ProbeBuild, build_probe, compile_program, compile_scenario
from host.run import (
    prepare_device,
    probed_pairs,
)
from host.suite import (
    load_catalogue,
    load_corpus,
)
from host.targets import VnpuProfile
from host.targets.adb import DEVICE_DIR, PROFILE_NAME, AdbTarget
from host.targets.local import LocalTarget
from host.targets.virtual_device import free_port, start_fleet, stop_fleet
from reference_model.judge import judge

LIMIT_S = 30.0


def replicated(rounds: int):
    catalogue = load_catalogue()
    corpus = load_corpus(known_clauses=catalogue.ids())
    return catalogue, [dataclasses.replace(s, id=f"{s.id}.r{i}") for i in range(rounds) for s in corpus]


def timed_lanes(lanes, scenarios, catalogue, with_judge=True):
    """One run_batch per (target, device) in parallel, judging each trace as it arrives; returns wall s, count."""
    quotes = catalogue.quotes()
    seen = [0]
    lock = threading.Lock()
    errors = []

    def lane(target, device):
        pairs = Pairs.from_caps(device.caps, probed_pairs())
        compiled = [compile_scenario(s, pairs) for s in scenarios]
        by_id = {c.scenario.id: c.scenario for c in compiled}

        def on_trace(trace):
            if not with_judge:
                with lock:
                    seen[0] += 1
                return
            judgement = judge(by_id[trace.scenario_id], trace.lines, device.caps, quotes)
            with lock:
                seen[0] += 1
                if judgement.verdict.value != "PASS":
                    errors.append((trace.scenario_id, judgement.verdict.value, judgement.reason))

        program = compile_program(compiled)
        ids = [c.scenario.id for c in compiled]
        outcome = target.run_batch(program, ids, [LIMIT_S] * len(ids), on_trace)
        if outcome.error:
            errors.append(("batch", "ERROR", outcome.error))

    threads = [threading.Thread(target=lane, args=pair) for pair in lanes]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        print(f"  warning: {len(errors)} non-PASS, first: {errors[0]}", file=sys.stderr)
    return wall, seen[0]


def naive(target: AdbTarget, device, scenarios, catalogue):
    """One adbutils shell() per scenario, programs pushed beforehand; judged the same way."""
    import adbutils

    client = adbutils.AdbClient(host=target.server.host, port=target.server.port)
    adb = client.device(serial=target.adb_serial)
    pairs = Pairs.from_caps(device.caps, probed_pairs())
    quotes = catalogue.quotes()
    compiled = [compile_scenario(s, pairs) for s in scenarios]
    for index, one in enumerate(compiled):
        adb.sync.push(compile_program([one]).encode(), f"{DEVICE_DIR}/naive/{index}.prog", mode=0o644)
    env = f"NPUCONF_VNPU_PROFILE={shlex.quote(f'{DEVICE_DIR}/{PROFILE_NAME}')}"
    passed = 0
    started = time.perf_counter()
    for index, one in enumerate(compiled):
        command = f"cd {DEVICE_DIR} && {env} ./{PROBE_NAME} --settle-ms 1000 naive/{index}.prog 2>/dev/null"
        output = adb.shell(command)
        judgement = judge(one.scenario, output.splitlines(), device.caps, quotes)
        passed += judgement.verdict.value == "PASS"
    wall = time.perf_counter() - started
    if passed != len(compiled):
        print(f"  warning: naive: {len(compiled) - passed} non-PASS", file=sys.stderr)
    return wall, len(compiled)


def row(name, wall, count, prepare=None):
    per = wall / count * 1000.0
    extra = f"   prepare {prepare * 1000:6.0f} ms" if prepare is not None else ""
    print(f"{name:<38} {count:6d} {wall:8.2f} {count / wall:9.0f} {per:9.2f}{extra}")
    return per


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="corpus copies per device (default 10)")
    parser.add_argument("--naive-rounds", type=int, default=2, help="corpus copies for the naive path (default 2)")
    args = parser.parse_args()
    build = ProbeBuild(DEFAULT_BUILD_DIR)
    if not build.exists():
        build_probe(DEFAULT_BUILD_DIR)
    catalogue, scenarios = replicated(args.rounds)
    _, naive_scenarios = replicated(args.naive_rounds)
    print(f"{'path':<38} {'scen.':>6} {'wall s':>8} {'scen/s':>9} {'ms/scen':>9}")
    with tempfile.TemporaryDirectory(prefix="npuconf-bench-") as tmp:
        local = LocalTarget(profile=VnpuProfile(), work_dir=Path(tmp) / "local")
        started = time.perf_counter()
        local_device = prepare_device(local)
        local_prepare = time.perf_counter() - started
        ms_local = row("local (probe on this host)", *timed_lanes([(local, local_device)], scenarios, catalogue),
                       local_prepare)

        fleet = start_fleet(4, Path(tmp) / "fleet", adb_port=free_port())
        try:
            server = fleet.server.address
            targets = [AdbTarget(server, d.adb_serial, serial=d.name) for d in fleet.devices]
            started = time.perf_counter()
            devices = [prepare_device(targets[0])]
            first_prepare = time.perf_counter() - started
            devices += [prepare_device(t) for t in targets[1:]]
            wall1, count1 = timed_lanes([(targets[0], devices[0])], scenarios, catalogue)
            ms_one = row("virtual x1 (adb target, streamed)", wall1, count1, first_prepare)
            wall4, count4 = timed_lanes(list(zip(targets, devices, strict=True)), scenarios, catalogue)
            row("virtual x4 (one lane per device)", wall4, count4)
            wall1t, count1t = timed_lanes([(targets[0], devices[0])], scenarios, catalogue, with_judge=False)
            row("virtual x1, transport only (no judge)", wall1t, count1t)
            wall4t, count4t = timed_lanes(list(zip(targets, devices, strict=True)), scenarios, catalogue, False)
            row("virtual x4, transport only (no judge)", wall4t, count4t)
            wall_naive, count_naive = naive(targets[0], devices[0], naive_scenarios, catalogue)
            ms_naive = row("naive: adbutils shell() per scenario", wall_naive, count_naive)
        finally:
            stop_fleet(fleet)
    speedup4 = (count4 / wall4) / (count1 / wall1)
    print()
    print(f"virtual x1 vs naive:       {ms_naive / ms_one:5.1f}x faster   (target >= 5x)")
    print(f"virtual x4 vs virtual x1:  {speedup4:5.2f}x throughput (target >= 2.5x; {os.cpu_count()} CPUs here)")
    print(f"  transport only:          {(count4t / wall4t) / (count1t / wall1t):5.2f}x")
    print(f"virtual x1 ms/scenario:    {ms_one:5.2f} ms         (target <= 5 ms)")
    print(f"virtual x1 vs local:       {ms_one / ms_local:5.2f}x the local cost per scenario")
    return 0


if __name__ == "__main__":
    sys.exit(main())
