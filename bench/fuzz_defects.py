"""Time to find: `npuconf fuzz --until-found` against every single-defect build, as a table.

    python bench/fuzz_defects.py [--seed S] [--budget 60s] [--jobs 2] [NAME ...]

Builds every single-defect implementation the kit has: the vnpu built with one `-DVNPU_DEFECT_*`
switch (as tests/vnpu_builds.py `build_defective_vnpu` does; the switch -> clause table is
tests/fuzz/test_fuzz.py `DEFECTS`) and every `M_*` mutant of the adversarial interposer
(tests/adversarial/adversary.py `MUTANTS`, each with the clause its row must FAIL). On each it runs the
real command line (with the row's own options, such as a declared capacity)

    npuconf fuzz --target local --impl <lib> --seed S --budget 60s --until-found -q --out <dir>

at most two at a time (the machine has two cores), and prints one row per defect: the clause its
row expects (a CRASH: the clause of the step that died), whether the fuzzer found that clause, the
clause of the first divergence it shrank, the fuzzing time until the batch that showed it (not counting
device preparation or shrinking), the generated program's steps and the shrunk scenario's, and whether
the shrunk scenario replayed to the same clause. NAME filters the rows (a switch such as
VNPU_DEFECT_PRIORITY_MAX_REFUSED or M_COOKIE_48). A row that is not found within the budget says `no`:
its defect needs a state the programs did not reach in that time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.adversarial.adversary import MUTANTS, build, real_library
from tests.fuzz.test_fuzz import DEFECTS
from tests.vnpu_builds import build_defective_vnpu

MAX_JOBS = 2
SHRINK_ALLOWANCE_S = 60.0  # on top of a time budget, which bounds shrinking too: its documented overrun and slack


@dataclass(frozen=True)
class Defect:
    name: str
    clause: str
    kind: str  # "vnpu switch" or "interposer mutant"
    verdict: str = "FAIL"  # CRASH: the probe dies, the divergence naming the clause of the step that died
    args: tuple[str, ...] = ()  # the row's own options (a declared capacity)


def defects() -> list[Defect]:
    rows = [Defect(define, clauses[0], "vnpu switch") for define, clauses in sorted(DEFECTS.items())]
    rows += [Defect(m.mutation, m.clause, "interposer mutant", m.verdict, m.args) for m in MUTANTS]
    return rows


def build_library(defect: Defect, work: Path, real_lib: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    if defect.kind == "vnpu switch":
        return Path(build_defective_vnpu(work, defect.name))
    return build(defect.name, work, real_lib)


def fuzz(defect: Defect, lib: Path, work: Path, seed: int, budget: str, budget_s: float) -> dict[str, Any]:
    out = work / "fuzz"
    command = [sys.executable, "-m", "host", "fuzz", "--target", "local", "--impl", str(lib), "--seed", str(seed),
               "--budget", budget, "--until-found", "-q", "--out", str(out), *defect.args]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                          timeout=budget_s + SHRINK_ALLOWANCE_S, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall_s = time.monotonic() - started
    summary_path = out / "fuzz.json"
    if not summary_path.is_file():
        return {"defect": defect, "exit": done.returncode, "wall_s": wall_s, "summary": None,
                "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return {"defect": defect, "exit": done.returncode, "wall_s": wall_s,
            "summary": json.loads(summary_path.read_text(encoding="utf-8")), "error": ""}


def replay_text(divergence: dict[str, Any]) -> str:
    runs = divergence.get("replay_runs") or 1
    replayed = divergence.get("replayed", runs if divergence["replays"] else 0)
    return f"{'yes' if divergence['replays'] else 'no'} ({replayed}/{runs})"


def names(divergence: dict[str, Any], defect: Defect) -> bool:
    """Whether a divergence is the row's: a FAIL naming its clause, or a CRASH (grouped as one signature)
    whose divergence names the clause of the step that died."""
    if defect.verdict == "CRASH":
        return bool(divergence["verdict"] == "CRASH" and divergence["clause"] == defect.clause)
    return bool(divergence["signature"] == defect.clause)


def found_text(divergence: dict[str, Any]) -> str:
    if divergence["verdict"] == "CRASH":
        return f"`CRASH` (`{divergence['clause']}`)" if divergence.get("clause") else "`CRASH`"
    return f"`{divergence['signature']}`"


def row(result: dict[str, Any]) -> str:
    defect: Defect = result["defect"]
    summary = result["summary"]
    if summary is None:
        why = f"exit {result['exit']}: {result['error']}"
        wall = f"{result['wall_s']:.0f} s"
        return f"| `{defect.name}` | {expected_text(defect)} | error | {why} | - | - | - | - | {wall} |"
    divergences = summary["divergences"]
    shrunk = [d for d in divergences if d["shrunk"]]
    first = min(shrunk or divergences, key=lambda d: d["found_after_s"]) if divergences else None
    expected = next((d for d in divergences if names(d, defect)), None)
    shown = expected if expected is not None and expected["shrunk"] else first
    ended = [f"{d['device']} {d['status']}: {d['detail']}" for d in summary["devices"]
             if d["status"] in ("lost", "unprepared", "failed")]
    if first is None or shown is None:
        found = "no"
        why = f"not in {summary['programs']} programs ({summary['fuzzing_s']:.0f} s)"
        cells = ["-", "; ".join([why, *ended]), "-", "-", "-"]
    else:
        found = "yes" if expected is not None else "other clause"
        steps_after = str(shown["steps_after"]) if shown["shrunk"] else "not shrunk"
        cells = [found_text(shown),
                 f"{shown['found_after_s']:.1f} s (program {shown['found_after_programs']})",
                 str(shown["steps_before"]), steps_after, replay_text(shown)]
    wall = f"{result['wall_s']:.0f} s"
    return f"| `{defect.name}` | {expected_text(defect)} | {found} | " + " | ".join([*cells, wall]) + " |"


def expected_text(defect: Defect) -> str:
    clause = f"`CRASH` (`{defect.clause}`)" if defect.verdict == "CRASH" else f"`{defect.clause}`"
    return clause + (f" {' '.join(defect.args)}" if defect.args else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", default="60s", help="each fuzz run's budget (default 60s)")
    parser.add_argument("--jobs", type=int, default=MAX_JOBS, help=f"fuzz runs at a time (at most {MAX_JOBS})")
    parser.add_argument("names", nargs="*", help="only these defects (switch or mutation names)")
    args = parser.parse_args()
    jobs = max(1, min(args.jobs, MAX_JOBS))
    budget_s = float(args.budget.rstrip("sm")) * (60 if args.budget.endswith("m") else 1)
    rows = [d for d in defects() if not args.names or d.name in args.names]
    real_lib = real_library()
    with tempfile.TemporaryDirectory(prefix="npuconf-fuzz-defects-") as tmp:
        work = Path(tmp)
        libraries = {d.name: build_library(d, work / d.name, real_lib) for d in rows}
        print(f"seed {args.seed}, budget {args.budget}, --until-found, {jobs} runs at a time", flush=True)
        print("| defect | expected clause | found? | clause found | time to find | steps before | after | replays "
              "| wall time |")
        print("|---|---|---|---|---|---|---|---|---|", flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(fuzz, d, libraries[d.name], work / d.name, args.seed, args.budget, budget_s)
                       for d in rows]
            for future in futures:
                print(row(future.result()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
