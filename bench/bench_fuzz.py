"""Fuzzing throughput: generated programs per second, this checkout's and (with --old) another's, in one run.

    python bench/bench_fuzz.py [--old CHECKOUT] [--seconds S] [--rounds N] [--seed S] [--no-virtual]

On the local target (the probe on this host, the conformant vnpu) and on one virtual device (the adb
target behind a private adb server), each checkout runs the real command line with its own code, its own
probe build and its own defaults (lanes, batches, the vnpu's profile):

    npuconf fuzz --target T --seed S --budget <S>s -q --out <dir>

and its fuzz.json gives the programs judged and the device's fuzzing time (generation, probe batches and
judging; device preparation is not in it). The two checkouts take turns, ROUNDS times per target, so that a
change of the host's load meets both; the table has every run, each checkout's median, and NEW/OLD.
OLD is a checkout of the kit (e.g. `git worktree add /tmp/old main`), run as bench/compare_checkouts.py
runs one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from compare_checkouts import kit

ROOT = Path(__file__).resolve().parents[1]


def build(checkout: Path, work: Path) -> None:
    done = kit(checkout, work, "probe", "build")
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: npuconf probe build failed: {done.stderr.strip()[-400:]}")


def measure(checkout: Path, work: Path, target: str, seconds: float, seed: int) -> dict[str, Any]:
    """One `npuconf fuzz` of the checkout: its fuzz.json's rate, lanes and verdicts."""
    out = Path(tempfile.mkdtemp(prefix=f"fuzz-{target}-", dir=work))
    done = kit(checkout, work, "fuzz", "--target", target, "--seed", str(seed), "--budget", f"{seconds:g}s", "-q",
               "--out", str(out))
    summary_path = out / "fuzz.json"
    if done.returncode != 0 or not summary_path.is_file():
        raise SystemExit(f"{checkout}: npuconf fuzz --target {target} ended {done.returncode}: "
                         f"{(done.stdout + done.stderr).strip()[-400:]}")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    (device,) = summary["devices"]
    return {"programs": device["programs"], "fuzzing_s": device["fuzzing_s"], "rate": device["programs_per_s"],
            "verdicts": summary["verdicts"], "lanes": summary["config"].get("jobs", 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="another checkout of the kit, measured in turn with this one")
    parser.add_argument("--seconds", type=float, default=20.0, help="each fuzz run's budget (default 20)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per checkout and target (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-virtual", action="store_true")
    args = parser.parse_args()
    checkouts = {"new": ROOT}
    if args.old is not None:
        old = args.old.resolve()
        if not (old / "host" / "__main__.py").is_file():
            parser.error(f"{old} is not a checkout of the kit (no host/__main__.py)")
        checkouts = {"old": old, "new": ROOT}
    targets = ["local"] if args.no_virtual else ["local", "virtual"]
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as tmp:
        work = Path(tmp)
        for checkout in checkouts.values():
            build(checkout, work)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        print("| target | checkout | lanes | programs | fuzzing s | programs/s | verdicts |")
        print("|---|---|---|---|---|---|---|", flush=True)
        for target in targets:
            for _ in range(args.rounds):
                for name, checkout in checkouts.items():
                    row = measure(checkout, work, target, args.seconds, args.seed)
                    runs.setdefault((target, name), []).append(row)
                    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(row["verdicts"].items()))
                    print(f"| {target} | {name} | {row['lanes']} | {row['programs']} | {row['fuzzing_s']:.1f} | "
                          f"{row['rate']:.1f} | {verdicts} |", flush=True)
        print()
        print("| target | " + " | ".join(f"{name} programs/s (median)" for name in checkouts)
              + (" | new / old |" if "old" in checkouts else " |"))
        print("|---|" + "---|" * (len(checkouts) + ("old" in checkouts)))
        for target in targets:
            medians = {name: statistics.median(r["rate"] for r in runs[(target, name)]) for name in checkouts}
            ratio = f" | {medians['new'] / medians['old']:.2f} |" if "old" in checkouts else " |"
            print(f"| {target} | " + " | ".join(f"{medians[name]:.1f}" for name in checkouts) + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
