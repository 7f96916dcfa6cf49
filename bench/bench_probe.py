"""Probe throughput on the local target, measured side by side in one run.

    python bench/bench_probe.py [--rounds N]

Prints: the raw batch throughput of one probe process (scenarios/s, no judging), the same with
judging overlapped (what `npuconf run` does per lane), and the wall time of the whole corpus
through `npuconf run --target local` with -j 1 and -j 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.probe import DEFAULT_BUILD_DIR, Pairs, ProbeBuild, build_probe, compile_program, compile_scenario, run_batch
from host.suite import (
    load_catalogue,
    load_corpus,
)
from host.targets import DEFAULT_PAIRS
from reference_model.caps import DeviceCaps
from reference_model.judge import judge


def replicated_corpus(rounds: int):
    catalogue = load_catalogue()
    corpus = load_corpus(known_clauses=catalogue.ids())
    scenarios = [dataclasses.replace(s, id=f"{s.id}.r{i}") for i in range(rounds) for s in corpus]
    return catalogue, corpus, scenarios


def timed_batch(build: ProbeBuild, scenarios, with_judge: bool, catalogue) -> tuple[float, int]:
    caps = DeviceCaps(supported_pairs=frozenset(DEFAULT_PAIRS), vnpu_control=True)
    pairs = Pairs(DEFAULT_PAIRS[0], (2, 1))
    compiled = [compile_scenario(s, pairs) for s in scenarios]
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


def timed_run(jobs: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "host", "run", "--out", f"{tmp}/run", "-q", "-j", str(jobs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        return time.perf_counter() - started, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="corpus copies in the raw batch")
    args = parser.parse_args()
    build = ProbeBuild(DEFAULT_BUILD_DIR)
    if not build.exists():
        build = build_probe()
    catalogue, corpus, scenarios = replicated_corpus(args.rounds)
    raw_s, raw_n = timed_batch(build, scenarios, False, catalogue)
    judged_s, judged_n = timed_batch(build, scenarios, True, catalogue)
    run1_s, rc1 = timed_run(1)
    run2_s, rc2 = timed_run(2)
    print(f"corpus: {len(corpus)} scenarios; raw batch: {len(scenarios)} scenarios in one probe process")
    rows = [
        ("probe batch, no judging", raw_s, raw_n, ""),
        ("probe batch, judging overlapped", judged_s, judged_n, ""),
        ("npuconf run --target local -j 1 (whole run)", run1_s, len(corpus), f"exit {rc1}"),
        ("npuconf run --target local -j 2 (whole run)", run2_s, len(corpus), f"exit {rc2}"),
    ]
    print(f"{'measurement':<44} {'time':>9} {'scen/s':>9} {'ms/scen':>8}")
    for name, seconds, count, note in rows:
        print(f"{name:<44} {seconds:8.2f}s {count / seconds:9.0f} {1000 * seconds / count:8.2f}  {note}")
    print(
        f"judging overhead: {judged_s / raw_s:.2f}x raw; -j 2 vs -j 1: {run1_s / run2_s:.2f}x; "
        f"whole corpus on the local target: {min(run1_s, run2_s):.2f} s (target <= 10 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
