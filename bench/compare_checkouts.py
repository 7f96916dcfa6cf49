"""Do two checkouts of the kit give the same verdicts? For a change meant to keep behaviour as it is.

    python bench/compare_checkouts.py OLD NEW [--work DIR] [--rows N] [--seed S] [-k KEYWORD]

OLD and NEW are checkouts (e.g. `git worktree add /tmp/old main`). Two comparisons:

- **Runs**: the corpus run by each checkout's own code on the embedded virtual device under the four
  policies, on its aosp-2026 personality (the twin), on the local target with the kit's vnpu library
  (`--impl`), and on the adversarial rows of tests/adversarial (all, or a sample of `--rows N`), each
  row's library built once from OLD and run by both. Per scenario, the verdict and the clause its
  divergence names. A scenario whose answers differ runs again in each checkout in turn, up to eight
  times: it changed when no answer of one checkout is ever among the other's; otherwise it is a race.
- **Judgement**: every result of OLD's runs judged again by each checkout (`npuconf rejudge`): the
  verdict, clause, reason and demonstrated clauses must be identical (the judge is deterministic).

Prints the differences and one summary line; exits 1 when a change remains, 0 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

POLICIES: Final = ("budget", "acl", "caching", "arena")
# A scenario whose answers differ runs again, one checkout after the other, until the two have given a
# common answer (a race of the device) or each has run this many times more (a change).
RERUNS: Final = 8
Answer = tuple[str, str]  # verdict, the clause its divergence names ("" when none)


def _env(checkout: Path, work: Path) -> dict[str, str]:
    cache = work / "cache" / hashlib.sha256(str(checkout).encode()).hexdigest()[:12]  # one per checkout
    return dict(os.environ, PYTHONPATH=str(checkout), NPUCONF_CACHE_DIR=str(cache))


def kit(checkout: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``npuconf ARGS`` with the checkout's own code, from the checkout."""
    return subprocess.run([sys.executable, "-m", "host", *args], cwd=checkout, env=_env(checkout, work),
                          capture_output=True, text=True, check=False)  # fmt: skip


def run(checkout: Path, work: Path, out: Path, options: Sequence[str]) -> Path:
    done = kit(checkout, work, "run", "-q", "--out", str(out), "--store", str(out.parent / f"{out.name}.sqlite"),
               *options)  # fmt: skip
    if done.returncode not in (0, 1, 2) or not (out / "results.jsonl").is_file():
        raise SystemExit(f"{checkout}: npuconf run {' '.join(options)} failed: {done.stderr.strip()[-400:]}")
    return out


def results(run_dir: Path) -> Iterator[dict[str, object]]:
    with (run_dir / "results.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if isinstance(record, dict) and record.get("kind") == "result":
                yield record


def answer(record: dict[str, object]) -> Answer:
    divergence = record.get("divergence")
    clause = divergence.get("clause") if isinstance(divergence, dict) else None
    return str(record.get("verdict")), str(clause or "")


JUDGED: Final = ("verdict", "reason", "divergence", "demonstrated", "discrepancy")


def judged(record: dict[str, object]) -> dict[str, object]:
    """Everything the judge decides about one result."""
    return {name: record.get(name) for name in JUDGED}


def difference(before: dict[str, object] | None, after: dict[str, object] | None) -> str:
    if before is None or after is None:
        return f"judged only by {'NEW' if before is None else 'OLD'}"
    name = next(n for n in JUDGED if before[n] != after[n])
    return f"{name} {str(before[name])[:300]!r} by OLD, {str(after[name])[:300]!r} by NEW"


def answers(run_dir: Path) -> dict[str, Answer]:
    return {str(r["scenario"]): answer(r) for r in results(run_dir)}


def datasets(old: Path, work: Path, rows: int | None, seed: int) -> dict[str, list[str]]:
    """Name -> `npuconf run` options. The libraries are built once, from OLD, and run by both."""
    found: dict[str, list[str]] = {f"vnpu-{p}": ["--policy", p] for p in POLICIES}
    found["twin"] = ["--personality", "aosp-2026"]
    listing = subprocess.run(
        [sys.executable, "-c", "import json; from tests.adversarial.adversary import INCOMPLETE, LEGAL, MUTANTS, "
         "WARNED, real_library; print(json.dumps([str(real_library())] + sorted({json.dumps([r.mutation, "
         "list(r.args)]) for r in (*MUTANTS, *LEGAL, *WARNED, *INCOMPLETE)})))"],
        cwd=old, env=_env(old, work), capture_output=True, text=True, check=True)  # fmt: skip
    real, *table = json.loads(listing.stdout)
    found["impl"] = ["--target", "local", "--impl", real, "-j", "16"]
    chosen = sorted(table) if rows is None else sorted(random.Random(seed).sample(sorted(table), min(rows, len(table))))
    for entry in chosen:
        mutation, args = json.loads(entry)
        name = mutation + "".join(args).replace("-", "_")
        build = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; from tests.adversarial.adversary import "
             "build; print(build(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))", mutation,
             str(work / "rows" / name), real],
            cwd=old, env=_env(old, work), capture_output=True, text=True, check=True)  # fmt: skip
        found[f"row-{name}"] = ["--target", "local", "--impl", build.stdout.strip(), "-j", "16", *args]
    return found


def once(checkout: Path, work: Path, options: Sequence[str], scenario: str) -> set[Answer]:
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        return set(answers(run(checkout, work, Path(scratch) / "run", [*options, "--scenario", scenario])).values())


def answers_again(old: Path, new: Path, work: Path, options: Sequence[str], scenario: str,
                  first: tuple[Answer, Answer]) -> tuple[set[Answer], set[Answer]]:
    """Every answer each checkout gives the scenario, alternating, until they share one or RERUNS each."""
    seen_old, seen_new = {first[0]}, {first[1]}
    for _ in range(RERUNS):
        if not seen_old.isdisjoint(seen_new):
            break
        seen_old |= once(old, work, options, scenario)
        seen_new |= once(new, work, options, scenario)
    return seen_old, seen_new


def compare_runs(old: Path, new: Path, work: Path, name: str, options: Sequence[str]) -> tuple[int, list[str]]:
    before = answers(run(old, work, work / "old" / name, options))
    after = answers(run(new, work, work / "new" / name, options))
    changes: list[str] = []
    for scenario in sorted(set(before) | set(after)):
        a, b = before.get(scenario), after.get(scenario)
        if a == b:
            continue
        if a is None or b is None:  # a scenario one corpus has: not a change of verdict
            print(f"  {'added' if a is None else 'removed'} {name} {scenario}: {b or a}", flush=True)
            continue
        seen_old, seen_new = answers_again(old, new, work, options, scenario, (a, b))
        if not seen_old.isdisjoint(seen_new):
            print(f"  race  {name} {scenario}: {sorted(seen_old)} / {sorted(seen_new)}", flush=True)
            continue
        changes.append(f"{name} {scenario}: OLD {sorted(seen_old)}, NEW {sorted(seen_new)}")
    return len(before), changes


def compare_judgement(old: Path, new: Path, work: Path, name: str) -> list[str]:
    """OLD's run judged again by both checkouts: identical decisions."""
    judgements = []
    for side, checkout in (("old", old), ("new", new)):
        out = work / f"rejudge-{side}" / name
        done = kit(checkout, work, "rejudge", str(work / "old" / name), "--out", str(out))
        if done.returncode not in (0, 1, 2):
            raise SystemExit(f"{checkout}: npuconf rejudge {name} failed: {done.stderr.strip()[-400:]}")
        judgements.append({(r["scenario"], r.get("device")): judged(r) for r in results(out)})
    before, after = judgements
    return [f"{name} {key[0]}: {difference(before.get(key), after.get(key))}"
            for key in sorted(set(before) | set(after), key=str) if before.get(key) != after.get(key)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare_checkouts.py", description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--work", type=Path, help="where the runs go (default: a new temporary directory)")
    parser.add_argument("--rows", type=int, help="a sample of this many adversarial rows (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("-k", dest="keyword", help="only the scenarios matching this (npuconf run -k)")
    args = parser.parse_args(argv)
    old, new = args.old.resolve(), args.new.resolve()
    for checkout in (old, new):
        if not (checkout / "host" / "__main__.py").is_file():
            parser.error(f"{checkout} is not a checkout of the kit (no host/__main__.py)")
    work = (args.work or Path(tempfile.mkdtemp(prefix="compare-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for checkout in (old, new):  # each checkout's own probe and vnpu, as `npuconf run` uses them
        done = kit(checkout, work, "probe", "build")
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: npuconf probe build failed: {done.stderr.strip()[-400:]}")
    changes: list[str] = []
    results_compared = 0
    for name, options in datasets(old, work, args.rows, args.seed).items():
        if args.keyword:
            options = [*options, "-k", args.keyword]
        count, found = compare_runs(old, new, work, name, options)
        found += compare_judgement(old, new, work, name)
        print(f"{name}: {count} scenarios, {len(found)} changed", flush=True)
        for line in found:
            print("  " + line, flush=True)
        results_compared += count
        changes += found
    print(f"{results_compared} results compared in {work}: {len(changes)} changed")
    return 1 if changes else 0


if __name__ == "__main__":
    raise SystemExit(main())
