"""`npuconf run --scenarios DIR` with nothing to load: one line naming the directory and the layout expected."""

import pytest

from tests.conftest import npuconf


def one_line_usage_error(done):
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def make_empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def make_flat(tmp_path):
    # scenario files at the top, not under a chapter directory: nothing matches the layout
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "alone.yaml").write_text("id: x.alone\n")
    return tmp_path / "flat"


def make_file(tmp_path):
    (tmp_path / "afile").write_text("not a directory\n")
    return tmp_path / "afile"


@pytest.mark.parametrize(
    ("make", "found"),
    [
        (make_empty, "holds no scenario files"),
        (make_flat, "holds no scenario files"),
        (lambda tmp_path: tmp_path / "missing", "does not exist"),
        (make_file, "is not a directory"),
    ],
)
def test_scenario_directory_without_scenarios_is_named_with_the_layout(tmp_path, make, found):
    root = make(tmp_path)
    line = one_line_usage_error(npuconf("run", "--target", "local", "--scenarios", root, "--out", tmp_path / "o", "-q"))
    assert f"scenario directory {root}: {found}" in line
    assert "<chapter>/<id>.yaml" in line
    assert "-k" not in line and "--clause" not in line
    assert not (tmp_path / "o" / "results.jsonl").exists()
