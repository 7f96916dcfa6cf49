"""Mutation of the reference model: does some trace tell each rule apart from a slightly wrong one?

    python bench/mutation.py --model [--sample N --seed S] [--jobs 2] [--json out.json]
    python bench/mutation.py --model --failures DIR     # also the traces bench/mutation.py --keep-failures kept

Each mutant changes one thing inside one function of a chapter module of reference_model/ (the modules of
`reference_model.rules.CHAPTER_MODULES`): a comparison (`<` ↔ `<=`, `==` ↔ `!=`, `in` ↔ `not in`, `is` ↔
`is not`), `and` ↔ `or`, a `not` removed, an `if` condition negated, an integer constant ± 1, `True` ↔
`False`, `+` ↔ `-`, or a returned rejection (`return reject(...)`) turned into `return None`. The checkout's
files are never changed: the mutated module is compiled from its source in memory and only the changed
function's code is swapped into the live function object (so every table and import that holds the function
sees it), then put back.

The traces it is judged on come from runs made for the purpose:
- `conformant`: the whole corpus on the published vnpu (`npuconf run --target local`), under each of its
  allocation policies (budget, acl, caching, arena), judged under published-37.
- `twin`, `twin-aosp`: the corpus on the vnpu's aosp-2026 personality (84 FAIL under published-37), judged
  under published-37 and under the aosp-2026 profile.
- `kit-defects` (with `--defects`): the FAIL and CRASH records of the kit's own defective implementations
  (the vnpu's `-DVNPU_DEFECT_*` switches, the violations of tests/adversarial's interposer), up to
  FAILURES_PER_CLAUSE of each clause per kind of event blamed (failure_kind);
- `kit-legal` (with `--defects`): the results of the interposer's legal variations (LEGAL, WARNED,
  INCOMPLETE) whose trace behaved otherwise than the conformant vnpu's in that scenario: a rule that
  accepts a legal behaviour the vnpu never shows is told apart only there;
- `vnpu-mutants` (with `--failures`): the FAIL and CRASH records of killed vnpu mutants.

A record is judged again only when judging it calls the mutated function (found once, with a profiler, on
the unmutated model); the first change decides. A change is a verdict, its clause or the step and event it
blames, or what the record demonstrates (a clause gained or lost: the per-clause answers and atlas.json would
say it otherwise): `killed`. A record that only says otherwise (its message, observed or allowed values, or a
WARN's reason) makes it `reworded`: told apart, but by what an OEM reads, not by a decision. A
mutant no trace tells apart `survived`: the rule it sits in is not discriminated by any scenario, and
bench/mutation_equivalent.yaml (`model:`) says why, or a scenario is owed.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from equivalents_file import entries_of

from reference_model.caps import EXACT_POLICIES

EQUIVALENTS: Final = Path(__file__).with_name("mutation_equivalent.yaml")
MUTANT_TIMEOUT_S: Final = 60
OTHER_POLICIES: Final = EXACT_POLICIES  # the vnpu's allocation policies besides budget
# FAIL/CRASH records kept from each of the kit's defective builds per clause and per kind of event it was seen at
FAILURES_PER_CLAUSE: Final = 10
COMPARE_SWAP: Final[dict[type[ast.cmpop], type[ast.cmpop]]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
OP_TEXT: Final[dict[type[ast.AST], str]] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
    ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or", ast.Add: "+", ast.Sub: "-",
}  # fmt: skip
REJECTORS: Final = frozenset({"reject", "Reject"})


@dataclass(frozen=True, slots=True)
class ModelMutant:
    module: str  # chapter module name (reference_model.<module>)
    target: str  # qualname of the function whose code is swapped (a top-level function or a method)
    function: str  # the innermost function the change is in
    node: int  # index of the changed node in the module's walk order
    alternative: int
    line: int
    operator: str
    change: str
    source_line: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}:{self.node}:{self.operator}:{self.alternative}"


# ---------------------------------------------------------------- finding and applying mutants


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, depth first, in a fixed order (the order mutants are numbered in)."""
    yield tree
    for child in ast.iter_child_nodes(tree):
        yield from _walk(child)


def _function_bodies(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualname, def) of the module's functions and of its classes' methods: the code that can be swapped."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _alternatives(node: ast.AST, is_docstring: bool) -> list[tuple[str, str]]:
    """(operator, change) of each mutant of one node."""
    if isinstance(node, ast.Compare):
        return [("compare", f"{OP_TEXT[type(op)]} -> {OP_TEXT[COMPARE_SWAP[type(op)]]}") for op in node.ops]
    if isinstance(node, ast.BoolOp):
        return [("boolean", f"{OP_TEXT[type(node.op)]} -> {'or' if isinstance(node.op, ast.And) else 'and'}")]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [("boolean", "not removed")]
    if isinstance(node, (ast.If, ast.IfExp)):
        return [("negate", "condition negated")]
    if isinstance(node, ast.Constant) and not is_docstring:
        if isinstance(node.value, bool):
            return [("constant", f"{node.value} -> {not node.value}")]
        if isinstance(node.value, int):
            alts = [("constant", f"{node.value} -> {node.value + 1}")]
            if node.value > 0:
                alts.append(("constant", f"{node.value} -> {node.value - 1}"))
            return alts
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and not _sequence(node):
        return [("arithmetic", f"{OP_TEXT[type(node.op)]} -> {'-' if isinstance(node.op, ast.Add) else '+'}")]
    if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
        func = node.value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in REJECTORS:
            return [("reject", "return reject(...) -> return None")]
    return []


def _sequence(node: ast.BinOp) -> bool:
    """Whether one side is a string, list or tuple written out (its `+` joins, `-` would only raise)."""
    return any(
        isinstance(side, (ast.JoinedStr, ast.List, ast.Tuple))
        or (isinstance(side, ast.Constant) and isinstance(side.value, str))
        for side in (node.left, node.right)
    )


def _apply(node: ast.AST, alternative: int) -> ast.AST:
    """The replacement of `node` for its `alternative`-th mutant (the node itself, changed, or another)."""
    if isinstance(node, ast.Compare):
        node.ops[alternative] = COMPARE_SWAP[type(node.ops[alternative])]()
        return node
    if isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node
    if isinstance(node, ast.UnaryOp):
        return node.operand
    if isinstance(node, (ast.If, ast.IfExp)):
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
        return node
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            node.value = not value
        elif isinstance(value, int):
            node.value = value + 1 if alternative == 0 else value - 1
        return node
    if isinstance(node, ast.BinOp):
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        return node
    if isinstance(node, ast.Return):
        node.value = ast.Constant(value=None)
        return node
    raise AssertionError(f"no mutant of {type(node).__name__}")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in _walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _innermost(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, str]:
    """id(node) -> the name of the innermost def containing it, inside `fn`."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        names[id(node)] = name
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(fn, fn.name)
    return names


def mutants_of(module: str, source: str) -> list[ModelMutant]:
    tree = ast.parse(source)
    lines = source.splitlines()
    docstrings = _docstrings(tree)
    order = {id(n): i for i, n in enumerate(_walk(tree))}
    found: list[ModelMutant] = []
    for target, fn in _function_bodies(tree):
        inner = _innermost(fn)
        for stmt in fn.body:
            for node in _walk(stmt):
                for alternative, (operator, change) in enumerate(_alternatives(node, id(node) in docstrings)):
                    line = getattr(node, "lineno", fn.lineno)
                    found.append(ModelMutant(
                        module=module, target=target, function=inner.get(id(node), fn.name), node=order[id(node)],
                        alternative=alternative, line=line, operator=operator, change=change,
                        source_line=lines[line - 1].strip() if line - 1 < len(lines) else "",
                    ))  # fmt: skip
    return found


def all_mutants(modules: Sequence[str] = ()) -> list[ModelMutant]:
    from reference_model.rules import CHAPTER_MODULES

    found: list[ModelMutant] = []
    for module in CHAPTER_MODULES:
        if modules and module not in modules:
            continue
        source = (ROOT / "reference_model" / f"{module}.py").read_text(encoding="utf-8")
        found += mutants_of(module, source)
    return found


def mutated_code(m: ModelMutant) -> types.CodeType:
    """The code object of `m.target` compiled from its module's source with the mutant applied."""
    path = ROOT / "reference_model" / f"{m.module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    old = list(_walk(tree))[m.node]
    new = _apply(old, m.alternative)
    if new is not old:
        _replace(tree, old, new)
    ast.fix_missing_locations(tree)
    module_code = compile(tree, str(path), "exec")
    code = _find_code(module_code, m.target)
    if code is None:
        raise LookupError(f"{m.module}.{m.target}: no code object after compiling the mutant")
    return code


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in _walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
    raise LookupError("node not found")


def _find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname:
                return const
            found = _find_code(const, qualname)
            if found is not None:
                return found
    return None


def live_function(m: ModelMutant) -> types.FunctionType:
    module = importlib.import_module(f"reference_model.{m.module}")
    owner: Any = module
    parts = m.target.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    obj = inspect.getattr_static(owner, parts[-1])
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property) and obj.fget is not None:
        obj = obj.fget
    obj = inspect.unwrap(obj)
    if not isinstance(obj, types.FunctionType):
        raise LookupError(f"{m.module}.{m.target} is not a plain function")
    return obj


@contextlib.contextmanager
def swapped(m: ModelMutant) -> Iterator[None]:
    fn = live_function(m)
    original = fn.__code__
    fn.__code__ = mutated_code(m)
    try:
        yield
    finally:
        fn.__code__ = original


# ---------------------------------------------------------------- the traces


@dataclass
class Item:
    """One stored result record, ready to be judged again."""

    dataset: str
    scenario: str
    record: Any
    scenario_obj: Any
    facts: Any
    info: Any
    judging: Any
    baseline: Judged | None = None  # under the unmutated model
    calls: frozenset[str] = frozenset()  # "module.target" of the chapter functions judging it calls


@dataclass(frozen=True, slots=True)
class Judged:
    """What judging one record decided (verdict, clause, where, demonstrated) and what it says."""

    verdict: str
    clause: str
    where: tuple[object, object]  # the divergence's step and event
    shown: frozenset[str]
    says: str  # the reason, and the divergence's message, observed and allowed values


def judge_item(item: Item) -> Judged:
    from host.offline.recorded import decide_record

    decision = decide_record(item.record, item.scenario_obj, item.facts, item.info, item.judging)
    outcome = decision.outcome
    d = outcome.divergence
    says = repr((outcome.reason, d.message, d.observed, d.allowed) if d is not None else (outcome.reason,))
    return Judged(str(outcome.verdict), (d.clause if d is not None else "") or "",
                  (d.step, d.event) if d is not None else (None, None), frozenset(outcome.demonstrated), says)


def load_items(dataset: str, run_dir: Path, profile: str, corpus: Any, catalogue: Any) -> list[Item]:
    from host.offline.recorded import recorded_devices
    from host.probe import Pairs
    from host.run import DeviceFacts
    from host.run.decision import Judging
    from reference_model.caps import DeviceCaps
    from reports.recorded.records import ResultRecord, read_records
    from reports.recorded.results import load_results

    run = load_results(run_dir / "results.jsonl")
    stored = read_records(run_dir / "results.jsonl")
    by_line = stored.by_line()
    devices = recorded_devices(run)
    judging = Judging(catalogue, profile)
    unknown = DeviceFacts(DeviceCaps(), Pairs(None, None))
    items = []
    for record in run.results:
        if not record.recorded or record.line is None:
            continue
        stored_record = by_line.get(record.line)
        scenario = corpus.get(record.scenario)
        if not isinstance(stored_record, ResultRecord) or scenario is None:
            continue
        items.append(Item(dataset, record.scenario, record, scenario, devices.facts.get(record.device, unknown),
                          run.devices.get(record.device, {}), judging))  # fmt: skip
    return items


def chapter_targets() -> dict[types.CodeType, str]:
    """Code object -> "module.target" for every swappable chapter function (nested code maps to its target)."""
    from reference_model.rules import CHAPTER_MODULES

    found: dict[types.CodeType, str] = {}

    def add(code: types.CodeType, name: str) -> None:
        found[code] = name
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add(const, name)

    for module in CHAPTER_MODULES:
        tree = ast.parse((ROOT / "reference_model" / f"{module}.py").read_text(encoding="utf-8"))
        for target, _ in _function_bodies(tree):
            m = ModelMutant(module, target, target, 0, 0, 0, "", "", "")
            with contextlib.suppress(LookupError):
                add(live_function(m).__code__, f"{module}.{target}")
    return found


def baseline(items: Sequence[Item]) -> None:
    """Each item's verdict under the unmutated model, and the chapter functions judging it calls."""
    targets = chapter_targets()
    for item in items:
        called: set[str] = set()

        def profile(frame: types.FrameType, event: str, arg: object, called: set[str] = called) -> None:
            if event == "call":
                name = targets.get(frame.f_code)
                if name is not None:
                    called.add(name)

        sys.setprofile(profile)
        try:
            item.baseline = judge_item(item)
        finally:
            sys.setprofile(None)
        item.calls = frozenset(called)


def run_corpus(out: Path, *options: str) -> Path:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NPUCONF_CACHE_DIR=str(out.parent / "cache"))
    done = subprocess.run([sys.executable, "-m", "host", "run", "--target", "local", "--out", str(out), "-q",
                           "--store", str(out.parent / "store.sqlite"), *options],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode not in (0, 1, 2) or not (out / "results.jsonl").is_file():
        raise SystemExit(f"npuconf run {' '.join(options)} failed: {done.stderr.strip()[-500:]}")
    return out


# ---------------------------------------------------------------- judging a mutant


@dataclass
class ModelOutcome:
    mutant: ModelMutant
    status: str  # killed, reworded, survived, unreached (no trace calls its function), error (not applied)
    dataset: str = ""
    detail: str = ""
    clauses: tuple[str, ...] = ()  # the clauses the mutated function (its rule) cites
    reason: str = ""
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        m = self.mutant
        return {"key": m.key, "module": m.module, "function": m.target, "line": m.line, "operator": m.operator,
                "change": m.change, "source_line": m.source_line, "status": self.status, "dataset": self.dataset,
                "detail": self.detail, "clauses": list(self.clauses), "reason": self.reason,
                "seconds": round(self.seconds, 2)}  # fmt: skip


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: types.FrameType | None) -> None:
    raise _Timeout


def evaluate(m: ModelMutant, items: Sequence[Item]) -> ModelOutcome:
    """Judge the records whose judging calls the mutant's function; the first change kills it."""
    name = f"{m.module}.{m.target}"
    relevant = [i for i in items if name in i.calls]
    if not relevant:
        return ModelOutcome(m, "unreached", detail="no stored trace calls it")
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(MUTANT_TIMEOUT_S)
    try:
        reworded: ModelOutcome | None = None
        with swapped(m):
            for item in relevant:
                try:
                    now = judge_item(item)
                except _Timeout:
                    raise
                except Exception as exc:  # a mutant may make the model raise: the trace told it apart
                    return ModelOutcome(m, "killed", item.dataset, f"{item.scenario}: the model raised "
                                        f"{type(exc).__name__}: {str(exc)[:120]}")  # fmt: skip
                before = item.baseline
                assert before is not None
                if (now.verdict, now.clause) != (before.verdict, before.clause):
                    return ModelOutcome(m, "killed", item.dataset, f"{item.scenario}: {before.verdict} "
                                        f"{before.clause} -> {now.verdict} {now.clause}".replace("  ", " "))
                if now.where != before.where:
                    return ModelOutcome(m, "killed", item.dataset, f"{item.scenario}: blames step/event "
                                        f"{before.where} -> {now.where}")  # fmt: skip
                if now.shown != before.shown:
                    # what the record demonstrates is the kit's output too (atlas.json, the per-clause
                    # answers): a clause claimed where the trace did not show it, or one no longer claimed
                    gained, dropped = sorted(now.shown - before.shown), sorted(before.shown - now.shown)
                    change = " ".join([*(f"+{c}" for c in gained), *(f"-{c}" for c in dropped)])
                    return ModelOutcome(m, "killed", item.dataset, f"{item.scenario}: demonstrates {change}"[:200])
                if reworded is None and now.says != before.says:
                    reworded = ModelOutcome(m, "reworded", item.dataset, f"{item.scenario}: says "
                                            f"{now.says[:80]} instead of {before.says[:80]}")  # fmt: skip
        if reworded is not None:
            return reworded
    except _Timeout:
        return ModelOutcome(m, "killed", "", f"judging did not end within {MUTANT_TIMEOUT_S} s")
    except (LookupError, SyntaxError, ValueError, TypeError) as exc:
        return ModelOutcome(m, "error", detail=f"{type(exc).__name__}: {exc}")
    finally:
        signal.alarm(0)
    return ModelOutcome(m, "survived", detail=f"{len(relevant)} traces judged alike")


# ---------------------------------------------------------------- the campaign

_ITEMS: list[Item] = []


def _work(m: ModelMutant) -> ModelOutcome:
    started = time.monotonic()
    outcome = evaluate(m, _ITEMS)
    outcome.seconds = time.monotonic() - started
    return outcome


@dataclass(frozen=True, slots=True)
class ModelEquivalent:
    module: str
    reason: str
    function: str | None = None
    line: str | None = None
    change: str | None = None

    def covers(self, m: ModelMutant) -> bool:
        return (m.module == self.module and (self.function is None or m.target == self.function)
                and (self.line is None or self.line in m.source_line)
                and (self.change is None or m.change == self.change))  # fmt: skip


def load_equivalents(path: Path = EQUIVALENTS) -> list[ModelEquivalent]:
    fields = {f.name for f in dataclasses.fields(ModelEquivalent)}
    entries = []
    for i, raw in enumerate(entries_of(path, "model")):
        if set(raw) - fields or "module" not in raw or not raw.get("reason"):
            raise SystemExit(f"{path}: model entry {i + 1}: needs module and reason, knows {sorted(fields)}")
        entries.append(ModelEquivalent(**{k: str(v) for k, v in raw.items()}))
    return entries


def known_defects(work: Path, log: Callable[[str], None]) -> list[Path]:
    """Runs of the kit's own defective implementations, kept to their FAIL and CRASH records: each vnpu
    defect switch (tests/vnpu_builds.py) and each violation of the adversarial interposer
    (tests/adversarial/adversary.py MUTANTS), built from the checkout as their tests build them."""
    from tests.adversarial.adversary import MUTANTS, build, real_library
    from tests.vnpu_builds import build_defective_vnpu

    defects = ("VNPU_DEFECT_KEEP_REPLACED_COOKIE", "VNPU_DEFECT_PRIORITY_MAX_REFUSED",
               "VNPU_DEFECT_PARTIAL_UNMAP_REFUSED")  # fmt: skip
    real = real_library()
    runs: list[Path] = []
    libraries: list[tuple[str, Path, tuple[str, ...]]] = []
    for define in defects:
        (work / define).mkdir(parents=True, exist_ok=True)
        libraries.append((define, build_defective_vnpu(work / define, define), ()))
    for mutant in MUTANTS:
        libraries.append((mutant.mutation, build(mutant.mutation, work / mutant.mutation, real), mutant.args))
    log(f"running the corpus on {len(libraries)} defective implementations of the kit")
    for name, library, args in libraries:
        out = run_corpus(work / name / "run", "--impl", str(library), "-j", "16", *args)
        per_kind: Counter[tuple[str, str]] = Counter()

        def failure_kept(result: dict[str, Any], per_kind: Counter[tuple[str, str]] = per_kind) -> bool:
            if result.get("verdict") not in ("FAIL", "CRASH"):
                return False
            key = failure_kind(result)
            per_kind[key] += 1
            return per_kind[key] <= FAILURES_PER_CLAUSE  # more of one kind tells the rules little more

        runs.append(_results_kept(out, work / name / "failures", failure_kept))
    return runs


def failure_kind(result: dict[str, Any]) -> tuple[str, str]:
    """A FAIL or CRASH record's clause and the kind of trace event its divergence blames ("ret fd_check",
    "deleter", "settle deleters"). One defect fails one clause at many steps: the records kept per clause are
    spread over the kinds of step, so a failure a single scenario shows (a descriptor found open by a check
    after a quiet wait, among many found open at teardown) is never dropped for the others."""
    divergence = result.get("divergence") or {}
    clause = divergence.get("clause") or ""
    line, trace = divergence.get("event"), result.get("trace") or ()
    if not isinstance(line, int) or not 0 < line <= len(trace):
        return clause, ""
    try:
        event = json.loads(trace[line - 1])
    except ValueError:
        return clause, ""
    if not isinstance(event, dict):
        return clause, ""
    detail = event.get("op") or event.get("what") or event.get("kind") or ""
    return clause, f"{event.get('ev', '')} {detail}".strip()


def _results_kept(out: Path, kept: Path, keep: Callable[[dict[str, Any]], bool]) -> Path:
    """A copy of run `out` in `kept` holding its plan and device records and the results `keep` accepts."""
    kept.mkdir()
    with (out / "results.jsonl").open(encoding="utf-8") as src, (kept / "results.jsonl").open("w") as dst:
        for line in src:
            record = json.loads(line)
            if record.get("kind") != "result" or keep(record):
                dst.write(line)
    return kept


# Trace fields that differ between two runs of the same behaviour: times, threads' and processes' numbers.
_UNSTABLE_FIELDS: Final = frozenset({"t", "dur_ns", "th", "pid", "trace", "reached_ns"})


def behaviour(trace: Sequence[str]) -> tuple[str, ...]:
    """A result's trace without its times and thread numbers: two runs that behaved alike give the same."""
    out = []
    for line in trace:
        try:
            event = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(event, dict):
            event = {k: v for k, v in event.items() if k not in _UNSTABLE_FIELDS}
        out.append(json.dumps(event, sort_keys=True))
    return tuple(out)


def legal_variations(work: Path, conformant: Path, log: Callable[[str], None]) -> list[Path]:
    """Runs of the adversarial interposer's legal variations (tests/adversarial/adversary.py LEGAL, WARNED and
    INCOMPLETE: behaviours the text allows, which the vnpu does not show), kept to the results whose trace
    behaved otherwise than the conformant vnpu's in the same scenario: a rule that accepts a legal behaviour
    is told apart from one that would refuse it only by such traces."""
    from tests.adversarial.adversary import INCOMPLETE, LEGAL, WARNED, build, real_library

    reference: dict[str, tuple[str, ...]] = {}
    with (conformant / "results.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record.get("kind") == "result":
                reference[record["scenario"]] = behaviour(record.get("trace") or ())
    real = real_library()
    variations = {(v.mutation, tuple(v.args)) for v in (*LEGAL, *WARNED, *INCOMPLETE)}
    log(f"running the corpus on {len(variations)} legal variations of the kit")
    runs: list[Path] = []
    for name, args in sorted(variations):
        where = work / (name + "".join(args).replace("-", "_"))
        out = run_corpus(where / "run", "--impl", str(build(name, where, real)), "-j", "16", *args)
        runs.append(_results_kept(out, where / "different", lambda r: behaviour(r.get("trace") or ())
                                  != reference.get(r.get("scenario", ""))))  # fmt: skip
    return runs


def prepare(work: Path, failures: Path | None, defects: bool, log: Callable[[str], None]) -> list[Item]:
    from host.offline.rejudge import corpus_by_id

    corpus, catalogue = corpus_by_id()
    log("running the corpus on the published vnpu and on its aosp-2026 personality")
    conformant = run_corpus(work / "conformant")
    twin = run_corpus(work / "twin", "--personality", "aosp-2026")
    items = load_items("conformant", conformant, "published-37", corpus, catalogue)
    for policy in OTHER_POLICIES:  # the scenarios that predict a declared policy run only under it
        log(f"running the corpus on the published vnpu under policy {policy}")
        run_dir = run_corpus(work / f"conformant-{policy}", "--policy", policy)
        items += load_items("conformant", run_dir, "published-37", corpus, catalogue)
    items += load_items("twin", twin, "published-37", corpus, catalogue)
    items += load_items("twin-aosp", twin, "aosp-2026", corpus, catalogue)
    if defects:
        for run_dir in known_defects(work / "defects", log):
            items += load_items("kit-defects", run_dir, "published-37", corpus, catalogue)
        for run_dir in legal_variations(work / "legal", conformant, log):
            items += load_items("kit-legal", run_dir, "published-37", corpus, catalogue)
    if failures is not None:
        for run_dir in sorted(p for p in failures.iterdir() if (p / "results.jsonl").is_file()):
            with contextlib.suppress(Exception):  # a run stopped at its first failure may lack its end
                items += load_items("vnpu-mutants", run_dir, "published-37", corpus, catalogue)
    log(f"{len(items)} stored results; judging each once with the unmodified model")
    baseline(items)
    return items


def main(argv: Sequence[str], sample: int | None, seed: int, jobs: int, json_out: Path | None) -> int:
    import argparse

    from reference_model.rules import demonstration_clauses, rule_clauses

    parser = argparse.ArgumentParser(prog="mutation.py --model")
    parser.add_argument("--failures", type=Path, help="FAIL records kept by bench/mutation.py --keep-failures")
    parser.add_argument("--defects", action="store_true",
                        help="also judge the kit's defect switches, adversarial mutants and legal variations")
    parser.add_argument("--module", action="append", default=[], help="only this chapter module")
    parser.add_argument("--list", action="store_true", help="list the mutants; judge none")
    args = parser.parse_args(list(argv))
    mutants = all_mutants(args.module)
    if sample is not None and sample < len(mutants):
        mutants = [mutants[i] for i in sorted(random.Random(seed).sample(range(len(mutants)), sample))]
    equivalents = load_equivalents()
    clauses = {**demonstration_clauses(), **rule_clauses()}
    if args.list:
        for m in mutants:
            print(f"{m.key}  {m.target}  {m.change}  | {m.source_line}")
        print(f"{len(mutants)} mutants")
        return 0
    started = time.monotonic()
    global _ITEMS
    with tempfile.TemporaryDirectory(prefix="npuconf-model-mutation-") as tmp:
        os.environ["NPUCONF_CACHE_DIR"] = str(Path(tmp) / "cache")
        _ITEMS = prepare(Path(tmp), args.failures, args.defects, lambda line: print(line, flush=True))
    print(f"{len(mutants)} model mutants, {max(1, jobs)} at a time", flush=True)
    print("| mutant | function | change | outcome | by |")
    print("|---|---|---|---|---|", flush=True)
    outcomes: list[ModelOutcome] = []
    context = multiprocessing.get_context("fork")
    with context.Pool(max(1, jobs)) as pool:
        for outcome in pool.imap(_work, mutants, chunksize=4):
            m = outcome.mutant
            outcome.clauses = tuple(clauses.get(f"{m.module}.{m.function}", clauses.get(f"{m.module}.{m.target}", ())))
            if outcome.status in ("survived", "unreached"):
                entry = next((e for e in equivalents if e.covers(m)), None)
                if entry is not None:
                    outcome.status, outcome.reason = f"{outcome.status}, explained", entry.reason
            outcomes.append(outcome)
            print(f"| `{m.module}.py:{m.line}` | {m.target} | `{m.change}` | {outcome.status} | "
                  f"{(outcome.detail or outcome.reason).replace('|', '/')[:160]} |", flush=True)  # fmt: skip
    minutes = (time.monotonic() - started) / 60
    counts = Counter(o.status for o in outcomes)
    by_dataset = Counter(o.dataset for o in outcomes if o.status == "killed")
    print()
    print(f"model mutants {len(outcomes)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + "; killed by " + ", ".join(f"{k or 'timeout'} {v}" for k, v in sorted(by_dataset.items()))
          + f"; {minutes:.1f} min", flush=True)  # fmt: skip
    if json_out is not None:
        json_out.write_text(json.dumps({"totals": dict(counts), "killed_by": dict(by_dataset),
                                        "minutes": round(minutes, 2), "mutants": [o.as_json() for o in outcomes]},
                                       indent=1) + "\n", encoding="utf-8")  # fmt: skip
    return 0

