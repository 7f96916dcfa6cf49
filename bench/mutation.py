"""Mutation score of the corpus: mechanical mutants of the virtual NPU, each run through the whole corpus.

    python bench/mutation.py                          # every mutant of ndk_probe/src/vnpu/*.c
    python bench/mutation.py --sample 20 --seed 1     # a random sample
    python bench/mutation.py --jobs 2 --json out.json # two mutants at a time; every outcome as JSON
    python bench/mutation.py --file vnpu_api_load.c --list
    python bench/mutation.py --model                  # the reference model's rules instead (mutation_model.py)

Each mutant (bench/mutation_c.py says which changes) is applied to a copy of one source file, never to the
checkout; the copy is compiled with the flags tests/vnpu_builds.py uses and linked with the other files'
objects into a libvnpu.so beside the host probe. The corpus then runs on it as the virtual NPU:

    npuconf run --target local --build-dir <mutant's build> --out <dir> -q [--policy P]

so the model knows the device as the vnpu (its capacity and policy declared) and predicts every ENOMEM. A
mutant of a policy's own file runs under that policy; one of the files the policies share (vnpu_policy.c,
vnpu_buffer_new.c, vnpu_victim.c) or of the profile parser (vnpu_profile.c: the profile of a default run holds
the vnpu's own defaults) under each policy in turn until one run tells it apart. Outcomes:

- `killed`: a FAIL or CRASH, named with its clause (the run exits 1; by default it is stopped at the first);
- `incomplete`: the run exits 2 naming a required clause not demonstrated that the unmutated build demonstrates;
- `legal`: incomplete, and bench/mutation_equivalent.yaml says why the mutant is an implementation the text
  allows (it refuses what the text lets it refuse, never preempts, supports other pairs, or only its test hook
  stopped working): incomplete is then the right answer and a FAIL would be a false one;
- `warned`: the run exits 0 with a WARN naming a reading the unmutated build's run does not: a behaviour the
  text allows, told apart and named by the kit, never failed;
- `unjudged`: the run exits 2 only through TIMEOUT, ERROR or NOT_EXECUTED, every clause still demonstrated;
- `timeout`: the run did not end within `--timeout` seconds (it is killed with its probes);
- `crashed`: the run ended otherwise: no summary.json, or an exit code other than 0, 1 and 2;
- `equivalent`: the run says what it says of the unmutated build, and bench/mutation_equivalent.yaml says
  why no trace can tell the two apart;
- `survived`: the run says what it says of the unmutated build, and nothing explains it;
- `uncompiled`: gcc refused the mutant (counted, not run).

The score is killed / (compiled - equivalent - warned - legal): a mutant the text allows cannot be killed by a kit
that fails only what the words forbid. `incomplete` counts as a detection only where it names a clause the mutant
kept from being demonstrated, so it is reported beside the score, not in it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from equivalents_file import entries_of
from mutation_c import Mutant, mutants_of

from host.probe import DEFAULT_BUILD_DIR, PROBE_NAME, PROBE_SOURCE, VNPU_NAME, current_build
from host.probe.build import BUILT_STAMP
from reference_model.caps import DEVICE_POLICIES
from tests.vnpu_builds import vnpu_compile_flags

SOURCE_DIR: Final = PROBE_SOURCE / "src" / "vnpu"
EQUIVALENTS: Final = Path(__file__).with_name("mutation_equivalent.yaml")
DEFAULT_TIMEOUT_S: Final = 300.0
POLICIES: Final = DEVICE_POLICIES
# The policy each file is run under; files not listed run under budget only.
FILE_POLICIES: Final = {
    "vnpu_policy_acl.c": ("acl",),
    "vnpu_policy_caching.c": ("caching",),
    "vnpu_policy_arena.c": ("arena",),
    "vnpu_policy.c": POLICIES,
    "vnpu_buffer_new.c": POLICIES,
    "vnpu_victim.c": POLICIES,
    # The profile the kit writes for a default run holds the vnpu's own defaults: a parser that falls back to
    # them is seen only under another policy.
    "vnpu_profile.c": POLICIES,
}
BAD_VERDICTS: Final = ("FAIL", "CRASH")
UNJUDGED_VERDICTS: Final = ("TIMEOUT", "ERROR", "NOT_EXECUTED")
DETECTED: Final = ("killed",)


@dataclass(frozen=True, slots=True)
class RunView:
    """What one `npuconf run` said: its exit code, the FAIL/CRASH clauses, the unjudged verdicts and the
    required clauses not demonstrated."""

    exit_code: int | None
    failing: tuple[tuple[str, str, int], ...] = ()  # (verdict, clause or '-', scenarios), commonest first
    unjudged: tuple[tuple[str, int], ...] = ()  # (verdict, scenarios)
    not_demonstrated: frozenset[str] = frozenset()
    warnings: tuple[tuple[str, int], ...] = ()  # (reading, scenarios) of the WARN verdicts
    first_failure: str = ""  # scenario: message, of one FAIL/CRASH
    detail: str = ""
    stopped: bool = False  # ended at its first FAIL or CRASH (the others are not counted)


@dataclass(slots=True)
class Outcome:
    mutant: Mutant
    status: str
    policy: str = "budget"
    view: RunView | None = None
    new_gaps: tuple[str, ...] = ()  # clauses not demonstrated (incomplete), or readings (warned), beyond the baseline's
    reason: str = ""  # an equivalent mutant's reason
    seconds: float = 0.0
    runs: list[str] = field(default_factory=list)  # the policies it ran under

    def describe(self) -> str:
        view = self.view
        if self.status == "killed" and view is not None:
            return ", ".join(f"{v} {c} x{n}" for v, c, n in view.failing[:4])
        if self.status == "incomplete":
            return "not demonstrated: " + ", ".join(self.new_gaps)
        if self.status == "legal":
            return "legal: " + self.reason
        if self.status == "warned" and view is not None:
            return "WARN " + ", ".join(f"{r} x{n}" for r, n in view.warnings if r in self.new_gaps)
        if self.status == "unjudged" and view is not None:
            return ", ".join(f"{v} x{n}" for v, n in view.unjudged) + (f" ({self.reason})" if self.reason else "")
        if self.status == "equivalent":
            return self.reason
        if view is not None and view.detail:
            return view.detail
        return ""

    def as_json(self) -> dict[str, Any]:
        m = self.mutant
        return {
            "key": m.key, "file": m.file, "line": m.line, "column": m.column, "function": m.function,
            "operator": m.operator, "change": m.change, "source_line": m.source_line, "status": self.status,
            "policy": self.policy, "runs": self.runs, "detail": self.describe(), "seconds": round(self.seconds, 2),
            "failing": [list(f) for f in (self.view.failing if self.view else ())],
            "new_gaps": list(self.new_gaps), "exit_code": self.view.exit_code if self.view else None,
            "explained": self.reason or None,
        }  # fmt: skip


# ---------------------------------------------------------------- equivalents


@dataclass(frozen=True, slots=True)
class Equivalent:
    """One entry of bench/mutation_equivalent.yaml: the mutants it covers and why no trace tells them apart."""

    file: str
    kind: str  # one of KINDS
    reason: str
    function: str | None = None
    line: str | None = None  # a piece of the source line (stripped); ending with `$`: the end of the line
    change: str | None = None  # "<original> -> <replacement>"
    operator: str | None = None
    previous: str | None = None  # a piece of the line before the changed one

    def covers(self, m: Mutant) -> bool:
        return (
            m.file == self.file
            and (self.function is None or m.function == self.function)
            and (self.line is None or _piece_of(self.line, m.source_line))
            and (self.previous is None or _piece_of(self.previous, m.previous_line))
            and (self.change is None or m.change == self.change)
            and (self.operator is None or m.operator == self.operator)
        )


# Why no trace tells an explained mutant apart from the vnpu (bench/mutation_equivalent.yaml says more).
KINDS: Final = {
    "aosp-only": "only the aosp-2026 personality takes that path; the corpus runs the published one",
    "unreachable": "no program the text allows reaches it on the kit's vnpu (a failed allocation, a _Nonnull "
    "argument, a malformed profile or control command the kit never writes)",
    "same-behaviour": "the mutant behaves as the original in every execution (dead store, redundant test)",
    "text-free": "the mutant changes only what the text leaves free (an errno, the answer to an "
    "out-of-bounds segment), or what only a reading may speak of",
    "timing": "the mutant changes only a timing or a race window no scenario can force",
    "invisible": "the mutant changes only what no trace of the probe can show: the vnpu's private resources or "
    "state (a leaked private descriptor or allocation, a debugging name), or data the probe's patterns repeat",
    "hook": "the mutant changes only vnpu_control, the vnpu's own test hook: the API answers as before",
    # Not an equivalent: an `unjudged` mutant's run ends incomplete with ERROR or TIMEOUT verdicts; the entry
    # says why no scenario can turn that into a FAIL. It stays `unjudged` in the totals.
    "unjudged": "the kit answers incomplete (ERROR or TIMEOUT) and cannot do otherwise",
    # Not an equivalent either: the mutant's run ends incomplete and the mutant is a legal implementation, so
    # incomplete is the answer the kit owes it. Counted as `legal`, outside the score.
    "legal": "the mutant behaves as an implementation the text allows; the kit answers incomplete, naming the "
    "clauses it kept from being demonstrated, and cannot fail it by the words",
    # Nor this: what the mutant does depends on memory no call sets (an uninitialized read), so one run may end
    # ERROR and the next pass. Counted as `unjudged`, inside the score's denominator.
    "undefined": "the mutant reads memory nothing initialized: its behaviour depends on the heap, not on the calls",
}

# Which kinds of entry explain a mutant that ended with each status (any other status: the equivalents, and
# `undefined`, whose run may also end as the unmutated build's does).
EXPLAINING_KIND: Final = {"unjudged": ("unjudged", "undefined"), "incomplete": ("legal",)}
NOT_EQUIVALENT: Final = ("unjudged", "legal")
# What an explained mutant counts as: an equivalent, a legal implementation, or still unjudged (with its reason).
EXPLAINED_STATUS: Final = {"survived": "equivalent", "incomplete": "legal", "unjudged": "unjudged"}


def _piece_of(piece: str, line: str) -> bool:
    """Whether `piece` is in `line`; a piece ending with `$` must end the line."""
    return line.endswith(piece[:-1]) if piece.endswith("$") else piece in line


def load_equivalents(path: Path = EQUIVALENTS) -> list[Equivalent]:
    entries = []
    fields = {f.name for f in dataclasses.fields(Equivalent)}
    for i, raw in enumerate(entries_of(path, "vnpu")):
        unknown = set(raw) - fields
        if unknown or "file" not in raw or not raw.get("reason") or raw.get("kind") not in KINDS:
            raise SystemExit(f"{path}: vnpu entry {i + 1}: needs file, kind ({', '.join(KINDS)}) and reason; "
                             f"knows {', '.join(sorted(fields))}")
        entries.append(Equivalent(**{k: str(v) for k, v in raw.items()}))
    return entries


def explained(m: Mutant, entries: Sequence[Equivalent], status: str = "survived") -> Equivalent | None:
    """The entry explaining a mutant that ended `status` (survived: an equivalent; unjudged: why it is;
    incomplete: why the mutant is legal)."""
    wanted = EXPLAINING_KIND.get(status)
    if wanted is None:
        return next((e for e in entries if e.kind not in NOT_EQUIVALENT and e.covers(m)), None)
    return next((e for e in entries if e.kind in wanted and e.covers(m)), None)


def explained_status(status: str, entry: Equivalent) -> str:
    """What a mutant that ended `status` counts as once `entry` explains it."""
    return "unjudged" if entry.kind == "undefined" else EXPLAINED_STATUS.get(status, status)


# ---------------------------------------------------------------- building


class Builder:
    """Objects of the unmutated sources, compiled once; a mutant recompiles its one file and links."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.objects = work / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.sources = sorted(SOURCE_DIR.glob("*.c"))
        self.probe = _host_probe()
        for source in self.sources:
            _gcc(["-c", str(source), "-o", str(self.objects / f"{source.stem}.o")])

    def build_dir(self, directory: Path, mutated: tuple[str, str] | None = None) -> Path | None:
        """A build directory (probe + libvnpu.so) with `mutated` = (file name, text) in place of that file;
        None when gcc refuses it."""
        directory.mkdir(parents=True, exist_ok=True)
        objects = {s.name: self.objects / f"{s.stem}.o" for s in self.sources}
        if mutated is not None:
            name, text = mutated
            source = directory / name
            source.write_text(text, encoding="utf-8")
            obj = directory / f"{Path(name).stem}.o"
            if _gcc(["-c", str(source), "-o", str(obj)], check=False) != 0:
                return None
            objects[name] = obj
        _gcc(["-shared", "-o", str(directory / VNPU_NAME), *map(str, objects.values())])
        probe = directory / PROBE_NAME
        if not probe.exists():
            probe.symlink_to(self.probe)
        # Built now: a probe source newer than the host probe must not make `npuconf run` build the
        # directory again (over the mutant's library).
        (directory / BUILT_STAMP).write_bytes(b"")
        return directory


def _gcc(args: Sequence[str], check: bool = True) -> int:
    done = subprocess.run(["gcc", *vnpu_compile_flags(), *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"gcc {' '.join(args)} failed:\n{done.stderr}")
    return done.returncode


def _host_probe() -> Path:
    """The host probe, built again first when a probe source is newer (as `npuconf run` would)."""
    return current_build(ROOT / DEFAULT_BUILD_DIR).probe.resolve()


# ---------------------------------------------------------------- running


def run_corpus(build: Path, out: Path, policy: str, timeout_s: float, first_failure: bool = False) -> RunView:
    """The whole corpus on one build; its process group is killed after `timeout_s`, or (`first_failure`) as
    soon as results.jsonl holds a FAIL or CRASH: the mutant is then killed by that scenario's clause."""
    command = [sys.executable, "-m", "host", "run", "--target", "local", "--build-dir", str(build),
               "--out", str(out), "--store", str(out.parent / "store.sqlite"), "-q"]  # fmt: skip
    if policy != "budget":
        command += ["--policy", policy]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NPUCONF_CACHE_DIR=str(out.parent / "cache"))
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + timeout_s
    watcher = _FailureWatch(out / "results.jsonl") if first_failure else None
    while True:
        try:
            _, stderr = process.communicate(timeout=POLL_S if watcher is not None else timeout_s)
            return read_run(out, process.returncode, stderr)
        except subprocess.TimeoutExpired:
            found = watcher.poll() if watcher is not None else None
            if found is None and time.monotonic() < deadline:
                continue
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            if found is not None:
                return found
            return RunView(None, detail=f"no answer within {timeout_s:.0f} s")


POLL_S: Final = 0.2


class _FailureWatch:
    """Reads the result records a running `npuconf run` appends, until one is a FAIL or CRASH."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def poll(self) -> RunView | None:
        if not self.path.is_file():
            return None
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a partial last line is read again next time
        self.offset += end
        for line in data[:end].splitlines():
            record = json.loads(line)
            if record.get("kind") == "result" and record.get("verdict") in BAD_VERDICTS:
                divergence = record.get("divergence") or {}
                message = divergence.get("message") or record.get("reason") or ""
                return RunView(
                    1, failing=((record["verdict"], divergence.get("clause") or "-", 1),),
                    first_failure=f"{record['scenario']}: {message[:300]}", stopped=True,
                )  # fmt: skip
        return None


def read_run(out: Path, exit_code: int, stderr: str = "") -> RunView:
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        last = (stderr.strip().splitlines() or ["no summary.json"])[-1]
        return RunView(exit_code, detail=f"exit {exit_code}: {last[:200]}")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    gaps = frozenset(c for gap in summary["claim"]["not_demonstrated"] for c in gap["clauses"])
    failing: Counter[tuple[str, str]] = Counter()
    unjudged: Counter[str] = Counter()
    warned: Counter[str] = Counter()
    first = ""
    results = out / "results.jsonl"
    if results.is_file():
        with results.open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if record.get("kind") != "result":
                    continue
                verdict = record["verdict"]
                if verdict in BAD_VERDICTS:
                    divergence = record.get("divergence") or {}
                    failing[(verdict, divergence.get("clause") or "-")] += 1
                    if not first:
                        message = divergence.get("message") or record.get("reason") or ""
                        first = f"{record['scenario']}: {message[:300]}"
                elif verdict in UNJUDGED_VERDICTS:
                    unjudged[verdict] += 1
                elif verdict == "WARN":
                    warned[_reading(record.get("reason") or "")] += 1
    ordered = sorted(failing.items(), key=lambda kv: (-kv[1], kv[0]))
    return RunView(
        exit_code, failing=tuple((v, c, n) for (v, c), n in ordered),
        unjudged=tuple(sorted(unjudged.items())), not_demonstrated=gaps, first_failure=first,
        warnings=tuple(sorted(warned.items())),
        detail="" if exit_code in (0, 1, 2) else f"exit {exit_code}",
    )  # fmt: skip


def _reading(reason: str) -> str:
    """The reading a WARN's reason names ("R<n> (sentence) ..."), or the reason's start."""
    match = re.search(r"\bR\d+\b", reason)
    return match.group() if match else reason[:60]


def judge(view: RunView, baseline: RunView) -> tuple[str, tuple[str, ...]]:
    """(status, new clauses not demonstrated) of a mutant's run against the unmutated build's."""
    if view.exit_code is None:
        return "timeout", ()
    if view.exit_code not in (0, 1, 2) or view.detail:
        return "crashed", ()
    if view.exit_code == 1:
        return "killed", ()
    new_gaps = tuple(sorted(view.not_demonstrated - baseline.not_demonstrated))
    if new_gaps:
        return "incomplete", new_gaps
    if view.unjudged and not baseline.unjudged:
        return "unjudged", ()
    new_readings = tuple(sorted({r for r, _ in view.warnings} - {r for r, _ in baseline.warnings}))
    if new_readings:
        return "warned", new_readings
    return "survived", ()


@dataclass
class Campaign:
    builder: Builder
    work: Path
    timeout_s: float
    equivalents: list[Equivalent]
    keep_failures: Path | None = None
    first_failure: bool = True
    keep: bool = False  # leave each mutant's sources, build and runs in the work directory
    baselines: dict[str, RunView] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def baseline(self, policy: str) -> RunView:
        with self._lock:
            if policy not in self.baselines:
                build = self.builder.build_dir(self.work / "unmutated")
                assert build is not None
                view = run_corpus(build, self.work / "unmutated" / f"run-{policy}", policy, self.timeout_s)
                if view.exit_code not in (0, 2) or view.failing:
                    raise SystemExit(f"the unmutated vnpu does not pass under policy {policy}: {view}")
                self.baselines[policy] = view
            return self.baselines[policy]

    def run(self, index: int, m: Mutant) -> Outcome:
        started = time.monotonic()
        directory = self.work / f"m{index:05d}"
        text = (SOURCE_DIR / m.file).read_text(encoding="utf-8")
        try:
            build = self.builder.build_dir(directory, (m.file, m.apply(text)))
            if build is None:
                return Outcome(m, "uncompiled", seconds=time.monotonic() - started)
            outcome = Outcome(m, "survived")
            for policy in FILE_POLICIES.get(m.file, ("budget",)):
                baseline = self.baseline(policy)
                out = directory / f"run-{policy}"
                view = run_corpus(build, out, policy, self.timeout_s, self.first_failure)
                status, gaps = judge(view, baseline)
                outcome = Outcome(m, status, policy, view, gaps, runs=[*outcome.runs, policy])
                if status == "killed" and self.keep_failures is not None:
                    self._keep(index, out)
                if status != "survived":
                    break
            if outcome.status in ("survived", "unjudged", "incomplete"):
                entry = explained(m, self.equivalents, outcome.status)
                if entry is not None:
                    outcome.reason = entry.reason
                    outcome.status = explained_status(outcome.status, entry)
            outcome.seconds = time.monotonic() - started
            return outcome
        finally:
            if not self.keep:
                shutil.rmtree(directory, ignore_errors=True)

    def _keep(self, index: int, out: Path) -> None:
        """The plan, the device records and the FAIL/CRASH records of a killed mutant's run, for the model's
        mutants to be judged on (bench/mutation_model.py)."""
        assert self.keep_failures is not None
        kept = self.keep_failures / f"m{index:05d}"
        kept.mkdir(parents=True, exist_ok=True)
        with (out / "results.jsonl").open(encoding="utf-8") as src, (kept / "results.jsonl").open("w") as dst:
            for line in src:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # the line being written when the run was stopped
                if record.get("kind") != "result" or record.get("verdict") in BAD_VERDICTS:
                    dst.write(line)


# ---------------------------------------------------------------- reporting

STATUSES: Final = ("killed", "incomplete", "legal", "warned", "unjudged", "timeout", "crashed", "equivalent",
                   "survived", "uncompiled")


def totals(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    counts = Counter(o.status for o in outcomes)
    compiled = len(outcomes) - counts["uncompiled"]
    scored = compiled - counts["equivalent"] - counts["warned"] - counts["legal"]
    return {
        "mutants": len(outcomes), "compiled": compiled, **{s: counts[s] for s in STATUSES},
        "score": round(counts["killed"] / scored, 4) if scored else None,
        "detected": round((counts["killed"] + counts["incomplete"]) / scored, 4) if scored else None,
    }  # fmt: skip


def row(o: Outcome) -> str:
    m = o.mutant
    policy = f" ({o.policy})" if o.policy != "budget" else ""
    return (f"| `{m.file}:{m.line}` | {m.function} | {m.operator} | `{m.change}` | {o.status}{policy} | "
            f"{o.describe().replace('|', '/')} | {o.seconds:.1f} s |")  # fmt: skip


def print_totals(t: dict[str, Any], minutes: float, out: Any = sys.stdout) -> None:
    score = f"{t['score']:.1%}" if t["score"] is not None else "-"
    detected = f"{t['detected']:.1%}" if t["detected"] is not None else "-"
    print(
        f"mutants {t['mutants']}, compiled {t['compiled']}, killed {t['killed']}, incomplete {t['incomplete']}, "
        f"legal {t['legal']}, warned {t['warned']}, unjudged {t['unjudged']}, timed out {t['timeout']}, "
        f"crashed {t['crashed']}, equivalent {t['equivalent']}, "
        f"survived {t['survived']}, uncompiled {t['uncompiled']}; score {score} of the non-equivalent "
        f"(with incomplete: {detected}); {minutes:.1f} min",
        file=out, flush=True,
    )


# ---------------------------------------------------------------- selection


def all_mutants(files: Iterable[str] = ()) -> list[Mutant]:
    wanted = set(files)
    found: list[Mutant] = []
    for source in sorted(SOURCE_DIR.glob("*.c")):
        if wanted and source.name not in wanted:
            continue
        found += mutants_of(source.name, source.read_text(encoding="utf-8"))
    return found


def select(mutants: list[Mutant], sample: int | None, seed: int, keys: Sequence[str]) -> list[Mutant]:
    if keys:
        wanted = set(keys)
        chosen = [m for m in mutants if m.key in wanted]
        missing = wanted - {m.key for m in chosen}
        if missing:
            raise SystemExit(f"no such mutant: {sorted(missing)[0]} (list them with --list)")
        return chosen
    if sample is not None and sample < len(mutants):
        picked = random.Random(seed).sample(range(len(mutants)), sample)
        return [mutants[i] for i in sorted(picked)]
    return mutants


def keys_from(path: Path, statuses: Sequence[str]) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [r["key"] for r in data["mutants"] if r["status"] in statuses]


def tally(path: Path, equivalents: Sequence[Equivalent]) -> int:
    """The totals of a stored campaign (--json) with the equivalents file as it is now: survivors it explains
    become equivalent, and the rest are listed; so are entries that explain nothing and killed mutants an
    entry claims."""
    data = json.loads(path.read_text(encoding="utf-8"))
    by_key = {m.key: m for m in all_mutants()}
    outcomes: list[Outcome] = []
    stale = 0
    for row_ in data["mutants"]:
        m = by_key.get(row_["key"])
        if m is None or m.change != row_["change"]:
            stale += 1  # the sources changed since: this mutant is not the same any more
            continue
        status = row_["status"]
        # recounted from what the run said, before any entry explained it
        status = {counted: ended for ended, counted in EXPLAINED_STATUS.items()}.get(status, status)
        entry = explained(m, equivalents, status)
        reason = entry.reason if entry is not None and status in EXPLAINED_STATUS else ""
        if entry is not None:
            status = explained_status(status, entry)
        if status == "killed" and explained(m, equivalents) is not None:
            print(f"listed as equivalent but killed: {m.key} {m.change!r} ({row_['detail']})")
        outcome = Outcome(m, status, row_["policy"], reason=reason, seconds=row_["seconds"], runs=row_["runs"])
        outcomes.append(outcome)
    used = {id(e) for o in outcomes for e in equivalents
            if o.status in ("equivalent", "unjudged", "legal") and e.covers(o.mutant)}  # fmt: skip
    for e in equivalents:
        if id(e) not in used:
            print(f"explains no survivor: {e.file} {e.function or ''} {e.line or ''} {e.change or ''}".rstrip())
    for o in outcomes:
        if o.status in ("survived", "incomplete") or (o.status == "unjudged" and not o.reason):
            print(f"{o.status}: {o.mutant.key}  {o.mutant.function}  {o.mutant.change!r}  | {o.mutant.source_line}")
    if stale:
        print(f"{stale} stored mutants no longer match the sources")
    print_totals(totals(outcomes), data.get("minutes", 0.0))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sample", type=int, help="a random sample of N mutants (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at a time (default 1)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per corpus run")
    parser.add_argument("--file", action="append", default=[], help="only mutants of this source file")
    parser.add_argument("--operator", action="append", default=[], help="only mutants of this operator")
    parser.add_argument("--mutant", action="append", default=[], help="only the mutant with this key")
    parser.add_argument("--rerun", type=Path, help="the mutants a previous --json left undetected")
    parser.add_argument("--json", type=Path, help="write every outcome and the totals here")
    parser.add_argument("--keep-failures", type=Path, help="keep the FAIL records of killed mutants here")
    parser.add_argument("--full-runs", action="store_true",
                        help="run the whole corpus on killed mutants too (default: stop at the first FAIL or CRASH)")
    parser.add_argument("--list", action="store_true", help="list the mutants and what explains them; run none")
    parser.add_argument("--work", type=Path, help="keep each mutant's source, build and runs in this directory")
    parser.add_argument("--model", action="store_true", help="mutate the reference model instead")
    parser.add_argument("--tally", type=Path, help="recount a stored --json with the equivalents file as it is")
    args, rest = parser.parse_known_args(argv)
    if args.model:
        from mutation_model import main as model_main

        # --list is declared here for the C mutants too; the model's own parser must see it
        model_args = [*rest, "--list"] if args.list else rest
        return model_main(model_args, sample=args.sample, seed=args.seed, jobs=args.jobs, json_out=args.json)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    equivalents = load_equivalents()
    if args.tally is not None:
        return tally(args.tally, equivalents)
    mutants = [m for m in all_mutants(args.file) if not args.operator or m.operator in args.operator]
    keys = list(args.mutant)
    if args.rerun is not None:
        keys += keys_from(args.rerun, ("survived", "incomplete", "unjudged", "timeout", "crashed"))
    chosen = select(mutants, args.sample, args.seed, keys)
    if args.list:
        for m in chosen:
            entry = explained(m, equivalents)
            note = f"  [{entry.kind}: {entry.reason[:80]}]" if entry else ""
            print(f"{m.key}  {m.function}  {m.change!r}  | {m.source_line}{note}")
        print(f"{len(chosen)} mutants")
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="npuconf-mutation-") as tmp:
        work = args.work.resolve() if args.work is not None else Path(tmp)
        campaign = Campaign(Builder(work), work, args.timeout, equivalents, args.keep_failures,
                            first_failure=not args.full_runs, keep=args.work is not None)
        print(f"{len(chosen)} of {len(mutants)} mutants, {max(1, args.jobs)} at a time", flush=True)
        print("| mutant | function | operator | change | outcome | by | time |")
        print("|---|---|---|---|---|---|---|", flush=True)
        outcomes: list[Outcome] = []
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for outcome in pool.map(lambda im: campaign.run(*im), enumerate(chosen)):
                outcomes.append(outcome)
                print(row(outcome), flush=True)
    minutes = (time.monotonic() - started) / 60
    summary = totals(outcomes)
    print()
    print_totals(summary, minutes)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"totals": summary, "minutes": round(minutes, 2), "sample": args.sample, "seed": args.seed,
                 "mutants": [o.as_json() for o in outcomes]}, indent=1,
            ) + "\n",
            encoding="utf-8",
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
