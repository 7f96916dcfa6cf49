"""Optional: the kit's arena arithmetic against the real TensorFlow Lite Micro runtime.

Runs only where the pinned ``tflite-micro`` wheel is installed (``pip install -e .[tflm]``); skips with
the reason otherwise. On the shipped sine model and on random models built here with the wheel's own
model builder, the head the runtime reports must be exactly the high-water mark that
arena_plan.py predicts, and head, tail and total must obey the arena policy's
layout (16-byte alignment, total = head + tail, both fit an arena of exactly that size).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("tflite_micro", reason="tflite-micro is not installed (pip install -e '.[tflm]')")

from reference_model.policies import arena
from reference_model.policies.pool import Pool
from tests.conftest import ROOT
from tests.tflm.arena_plan import head_bytes, planned_buffers
from tests.tflm.models import SINE, graph_of, random_model

pytestmark = pytest.mark.slow

RANDOM_MODELS = 120
ARENA = 64 * 1024  # generous: every model here needs under 4 KiB, so no run is near a failing size


def run_models(paths: list[str]) -> dict[str, dict[str, int]]:
    """One subprocess for all models (the runtime can crash a process on too-small arenas; this size is safe)."""
    done = subprocess.run([sys.executable, "-m", "tests.tflm.run_models", str(ARENA), *paths], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["model"]: r for r in map(json.loads, done.stdout.splitlines())}


def test_arena_head_matches_the_planner_on_real_models(tmp_path):
    paths = [str(SINE)]
    for seed in range(RANDOM_MODELS):
        path = tmp_path / f"model{seed}.tflite"
        path.write_bytes(random_model(seed))
        paths.append(str(path))
    reports = run_models(paths)
    assert set(reports) == set(paths)
    mismatches = []
    for path in paths:
        with open(path, "rb") as f:
            g = graph_of(f.read())
        predicted = head_bytes(planned_buffers(g.tensors, g.ops, g.inputs, g.outputs))
        r = reports[path]
        if predicted != r["head"]:
            mismatches.append((path, predicted, r["head"]))
        assert r["total"] == r["head"] + r["tail"]
        assert r["head"] % arena.ALIGN == 0 and r["tail"] % arena.ALIGN == 0
        # the arena policy's layout: the plan at the head, the persistent part at the tail, exactly full
        placed = arena.place(Pool(r["total"], {}), "head", r["head"], 3) if r["head"] else None
        pool = placed.pool if placed is not None else Pool(r["total"], {})
        assert arena.place(pool, "tail", r["tail"], 2).block is not None
        assert arena.place(pool, "tail", r["tail"] + 1, 2).block is None
    print(f"TFLM arena head: {len(paths) - len(mismatches)}/{len(paths)} models match")
    assert reports[str(SINE)]["head"] == 128
    assert mismatches == []
