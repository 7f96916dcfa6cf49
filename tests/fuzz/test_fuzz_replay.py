"""Fuzz replays reproduce on the fuzzed configuration, a time budget bounds the whole command, and the
progress line says what each device is doing."""

from __future__ import annotations

import html
import json
import re
import shlex
import time
from pathlib import Path

import pytest

from host.fuzz.campaign import OVERRUN_S, Activity, Budget, FuzzProgress, FuzzRequest
from host.fuzz.progress import progress_line, start_line
from host.fuzz.replay import replay
from host.run import RunRequest
from tests.conftest import PRINTED_NPUCONF, npuconf, paste
from tests.vnpu_builds import build_defective_vnpu


def test_progress_names_fuzzing_shrinking_and_confirming():
    fuzzing = FuzzProgress(1200, 20.0, 1, (Activity("local:a"),), left_s=12.4)
    assert progress_line(fuzzing, now=0.0) == "fuzz: fuzzing, 1200 programs, 60.0/s, 1 divergence, 12 s left"
    shrinking = Activity("local:a", "shrinking", "map-must-unmap", 1, 2, candidates=57, deadline=30.0)
    confirming = Activity("emu-2", "confirming", "priority-set", 2, 2, replay=2, deadline=30.0)
    line = progress_line(FuzzProgress(40, 2.0, 2, (shrinking, confirming), left_s=None), now=21.0)
    assert line == ("fuzz: 40 programs, 20.0/s, 2 divergences; shrinking group 1 of 2 (map-must-unmap on "
                    "local:a, 57 candidates tried, 9 s left); confirming replays (2 of 3) of group 2 "
                    "(priority-set on emu-2, 9 s left)")


def test_start_line_names_the_default_target_and_both_bounds():
    request = FuzzRequest(RunRequest(target="local"), seed=4, budget=Budget(seconds=30.0), target_defaulted=True)
    line = start_line(request)
    assert line.startswith("fuzz: target local (default: local), seed 4, budget 30s for the whole command")
    assert f"ends by about {30 + OVERRUN_S:g} s" in line and "a shrink at most 120 s" in line
    counted = start_line(FuzzRequest(RunRequest(target="virtual"), budget=Budget(programs=500)))
    assert counted.startswith("fuzz: target virtual, seed 0, budget 500 programs, shrinking not included")


def test_a_divergence_replay_names_its_scenario_exactly_and_the_whole_dir_replay_none(tmp_path):
    config = {"target": "local", "personality": "aosp-2026", "policy": "caching", "profile": "published-37"}
    whole = replay(config, tmp_path / "scenarios")
    options = "--target local --personality aosp-2026 --policy caching"
    assert whole == f"{PRINTED_NPUCONF} run {options} --scenarios {tmp_path}/scenarios"
    one = replay(config, tmp_path / "scenarios", "fuzz.map-must-unmap.s1_10")
    assert one == f"{whole} --scenario fuzz.map-must-unmap.s1_10"


def _replayed_clauses(line: str, out: Path, cwd: Path) -> set[tuple[str, str | None]]:
    words = shlex.split(line)
    assert words[0] == shlex.split(PRINTED_NPUCONF)[0] and words[1] == "run", line
    done = paste(f"{line} --out {shlex.quote(str(out))} -q", cwd)  # as printed, the venv not on PATH
    assert done.returncode == 1, done.stdout + done.stderr
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {(r["verdict"], (r.get("divergence") or {}).get("clause")) for r in records if r["kind"] == "result"}


@pytest.mark.slow
def test_replays_of_a_fuzz_run_reproduce_its_fail_on_the_same_configuration(tmp_path, probe_build):
    """A defective build under a non-default personality and policy: the printed replay line, the one in
    fuzz.json and the divergence's own, each run as written from another directory, give the fuzz's FAIL.
    The budget bounds the whole command (shrinking included), and stderr says when it shrinks."""
    library = build_defective_vnpu(tmp_path, "VNPU_DEFECT_PRIORITY_MAX_REFUSED")
    out = tmp_path / "fuzz"
    budget = 8.0
    started = time.monotonic()
    done = npuconf("fuzz", "--impl", library, "--seed", "1", "--budget", f"{budget:g}s", "--until-found",
                   "--personality", "aosp-2026", "--policy", "caching", "--out", out, timeout=300)
    wall = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert wall <= (budget + OVERRUN_S) * 1.5, wall
    assert "fuzz: target local (default: local), seed 1, budget 8s for the whole command" in done.stderr
    assert "shrinking group 1 of" in done.stderr, done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["schema"] == 3
    assert {k: summary["config"][k] for k in ("target", "personality", "policy", "impl")} == {
        "target": "local", "personality": "aosp-2026", "policy": "caching", "impl": str(library)}
    printed = [x.removeprefix("replay: ") for x in done.stdout.splitlines() if x.startswith("replay: ")]
    assert printed == [summary["replay"]]
    divergence = next(d for d in summary["divergences"] if d["shrunk"])
    assert divergence["replay"].endswith(f" --scenario {divergence['scenario_id']}"), divergence["replay"]
    assert "--scenario " not in summary["replay"]
    expected = ("FAIL", divergence["clause"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    page = (out / "fuzz.html").read_text()
    in_page = [html.unescape(m) for m in re.findall(r"<code>(.*?)</code>", page)]
    assert summary["replay"] in in_page and divergence["replay"] in in_page, in_page
    assert not re.search(r">(True|False|None)<|\[\]|\['", page), "a Python literal in fuzz.html"
    for k, line in enumerate([printed[0], summary["replay"], divergence["replay"]]):
        assert "--personality aosp-2026" in line and "--policy caching" in line and str(library) in line
        assert expected in _replayed_clauses(line, tmp_path / f"replay{k}", elsewhere), line
