"""The file-level call graph of C sources, read from their compiled objects' symbol tables.

File A calls file B when A's object leaves a symbol undefined that B's object defines. A circle is a
strongly connected component of more than one file (or a file that calls itself, which cannot
happen through the symbol table).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "ndk_probe"
VNPU_SOURCES = PROBE / "src" / "vnpu"
VNPU_INCLUDES = [PROBE / "include", PROBE / "gen", VNPU_SOURCES]


def compile_object(source: Path, out_dir: Path, includes: list[Path]) -> Path:
    obj = out_dir / (source.stem + ".o")
    flags = ["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-O0", "-c"]
    cc = os.environ.get("CC", "cc")
    subprocess.run(
        [cc, *flags, *(f"-I{d}" for d in includes), str(source), "-o", str(obj)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    return obj


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) external symbols of one object."""
    out = subprocess.run(
        ["nm", "-P", "-g", str(obj)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    defined: set[str] = set()
    undefined: set[str] = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        (undefined if kind in ("U", "w", "v") else defined).add(name)
    return defined, undefined


def call_graph(objects: dict[str, Path]) -> dict[str, set[str]]:
    """File name -> the other files whose symbols it uses."""
    table = {name: symbols(obj) for name, obj in objects.items()}
    owner = {sym: name for name, (defined, _) in table.items() for sym in defined}
    return {
        name: {owner[s] for s in undefined if s in owner and owner[s] != name}
        for name, (_, undefined) in table.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def vnpu_objects(out_dir: Path, sources: Path = VNPU_SOURCES) -> dict[str, Path]:
    """Source file name -> its object, compiled from `sources` (the vnpu directory of a checkout)."""
    includes = [*VNPU_INCLUDES[:2], sources]
    files = sorted(sources.glob("*.c"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        objs = list(pool.map(lambda src: compile_object(src, out_dir, includes), files))
    return {src.name: obj for src, obj in zip(files, objs, strict=True)}
