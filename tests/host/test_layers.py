"""The architecture as a test: no import circles, and no module reaching up a layer.

Every import statement of every kit module is read with `ast` (also those inside functions), resolved
to the kit module it names, and checked against the layer order

    reference_model <- floor <- reports <- reports.recorded <- reports.answers <- reports.store <- reports.renderers
                    <- host (errors) <- host.suite, host.options <- host.probe <- host.targets <- host.run
                    <- host.offline, host.fuzz, conformance <- host.cli <- host.entry <- host.__main__

A module may import its own room freely and lower rooms of host through their package (`host.targets`, not
`host.targets.adb.target`), or through a public module the room names: the rest of a room is private. The
rooms of reports export nothing from their packages: their modules are imported by name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference_model", "floor", "reports", "host", "conformance")

# room -> layer; the longest matching prefix decides a module's room.
LAYERS: dict[str, int] = {
    "reference_model": 0,
    "floor": 1,  # safe file I/O, bounds, JSON lines, the user cache, counts in words: every room's floor
    "reports": 2,  # reports/__init__.py: what the rooms above it are for; it imports nothing
    "reports.recorded": 3,  # results.jsonl's records, a run as values, the plan's options, runs merged
    "reports.answers": 4,  # the claim, each clause's answer, findings, the atlas, a baseline comparison
    "reports.store": 5,  # runs and their answers kept in one database
    "reports.renderers": 6,  # junit.xml, report.html, summary.json, atlas.json and the other pages
    "host": 7,  # host/__init__.py (KIT_VERSION) and host/errors.py
    "host.errors": 7,
    "host.suite": 8,
    "host.options": 8,  # the option table's command lines: the CLI parses them without loading a run
    "host.probe": 9,
    "host.targets": 10,
    "host.run": 11,
    "host.fuzz": 12,
    "host.offline": 12,
    "conformance": 12,
    "host.cli": 13,
    "host.entry": 14,  # the console script: imports the command line under a Ctrl-C guard
    "host.__main__": 15,  # `python -m host`: runs the console script
}

# Each kind of target is a public module of host.targets: the package exports only the seam, since a
# virtual device's process imports it first and needs none of the kinds' code.
PUBLIC_MODULES = frozenset(
    {"host.targets.local", "host.targets.impl_check", "host.targets.adb", "host.targets.virtual_device",
     "host.targets.kinds"}
)


def kit_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = kit_modules()


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imported_modules(module: str) -> Iterator[tuple[int, str]]:
    """(line, kit module) for every import in the module's source, resolved like Python does."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _kit(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield from _kit(node.lineno, candidate if candidate in MODULES else base)


def _kit(line: int, name: str) -> Iterator[tuple[int, str]]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name:
        yield line, name


def room(module: str) -> str:
    return max((r for r in LAYERS if module == r or module.startswith(r + ".")), key=len)


def graph() -> dict[str, set[str]]:
    return {m: {target for _, target in imported_modules(m) if target != m} for m in MODULES}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def import_problem(module: str, target: str) -> str | None:
    """Why `module` may not import `target` (None: it may)."""
    own_room, target_room = room(module), room(target)
    if target_room == own_room:
        return None
    if LAYERS[target_room] > LAYERS[own_room]:
        return f"{own_room} (layer {LAYERS[own_room]}) reaches up to {target_room} (layer {LAYERS[target_room]})"
    if LAYERS[target_room] == LAYERS[own_room] and {own_room, target_room} != {"host", "host.errors"}:
        return f"{own_room} and {target_room} are side by side; neither may import the other"
    if target_room.startswith("host.") and target not in {target_room, "host.errors", *PUBLIC_MODULES}:
        return f"reaches inside {target_room}; import it from the package `{target_room}`"
    return None


def layer_violations() -> list[str]:
    problems = []
    for module in MODULES:
        for line, target in sorted(set(imported_modules(module))):
            problem = import_problem(module, target)
            if problem is not None:
                problems.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} imports {target}: {problem}")
    return problems


def test_every_kit_module_has_a_room():
    assert all(room(m) for m in MODULES)
    assert {"host.cli", "host.run.start", "host.targets.adb.transport", "host.offline.verify"} <= set(MODULES)


def test_no_import_circles():
    assert cycles(graph()) == []


def test_no_module_reaches_up_a_layer_or_into_another_room():
    assert layer_violations() == []


def test_the_checker_sees_circles_and_upward_imports():
    # The checker itself must be able to fail: a circle of three, and the circle this layout removed
    # (session -> store recording -> bundle -> rejudge -> session).
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert room("host.targets.adb.transport") == "host.targets"
    assert LAYERS[room("host.run.start")] < LAYERS[room("host.offline.bundle")]


def test_an_upward_import_between_the_rooms_of_reports_fails():
    # The three imports the flat reports/ had and its rooms refuse: the run's values asking for its claim,
    # the atlas writing its JSON with summary.json's helper, the store below the page that reads it.
    assert import_problem("reports.recorded.results", "reports.answers.claim") is not None
    assert import_problem("reports.answers.atlas", "reports.renderers.summary") is not None
    assert import_problem("reports.store.runs", "reports.renderers.dashboard") is not None
    assert "reaches up" in (import_problem("reports.recorded.records", "reports.renderers.html") or "")
    # ... and downward ones pass: a renderer reads the store, the answers and the records.
    assert import_problem("reports.renderers.dashboard", "reports.store.runs") is None
    assert import_problem("reports.store.runs", "reports.answers.atlas") is None
    assert import_problem("reports.answers.claim", "reports.recorded.results") is None
    assert import_problem("host.offline.commands", "reports.renderers.run_reports") is None
    order = [LAYERS[r] for r in ("floor", "reports.recorded", "reports.answers", "reports.store", "reports.renderers",
                                 "host")]
    assert order == sorted(order) and len(set(order)) == len(order)


def test_relative_imports_are_resolved():
    found = {target for _, target in imported_modules("host.targets.adb.deployment")}
    assert {"host.errors", "host.probe", "host.targets.virtual_device", "host.targets.adb.transport"} <= found
    reaching = {room(t) for m in MODULES if room(m) == "reference_model" for _, t in imported_modules(m)}
    assert reaching <= {"reference_model"}
    reports = {room(t) for m in MODULES if room(m).partition(".")[0] == "reports" for _, t in imported_modules(m)}
    assert reports <= {"reports.recorded", "reports.answers", "reports.store", "reports.renderers", "floor",
                       "reference_model"}
    # The floor stands on nothing of the kit but the root of its errors.
    below_floor = {t for m in MODULES if room(m) == "floor" for _, t in imported_modules(m) if room(t) != "floor"}
    assert below_floor <= {"reference_model.errors"}
