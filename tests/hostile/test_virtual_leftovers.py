"""What a virtual run or fleet leaves behind (issue 39): a refused run leaves no directory (its fleet's adb key
would stay in it), and nothing a shell on a virtual device started outlives the device."""

from __future__ import annotations

from tests.hostile.conftest import cli, text


def test_a_virtual_run_refused_for_its_waiver_file_leaves_no_directory(tmp_path):
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("waivers:\n  - scenario: free.empty_list\n    reason: no device glob\n    expires: 2099-01-01\n")
    run = tmp_path / "runs" / "run"
    done = cli("run", "--target", "virtual", "--waivers", waivers, "--out", run, "-q",
               env={"NPUCONF_STATE_DIR": str(tmp_path / "state")}, timeout=120)
    assert done.returncode == 3, text(done)
    assert "waivers[0].device" in text(done) and len(text(done).strip().splitlines()) == 1
    assert not run.exists() and not (tmp_path / "runs").exists()  # no adb key, no fleet state, no marker
