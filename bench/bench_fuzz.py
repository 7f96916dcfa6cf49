"""Fuzzing throughput: generated programs per second against the corpus rate, in the same run.

    python bench/bench_fuzz.py [--programs N] [--seconds S] [--no-virtual]

For the local target (the probe on this host, the conformant vnpu) and one virtual device (the adb
target behind a private adb server), each prepared once as `npuconf fuzz` does: generated programs run
in batches of 50 through the run's DeviceRun (the same compiler, probe batches with a fork per program,
and judge), until N programs or S seconds; then the whole corpus once through the same DeviceRun. Both
rates are judged programs (scenarios) per second of wall time; device preparation is not timed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host.fuzz import ProgramRunner, generate
from host.run import RunRequest, open_targets
from host.suite import load_catalogue, load_corpus
from host.targets import DEFAULT_CAPACITY, VnpuProfile

BATCH = 50


def measure(target_name: str, programs: int, seconds: float) -> dict[str, object]:
    catalogue = load_catalogue()
    corpus = load_corpus(known_clauses=catalogue.ids())
    profile = VnpuProfile(capacity=DEFAULT_CAPACITY, policy="budget", personality="published", declared_capacity=None)
    with tempfile.TemporaryDirectory() as tmp, open_targets(RunRequest(target=target_name), target_name, Path(tmp),
                                                            profile) as targets:
        runner = ProgramRunner(targets[0], catalogue.quotes(), "published-37")
        device = runner.prepare()
        verdicts: Counter[str] = Counter()
        done = 0
        started = time.monotonic()
        while done < programs and time.monotonic() - started < seconds:
            batch = [generate(1, done + i, vnpu_control=device.caps.vnpu_control) for i in range(BATCH)]
            for result in runner.run_programs(batch):
                assert result is not None
                verdicts[result.verdict.value] += 1
            done += BATCH
        fuzz_s = time.monotonic() - started
        started = time.monotonic()
        compiled = runner.run.compile_for(device, corpus)
        unrun = runner.run.run_lane(device, compiled)
        corpus_s = time.monotonic() - started
        assert unrun is None, unrun
    return {
        "target": target_name,
        "programs": done,
        "fuzz_s": round(fuzz_s, 2),
        "programs_per_s": round(done / fuzz_s, 1),
        "verdicts": dict(verdicts),
        "corpus": len(compiled),
        "corpus_s": round(corpus_s, 2),
        "corpus_per_s": round(len(compiled) / corpus_s, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-virtual", action="store_true")
    args = parser.parse_args()
    rows = [measure("local", args.programs, args.seconds)]
    if not args.no_virtual:
        rows.append(measure("virtual", args.programs, args.seconds))
    print("| target | generated programs | programs/s | verdicts | corpus scenarios | corpus/s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(row["verdicts"].items()))  # type: ignore[attr-defined]
        print(f"| {row['target']} | {row['programs']} in {row['fuzz_s']} s | {row['programs_per_s']} | {verdicts} | "
              f"{row['corpus']} in {row['corpus_s']} s | {row['corpus_per_s']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
