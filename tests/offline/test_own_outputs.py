"""`npuconf spec --out FILE` and `npuconf errata --out DIR` replace only pages the kit wrote: a path that
holds anything else is refused in one line and left as it was."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import npuconf


def test_spec_refuses_to_replace_a_file_it_did_not_write(tmp_path: Path):
    foreign = tmp_path / "passwd"
    foreign.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    done = npuconf("spec", "--out", foreign)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"npuconf: --out {foreign}: exists and is not a page npuconf wrote; give a new path, or remove it first"
    )
    assert foreign.read_text(encoding="utf-8") == "root:x:0:0:root:/root:/bin/bash\n"
    (tmp_path / "dir.html").mkdir()
    refused = npuconf("spec", "--out", tmp_path / "dir.html")
    assert refused.returncode == 3 and "is not a regular file" in refused.stderr
    page = tmp_path / "spec.html"
    assert npuconf("spec", "--out", page).returncode == 0
    assert npuconf("spec", "--out", page).returncode == 0  # its own page: replaced


def test_errata_refuses_to_replace_files_it_did_not_write(published_run, tmp_path: Path):
    (tmp_path / "errata.md").write_text("my notes\n", encoding="utf-8")
    done = npuconf("errata", published_run.path, "--out", tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "errata.md: exists and is not a page npuconf wrote" in done.stderr
    assert (tmp_path / "errata.md").read_text(encoding="utf-8") == "my notes\n"
    assert not (tmp_path / "errata.html").exists()
    (tmp_path / "errata.md").unlink()
    assert npuconf("errata", published_run.path, "--out", tmp_path).returncode == 0
    assert npuconf("errata", published_run.path, "--out", tmp_path).returncode == 0
