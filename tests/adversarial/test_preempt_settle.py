"""The teardown's preempt settle waits for the victim of `preempt=lowest` (docs/formats.md §4): an onPreempt
a device delivered before the command (inside a free, which the text allows) must not end that wait."""

from pathlib import Path

import pytest

from .adversary import build, real_library, run_kit

pytestmark = pytest.mark.slow

SCENARIO = """scenarios:
  - id: preemption.lowest_after_an_onpreempt_inside_free
    title: preempt=lowest after a free whose buffer may get its onPreempt inside the free
    clauses: [preempt-onpreempt-purpose]
    requires: [supported-pair, vnpu-control]
    steps:
      - req_create: {req: r}
      - req_set_device: {req: r, device: $pair.device}
      - req_set_type: {req: r, type: $pair.type}
      - req_set_size: {req: r, size: 4096}
      - req_set_onalloc: {req: r, set: true}
      - req_set_onpreempt: {req: r, set: true}
      - req_set_cookie: {req: r, cookie: 11, deleter: false}
      - alloc: {reqs: [r]}
      - bind: {buf: b1, select: {nth: 0}}
      - buf_free: {bufs: [b1]}
      - req_set_cookie: {req: r, cookie: 12, deleter: false}
      - alloc: {reqs: [r]}
      - bind: {buf: b2, select: {nth: 1}}
      - vnpu: {command: preempt=lowest}
"""


@pytest.mark.parametrize(("mutation", "verdict"), [("M_NONE", "PASS"), ("W_PREEMPT_IN_FREE_UNMAPPED", "WARN")])
def test_an_onpreempt_inside_a_free_does_not_end_the_wait_for_a_later_victim(mutation: str, verdict: str,
                                                                             tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios" / "preemption"
    scenarios.mkdir(parents=True)
    (scenarios / "lowest.yaml").write_text(SCENARIO)
    for k in range(5):  # the victim's onPreempt races the settle: a settle that stopped early fails some runs
        outcome = run_kit(build(mutation, tmp_path / "lib", real_library()), tmp_path / f"run{k}",
                          "--scenarios", str(tmp_path / "scenarios"))
        assert outcome.exit_code == 0, outcome.describe()
        assert outcome.counts[verdict] == 1, outcome.describe()
