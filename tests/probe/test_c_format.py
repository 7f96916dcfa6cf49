"""The C of ndk_probe/src follows .clang-format: the same check as .ci/run (bash .ci/c-format)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("clang-format") is None, reason="clang-format is not installed")


def run_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / ".ci" / "c-format")], capture_output=True, text=True, timeout=120, check=False
    )


def test_probe_sources_are_formatted() -> None:
    result = run_check(ROOT)
    assert result.returncode == 0, result.stderr[-4000:]


def test_check_names_a_misformatted_file(tmp_path: Path) -> None:
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "c-format", tmp_path / ".ci" / "c-format")
    shutil.copy(ROOT / ".clang-format", tmp_path / ".clang-format")
    src = tmp_path / "ndk_probe" / "src" / "probe"
    src.mkdir(parents=True)
    (src / "tidy.c").write_text("int tidy(int n) { return n + 1; }\n")
    (src / "vocab.h").write_text("int   left_alone ;\n")  # excluded, as in the real tree
    assert run_check(tmp_path).returncode == 0
    (src / "untidy.c").write_text("int untidy(int n)\n{\n  return n+1;\n}\n")
    result = run_check(tmp_path)
    assert result.returncode != 0
    assert "untidy.c" in result.stderr
