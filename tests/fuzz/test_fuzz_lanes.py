"""host/fuzz/lanes.py: a round of programs cut into chunks the lanes take in turn, the pausing programs
dealt out among them; a chunk that stops ends the handing out; and `npuconf fuzz -j` on the local target."""

from __future__ import annotations

import json
import threading
import time

import pytest

from host.fuzz import generate
from host.fuzz.lanes import CHUNKS_PER_LANE, MIN_CHUNK, MIN_CHUNK_S, chunks, paused_ms, run_in_lanes
from tests.conftest import npuconf


def _round(count: int, seed: int = 1) -> list[dict]:
    return [generate(seed, k, vnpu_control=True) for k in range(count)]


def test_one_lane_takes_the_round_in_one_probe_batch():
    assert chunks(_round(60), 1) == [list(range(60))]
    assert chunks([], 4) == []


def test_chunks_share_out_the_pausing_programs_and_keep_the_round_order():
    programs = _round(400)
    pausing = {k for k, p in enumerate(programs) if paused_ms(p) > 0}
    assert len(pausing) >= 3  # seed 1's first 400 programs preempt buffers without onPreempt
    cut = chunks(programs, 8)
    assert len(cut) == 8 * CHUNKS_PER_LANE
    assert sorted(k for chunk in cut for k in chunk) == list(range(400))
    assert all(chunk == sorted(chunk) for chunk in cut)
    # The pauses dealt out: no chunk holds more than an even share of them and one program more, and with
    # no more pausing programs than chunks, none holds two.
    pauses = [paused_ms(p) for p in programs]
    held = [sum(pauses[k] for k in chunk) for chunk in cut]
    assert max(held) <= sum(held) / len(cut) + max(pauses)
    if len(pausing) <= len(cut):
        assert max(len(pausing.intersection(chunk)) for chunk in cut) == 1
    else:  # more than chunks: each chunk holds one at least
        assert all(pausing.intersection(chunk) for chunk in cut)


def test_a_small_round_is_not_cut_below_min_chunk():
    assert len(chunks(_round(3 * MIN_CHUNK), 8)) == 3


def test_slow_programs_are_cut_into_smaller_chunks():
    """Programs that have taken long so far (each waits out its timeouts) run a few to a chunk, down to one,
    so that the lanes wait side by side; fast ones keep MIN_CHUNK."""
    programs = _round(8)
    assert chunks(programs, 8, program_s=1.0) == [[k] for k in range(8)]
    assert sorted(len(c) for c in chunks(programs, 8, program_s=MIN_CHUNK_S / 4)) == [4, 4]
    assert chunks(programs, 8, program_s=MIN_CHUNK_S / (2 * MIN_CHUNK)) == [list(range(8))]
    assert chunks(programs, 8, program_s=None) == [list(range(8))]
    assert chunks(programs, 1, program_s=1.0) == [list(range(8))]


def test_paused_ms_adds_the_sleeps_and_reads_any_mapping():
    program = {"steps": [{"sleep_ms": {"ms": 100}}, {"req_create": {"req": "r"}}, {"sleep_ms": {"ms": 200}}]}
    assert paused_ms(program) == 300.0
    assert paused_ms({"steps": [{"sleep_ms": {"ms": "x"}}, "odd"]}) == 0.0 and paused_ms({}) == 0.0


class _Chunks:
    """A chunk runner, scripted: the chunk holding ``failing`` stops after a quarter of ``seconds``, as a
    probe that died; the others take ``seconds``."""

    def __init__(self, failing: int | None = None, seconds: float = 0.0) -> None:
        self.failing = failing
        self.seconds = seconds
        self.ran: list[list[int]] = []
        self.guard = threading.Lock()

    def __call__(self, chunk: list[int]) -> str | None:
        with self.guard:
            self.ran.append(chunk)
        if self.failing in chunk:
            time.sleep(self.seconds / 4)
            return "the probe stopped"
        time.sleep(self.seconds)
        return None


def test_every_chunk_runs_on_the_lanes():
    run = _Chunks()
    assert run_in_lanes(_round(120), 4, run) is None
    assert sorted(k for chunk in run.ran for k in chunk) == list(range(120))


def test_a_chunk_that_stops_ends_the_handing_out_with_its_reason():
    programs = _round(120)
    cut = chunks(programs, 2)
    assert len(cut) == 6
    run = _Chunks(failing=cut[0][0], seconds=0.2)
    assert run_in_lanes(programs, 2, run) == "the probe stopped"
    assert run.ran == cut[:2]  # the other lane's chunk ends, no third starts


def test_a_stop_set_hands_out_nothing_more():
    stop = threading.Event()
    stop.set()
    run = _Chunks()
    assert run_in_lanes(_round(40), 2, run, stop) == "interrupted" and run.ran == []


@pytest.mark.slow
def test_fuzzing_on_lanes_judges_every_program_of_a_count_budget(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--seed", "3", "--budget", "300", "-j", "4", "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["programs"] == 300 and summary["verdicts"] == {"PASS": 300}
    assert summary["config"]["jobs"] == 4


def test_the_runner_times_its_programs_and_cuts_slow_ones_apart(tmp_path, probe_build, monkeypatch):
    """A real runner on the local target: after programs that pause 200 ms each, it knows a program's time in
    a probe batch, and its next round goes to the lanes a program or two per chunk."""
    from host.fuzz import execute, lanes
    from host.probe import DEFAULT_BUILD_DIR
    from host.suite import load_catalogue
    from host.targets import VnpuProfile
    from host.targets.local import LocalTarget
    from reference_model.profiles import PUBLISHED
    from reference_model.verdicts import Verdict

    target = LocalTarget(profile=VnpuProfile(), work_dir=tmp_path / "work", build_dir=DEFAULT_BUILD_DIR)
    runner = execute.ProgramRunner(target, load_catalogue().quotes(), PUBLISHED.name, lanes=4)
    runner.prepare()
    slow = [{"id": f"slow{k}", "title": "t", "clauses": ["req-prot-default-read"], "requires": [],
             "steps": [{"req_create": {"req": "r"}}, {"sleep_ms": {"ms": 200}}, {"req_free": {"req": "r"}}]}
            for k in range(4)]
    assert runner.program_s is None
    first = runner.run_programs(slow)
    assert [r.verdict if r else None for r in first] == [Verdict.PASS] * 4, first
    assert runner.program_s is not None and runner.program_s >= 0.2
    cuts: list[list[list[int]]] = []
    real_chunks = lanes.chunks
    monkeypatch.setattr(lanes, "chunks", lambda *a: cuts.append(real_chunks(*a)) or list(cuts[-1]))
    runner.run_programs([dict(p, id=f"{p['id']}-again") for p in slow])
    assert len(cuts) == 1 and max(len(c) for c in cuts[0]) <= 3 and len(cuts[0]) >= 2, (cuts, runner.program_s)
