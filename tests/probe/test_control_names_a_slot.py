"""A vnpu control command names the probe's slot: a scenario buffer spelled like another slot (`b0`
bound second, so it lives in slot `b1`) must not redirect the command. Found by `npuconf fuzz` as a false
FAIL `preempt-callback-on-forced-dealloc` on the conformant vnpu."""

from __future__ import annotations

import json

import pytest

from tests.conftest import npuconf

SCENARIO = """\
id: preemption.control_names_the_slot
title: preempt= names the buffer the scenario means, whatever its name looks like
clauses: [preempt-callback-on-forced-dealloc]
requires: [supported-pair, vnpu-control]
steps:
  - req_create: {req: r}
  - req_set_device: {req: r, device: $pair.device}
  - req_set_type: {req: r, type: $pair.type}
  - req_set_size: {req: r, size: 4096}
  - req_set_onalloc: {req: r, set: true}
  - req_set_onpreempt: {req: r, set: true}
  - req_set_cookie: {req: r, cookie: c1, deleter: true}
  - alloc: {reqs: [r]}
  - await_alloc: {count: 1, timeout_ms: 2000}
  - bind: {buf: b1, select: {cookie: c1}}
  - req_set_cookie: {req: r, cookie: c2, deleter: true}
  - alloc: {reqs: [r]}
  - await_alloc: {count: 2, timeout_ms: 2000}
  - bind: {buf: b0, select: {cookie: c2}}
  - vnpu: {command: preempt=b0}
  - await_preempt: {count: 1, timeout_ms: 2000}
"""


@pytest.mark.slow
def test_a_control_command_names_the_compiled_slot(tmp_path, probe_build):
    chapter = tmp_path / "scenarios" / "preemption"
    chapter.mkdir(parents=True)
    (chapter / "names.yaml").write_text(SCENARIO)
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--scenarios", tmp_path / "scenarios", "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (result,) = [r for r in records if r["kind"] == "result"]
    assert result["verdict"] == "PASS", result["reason"]
    assert result["slots"]["b0"] == "b1"  # the collision the test is about
    assert any('"preempt=b1"' in line for line in result["trace"])
