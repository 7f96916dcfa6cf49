"""Portability: the probe and libvnpu cross-built with Debian's aarch64 and armhf (32-bit off_t)
compilers run a slice of the corpus under qemu-user and pass it."""

import json
import shutil

import pytest

from floor.cross_targets import CROSS_TARGETS
from host.probe import build_for
from host.suite.checkout import SCENARIO_ROOT
from host.suite.corpus import load_corpus
from tests.conftest import npuconf

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("cross", sorted(CROSS_TARGETS))
def test_cross_built_probe_passes_under_qemu(cross, tmp_path):
    compiler, _, qemu, _ = CROSS_TARGETS[cross]
    if shutil.which(compiler) is None or shutil.which(qemu) is None:
        pytest.skip(f"{compiler} or {qemu} is not installed (.ci/setup installs both)")
    build_dir = build_for(None, None, None, tmp_path / f"build-{cross}", cross=cross)
    run_dir = tmp_path / "run"
    done = npuconf(
        "run",
        "--target",
        "local",
        "--cross",
        cross,
        "--build-dir",
        build_dir,
        "-k",
        "cookies or mapping or crashes",
        "--out",
        run_dir,
        "-q",
        "--timeout-multiplier",
        "4",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    results = [r for r in records if r["kind"] == "result"]
    assert len(results) >= 10
    # 64-bit raw cookies need 64-bit pointers (requires: pointer-64)
    needs_64 = {s.id for s in load_corpus(SCENARIO_ROOT) if "pointer-64" in s.requires}
    wide = {r["verdict"] for r in results if r["scenario"] in needs_64}
    assert {r["verdict"] for r in results if r["scenario"] not in needs_64} == {"PASS"}
    assert wide == ({"NOT_APPLICABLE"} if cross == "armhf" else {"PASS"})
    device = next(r for r in records if r["kind"] == "device")
    assert device["device"] == f"local-{cross}"
    assert device["info"]["abis"] == [qemu.removeprefix("qemu-")]
