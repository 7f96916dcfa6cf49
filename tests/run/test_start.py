"""`npuconf run` from request to answer (host/run/start.py, command.py): a usage error creates nothing,
the answer is printed before the reports are written, and a local run imports no adb library."""

import os
import subprocess
import sys

import pytest

import host.run.start as session
from host.cli import main
from tests.conftest import ROOT, npuconf

SHORT = "cookies.deleter_runs_without_allocation"


@pytest.mark.parametrize(
    "options",
    [
        ["--target", "local", "--serial", "X"],
        ["--target", "virtual", "--impl", "IMPL"],
        ["--target", "local", "--impl", "IMPL"],
    ],
    ids=["serial-on-local", "impl-on-virtual", "impl-missing"],
)
def test_a_usage_error_at_run_start_creates_nothing(tmp_path, options):
    options = [str(tmp_path / "nope.so") if o == "IMPL" else o for o in options]
    done = npuconf("run", *options, "--out", tmp_path / "new" / "run", "-q")
    assert done.returncode == 3, done.stderr
    assert not (tmp_path / "new").exists()
    done = npuconf("run", *options, "-q", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_usage_error_in_a_directory_that_was_there_leaves_it_as_it_was(tmp_path):
    out = tmp_path / "given"
    out.mkdir()
    done = npuconf("run", "--target", "local", "--impl", tmp_path / "nope.so", "--out", out, "-q")
    assert done.returncode == 3, done.stderr
    assert out.is_dir() and not any(out.iterdir())


def test_the_answer_is_printed_before_the_reports_are_written(tmp_path, monkeypatch, capsys):
    seen = []
    write = session.write_run_reports

    def spy(run, out_dir):
        seen.append(capsys.readouterr().out)
        return write(run, out_dir)

    monkeypatch.setattr(session, "write_run_reports", spy)
    out = tmp_path / "run"
    code = main(["run", "--target", "local", "-q", "--scenario", SHORT, "--out", str(out), "--store",
                 str(tmp_path / "store.sqlite")])
    assert code == 0
    assert len(seen) == 1 and seen[0].startswith("partial run") and f"junit: {out / 'junit.xml'}" in seen[0]
    assert all((out / name).is_file() for name in ("junit.xml", "report.html", "summary.json"))


def test_a_local_run_imports_no_adb_library_and_the_cli_no_report_library(tmp_path):
    # The command line alone loads neither the report libraries nor the results store: a virtual run
    # starts its devices right after parsing it, so whatever the parser imports delays them.
    # A local run loads the kit's targets package whole (its face is eager), but no adb library.
    probe = (
        "import sys\n"
        "import host.cli\n"
        "print(sorted(m for m in ('jinja2', 'junitparser', 'adbutils', 'reports.store.runs', 'reports.answers.atlas')\n"
        "             if m in sys.modules))\n"
        "host.cli.main(sys.argv[1:])\n"
        "print(sorted(m for m in ('adbutils', 'requests', 'PIL', 'cryptography') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "run", "--target", "local", "-q", "--scenario", SHORT, "--out",
         str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ, NPUCONF_STATE_DIR=str(tmp_path / "state")),  # no fleet of another run to reap
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "[]", done.stdout + done.stderr
    assert lines[-1] == "[]", done.stdout + done.stderr


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if text.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("given", [False, True], ids=["new-directory", "directory-that-was-there"])
def test_a_usage_error_found_after_the_virtual_devices_started_leaves_nothing(tmp_path, probe_build, given):
    """A run on virtual devices starts them before it loads the corpus (host/run/head_start.py): a usage
    error found then stops them and removes what was made for the run, as if nothing had started."""
    out = tmp_path / "given" if given else tmp_path / "new" / "run"
    if given:
        out.mkdir()
    state = tmp_path / "state"
    done = subprocess.run(
        [sys.executable, "-m", "host", "run", "--target", "virtual", "--scenario", "no.such.scenario",
         "--out", str(out), "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT), NPUCONF_STATE_DIR=str(state)),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "no.such.scenario" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    if given:
        assert out.is_dir() and not any(out.iterdir())
    else:
        assert not (tmp_path / "new").exists()
    assert _processes_naming(str(tmp_path)) == []  # no device process, no adb server of the run
    assert list((state / "fleets").glob("*.json")) == []  # no fleet left registered as running
