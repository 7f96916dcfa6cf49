"""The generated C and Python views of the vocabulary must match their source."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_fresh():
    done = subprocess.run(
        [sys.executable, str(ROOT / "ndk_probe" / "tools" / "gen_vocabulary.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_check_reports_a_stale_file(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "ndk_probe" / "tools"))
    try:
        import gen_vocabulary
    finally:
        sys.path.pop(0)
    stale = tmp_path / "vocabulary.h"
    stale.write_text("/* old */\n")
    monkeypatch.setattr(gen_vocabulary, "C_HEADER", stale)
    monkeypatch.setattr(gen_vocabulary, "ROOT", tmp_path)
    monkeypatch.setattr(gen_vocabulary, "PY_MODULE", tmp_path / "vocabulary.py")
    (tmp_path / "vocabulary.py").write_text((ROOT / "reference_model" / "vocabulary.py").read_text())
    assert gen_vocabulary.main(["--check"]) == 1
