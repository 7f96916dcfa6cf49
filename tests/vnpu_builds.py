"""libvnpu built by the tests with a change: a defect switch (`-DVNPU_DEFECT_...`, docs/vnpu.md §8) or one
more C file (a constructor that misbehaves). Either is an `--impl` that acts as told. bench/mutation.py
compiles its mutants with the same flags."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


def vnpu_compile_flags(defines: Sequence[str] = ()) -> list[str]:
    """gcc's options for libvnpu's sources (compiling or linking), without the sources and the output."""
    from host.probe import PROBE_SOURCE

    return ["-std=c11", "-fPIC", "-O1", "-D_GNU_SOURCE", *(f"-D{d}" for d in defines), "-pthread",
            f"-I{PROBE_SOURCE / 'include'}", f"-I{PROBE_SOURCE / 'gen'}", f"-I{PROBE_SOURCE / 'src' / 'vnpu'}",
            "-fvisibility=hidden"]  # fmt: skip


def build_vnpu(library: Path, defines: Sequence[str] = (), extra_sources: Sequence[Path] = ()) -> Path:
    from host.probe import PROBE_SOURCE

    sources = sorted((PROBE_SOURCE / "src" / "vnpu").glob("*.c"))
    subprocess.run(
        ["gcc", "-shared", *vnpu_compile_flags(defines), "-o", str(library), *map(str, sources),
         *map(str, extra_sources)],
        check=True, capture_output=True,
    )  # fmt: skip
    return library


def build_defective_vnpu(tmp_path: Path, define: str) -> Path:
    """libvnpu with one defect switch on, in `tmp_path`."""
    return build_vnpu(tmp_path / f"libvnpu-{define.lower()}.so", defines=(define,))


def vnpu_with(extra_source: Path, library: Path) -> Path:
    """libvnpu built with one more C file (a constructor that misbehaves)."""
    return build_vnpu(library, extra_sources=(extra_source,))
