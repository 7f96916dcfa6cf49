"""`npuconf run --out DIR`: which existing directories a new run may write into."""

import pytest

from tests.conftest import npuconf

RUN = ("run", "--target", "local", "-q", "-k", "free.empty_list")


@pytest.mark.parametrize("name", ["report.html", "summary.json", "junit.xml"])
def test_a_directory_with_someone_elses_report_is_refused_and_left_alone(tmp_path, name):
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text("my own notes\n")
    done = npuconf(*RUN, "--out", out)
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines() == [
        f"npuconf: --out {out}: holds {name} but no results.jsonl (not a run directory); the run would replace "
        "it: choose a new or empty directory"
    ]
    assert sorted(p.name for p in out.iterdir()) == [name]  # nothing written beside it either
    assert (out / name).read_text() == "my own notes\n"


def test_a_symlink_named_like_a_report_is_refused_and_not_followed(tmp_path):
    victim = tmp_path / "victim.html"
    victim.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(victim)
    done = npuconf(*RUN, "--out", out)
    assert done.returncode == 3 and "holds report.html but no results.jsonl" in done.stderr
    assert victim.read_text() == "keep\n" and (out / "report.html").is_symlink()


def test_new_empty_and_previous_run_directories_keep_their_rules(tmp_path, probe_build):
    created = tmp_path / "new" / "run"
    assert npuconf(*RUN, "--out", created).returncode == 0
    assert (created / "results.jsonl").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert npuconf(*RUN, "--out", empty).returncode == 0
    again = npuconf(*RUN, "--out", created)  # a previous run is not replaced (resume it with --resume)
    assert again.returncode == 3
    refusal = f"npuconf: --out {created}: already holds results.jsonl; choose a new directory"
    assert again.stderr.splitlines() == [refusal]
