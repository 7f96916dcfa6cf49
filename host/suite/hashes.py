"""Tree hashes of the kit's parts (kit, model, probe sources, suite), for bundles and the store.

Named "tree hashes" (`kit tree hash`, ...) everywhere: they are not the plan's corpus hash and model
hash (corpus.py `corpus_hash`, `model_hash` below), which hash other files in another way."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from .checkout import REPO_ROOT

HASHED_PARTS: Final = ("kit", "model", "probe", "suite")

# part -> (path under the repository, glob under it; "" for a single file)
PART_FILES: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "kit": (("floor", "*.py"), ("host", "*.py"), ("reference_model", "*.py"), ("reports", "*.py")),
    "model": (("reference_model", "*.py"),),
    "probe": (("ndk_probe/src", "*"), ("ndk_probe/vocabulary.yaml", "")),
    "suite": (("conformance/scenarios", "*.yaml"), ("conformance/clauses.yaml", "")),
}


def part_files(root: Path, patterns: Iterable[tuple[str, str]]) -> list[Path]:
    found: set[Path] = set()
    for directory, pattern in patterns:
        base = root / directory
        if base.is_file():
            found.add(base)
        elif base.is_dir():
            found.update(p for p in base.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(found)


def tree_hash(root: Path, files: Iterable[Path]) -> str:
    """SHA-256 over each file's path (relative to root) and the SHA-256 of its content, in path order."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode())
        digest.update(b"\n")
    return digest.hexdigest()


def checkout_tree_hashes(root: Path = REPO_ROOT) -> dict[str, str]:
    """kit (host, reference_model, reports Python files), model, probe (sources + vocabulary), suite
    (scenario files + clause catalogue): full SHA-256 tree hashes."""
    return {part: part_tree_hash(part, root) for part in HASHED_PARTS}


def part_tree_hash(part: str, root: Path = REPO_ROOT) -> str:
    """The tree hash of one part (a run's store record needs only the kit's)."""
    return tree_hash(root, part_files(root, PART_FILES[part]))


def model_hash() -> str:
    """A short hash of the reference model's source, recorded in every plan."""
    digest = hashlib.sha256()
    model = REPO_ROOT / "reference_model"
    for path in sorted(p for p in model.rglob("*.py") if "__pycache__" not in p.parts):
        digest.update(path.relative_to(model).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
