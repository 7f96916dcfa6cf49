"""`npuconf run --resume DIR` with a `run` option the plan decided otherwise: a usage error naming both
values and the plan's file; a value equal to the plan's (default or not, path relative or absolute) is
accepted and the resume runs."""

import json

import pytest

from tests.conftest import npuconf

KEYWORD = "free.empty_list"
WAIVERS = 'waivers:\n  - clause: free-returns\n    device: "nobody/*"\n    reason: none here\n    expires: 2099-01-01\n'


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory, probe_build):
    """A local run with non-default options (policy acl, -j 2, waivers given by a relative path), cut
    back to its plan, its device and its first result as if interrupted: one scenario is left."""
    base = tmp_path_factory.mktemp("resume-conflicts")
    (base / "waivers.yaml").write_text(WAIVERS)
    done = npuconf(
        "run", "--target", "local", "-k", KEYWORD, "--policy", "acl", "-j", "2",
        "--waivers", "waivers.yaml", "--out", base / "run", "-q", cwd=base,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = base / "run" / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds == ["plan", "device", "result", "result", "end"]
    return base, lines[:3]


@pytest.fixture
def run_dir(interrupted_run):
    base, lines = interrupted_run
    (base / "run" / "results.jsonl").write_bytes(b"".join(lines))
    return base / "run"


def resume(run_dir, *options):
    return npuconf("run", "--resume", run_dir, "-q", *options)


@pytest.mark.parametrize(
    ("options", "planned"),
    [
        (("--target", "virtual"), "target local"),
        # the value the parser used to fill in by itself: given on purpose, it is a conflict too
        (("--policy", "budget"), "policy acl"),
        (("--personality", "aosp-2026"), "personality published"),
        (("--capacity", "4096"), "capacity none"),
        (("-k", "cookies"), f"keyword {KEYWORD}"),
        (("--clause", "free-returns"), "clauses none"),
        (("--scenario", KEYWORD), "scenario ids none"),
        (("-j", "1"), "jobs 2"),
        (("--timeout-multiplier", "2.5"), "timeout multiplier 1"),
        (("--devices", "3"), "devices 1"),
        (("--shard",), "shard off"),
        (("--cross", "armhf"), "cross none"),
        (("--profile", "aosp-2026"), "profile published-37"),
    ],
)
def test_conflicting_option_is_a_usage_error_naming_both_values(run_dir, options, planned):
    before = (run_dir / "results.jsonl").read_bytes()
    done = resume(run_dir, *options)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0] == (
        f"npuconf: {' '.join(options)} conflicts with the resumed run's {planned} ({run_dir / 'results.jsonl'}); "
        "drop the option or start a new run"
    )
    assert (run_dir / "results.jsonl").read_bytes() == before  # nothing ran


def test_conflicting_paths_compare_as_absolute_paths(run_dir, tmp_path):
    other = tmp_path / "waivers.yaml"
    other.write_text(WAIVERS)
    done = resume(run_dir, "--waivers", other)
    assert done.returncode == 3
    planned = run_dir.parent / "waivers.yaml"
    assert f"--waivers {other} conflicts with the resumed run's waivers {planned} (" in done.stderr
    done = resume(run_dir, "--scenarios", tmp_path)
    assert done.returncode == 3
    assert f"--scenarios {tmp_path} conflicts with the resumed run's scenarios none (" in done.stderr
    done = resume(run_dir, "--out", tmp_path)
    assert done.returncode == 3
    assert f"--out {tmp_path} conflicts with the resumed run's directory {run_dir}" in done.stderr


def test_values_equal_to_the_plans_are_accepted_and_the_resume_runs(run_dir):
    done = npuconf(
        "run", "--resume", "run", "-q", "--target", "local", "-k", KEYWORD, "--policy", "acl", "-j", "2",
        "--waivers", "waivers.yaml", "--personality", "published", "--profile", "published-37", "--devices", "1",
        "--timeout-multiplier", "1", "--out", "run", "--store", run_dir.parent / "store.sqlite",
        cwd=run_dir.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["scenario"] for r in records if r["kind"] == "result") == [KEYWORD, KEYWORD + "_after_buffers"]
