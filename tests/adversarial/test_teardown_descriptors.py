"""Teardown awaits every handed-over descriptor closed (docs/formats.md §4): a scenario that loads a file
and never checks its descriptor still catches an implementation that leaks it."""

from pathlib import Path

import pytest

from .adversary import build, real_library, run_kit

pytestmark = pytest.mark.slow

SCENARIO = """scenarios:
  - id: loading.leak_shows_at_teardown
    title: A load whose descriptor no step checks
    clauses: [load-fd-ownership]
    requires: [supported-pair, load]
    steps:
      - file_new: {file: f, size: 4096, seed: 3}
      - req_create: {req: r}
      - req_set_device: {req: r, device: $pair.device}
      - req_set_type: {req: r, type: $pair.type}
      - req_set_size: {req: r, size: 4096}
      - req_set_onalloc: {req: r, set: true}
      - alloc: {reqs: [r]}
      - bind: {buf: b, select: {nth: 0}}
      - buf_load: {buf: b, fd: f, file_offset: 0, length: 4096, buffer_offset: 0, onload: true}
"""


@pytest.mark.parametrize(("mutation", "exit_code"), [("M_NONE", 0), ("M_FD_LEAK", 1), ("L_FDS_LATE", 0)])
def test_a_leaked_descriptor_fails_at_teardown(mutation: str, exit_code: int, tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios" / "loading"
    scenarios.mkdir(parents=True)
    (scenarios / "leak.yaml").write_text(SCENARIO)
    outcome = run_kit(build(mutation, tmp_path / "lib", real_library()), tmp_path / "run",
                      "--scenarios", str(tmp_path / "scenarios"))
    assert outcome.exit_code == exit_code, outcome.describe()
    if exit_code:
        assert outcome.failing("load-fd-ownership") == ["loading.leak_shows_at_teardown"], outcome.describe()
    else:
        assert outcome.counts["PASS"] == 1, outcome.describe()
