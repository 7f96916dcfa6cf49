"""False divergences: `npuconf fuzz` against every behaviour the text allows, as a table.

    python bench/fuzz_legal.py [--seeds 1,2,3,4,5] [--budget 60s] [--jobs 2] [NAME ...]

Builds every variation of the adversarial interposer that the published text allows
(tests/adversarial/adversary.py: `LEGAL`, `WARNED` and `INCOMPLETE`, each with its own options, such as a
declared capacity) and runs on each, for every seed, the real command line

    npuconf fuzz --target local --impl <lib> --seed S --budget 60s -q --out <dir>

at most two at a time (the machine has two cores). Every divergence there is a false one: the kit
would fail an implementation the text allows. One row per variation: its kind, and per seed the
programs judged and the divergences (with the first one's clause and replay scenario). The last line
counts the runs and the divergences; the exit status is 1 when there is any. NAME filters the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.adversarial.adversary import INCOMPLETE, LEGAL, WARNED, build, real_library

MAX_JOBS = 2
OVERRUN_S = 90.0  # on top of the budget: preparation, the round in flight and the reports


@dataclass(frozen=True)
class Variation:
    name: str
    kind: str  # "legal", "warned" or "incomplete"
    args: tuple[str, ...]


def variations() -> list[Variation]:
    rows = [Variation(v.mutation, "legal", v.args) for v in LEGAL]
    rows += [Variation(v.mutation, "warned", v.args) for v in WARNED]
    rows += [Variation(v.mutation, "incomplete", v.args) for v in INCOMPLETE]
    return rows


def fuzz(row: Variation, lib: Path, out: Path, seed: int, budget: str, budget_s: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "host", "fuzz", "--target", "local", "--impl", str(lib), "--seed", str(seed),
               "--budget", budget, "-q", "--out", str(out), *row.args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                          timeout=budget_s + OVERRUN_S, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    summary_path = out / "fuzz.json"
    if not summary_path.is_file():
        return {"seed": seed, "error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return {"seed": seed, "programs": summary["programs"], "divergences": summary["divergences"], "error": ""}


def cell(result: dict[str, Any]) -> str:
    if result["error"]:
        return f"error: {result['error']}"
    divergences = result["divergences"]
    if not divergences:
        return f"{result['programs']} programs, 0"
    first = min(divergences, key=lambda d: d["found_after_s"])
    return (f"{result['programs']} programs, **{len(divergences)}**: `{first['signature']}` "
            f"({first['scenario_id']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds (default 1,2,3,4,5)")
    parser.add_argument("--budget", default="60s", help="each fuzz run's budget (default 60s)")
    parser.add_argument("--jobs", type=int, default=MAX_JOBS, help=f"fuzz runs at a time (at most {MAX_JOBS})")
    parser.add_argument("names", nargs="*", help="only these variations (mutation names)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    jobs = max(1, min(args.jobs, MAX_JOBS))
    budget_s = float(args.budget.rstrip("sm")) * (60 if args.budget.endswith("m") else 1)
    rows = [v for v in variations() if not args.names or v.name in args.names]
    real_lib = real_library()
    runs = divergent = 0
    with tempfile.TemporaryDirectory(prefix="npuconf-fuzz-legal-") as tmp:
        work = Path(tmp)
        libraries = {name: build(name, work / name, real_lib) for name in dict.fromkeys(v.name for v in rows)}
        print(f"seeds {','.join(map(str, seeds))}, budget {args.budget}, {jobs} runs at a time", flush=True)
        print("| variation | kind | " + " | ".join(f"seed {s}" for s in seeds) + " |")
        print("|---|---|" + "---|" * len(seeds), flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [[pool.submit(fuzz, v, libraries[v.name], work / v.name / f"row{i}-s{s}", s, args.budget,
                                    budget_s) for s in seeds] for i, v in enumerate(rows)]
            for v, row_futures in zip(rows, futures, strict=True):
                results = [f.result() for f in row_futures]
                runs += len(results)
                divergent += sum(1 for r in results if r["error"] or r["divergences"])
                options = f" {' '.join(v.args)}" if v.args else ""
                print(f"| `{v.name}`{options} | {v.kind} | " + " | ".join(cell(r) for r in results) + " |",
                      flush=True)
    print(f"\n{runs} runs, {divergent} with a divergence or an error")
    return 1 if divergent else 0


if __name__ == "__main__":
    raise SystemExit(main())
