"""Bundles, YAML and disks that try to exhaust the host: refused in one line naming the limit, memory
bounded; a full disk is exit 2 naming the path, and `--resume` repairs what it tore."""

import contextlib
import gzip
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import time
import tracemalloc

import pytest

from tests.hostile.conftest import ROOT, SELECT, cli, records, text, write_records


def _bundle(path, members):
    """A tar.gz whose members are (name, size, byte) written as a stream (never held in memory)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:
        for name, size, byte in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, _Repeat(byte, size))


class _Repeat(io.RawIOBase):
    def __init__(self, byte, size):
        self.left, self.block = size, byte * (1 << 20)

    def read(self, n=-1):
        n = self.left if n is None or n < 0 else min(n, self.left)
        self.left -= n
        return (self.block * (n // len(self.block) + 1))[:n]


def _peak_mb_of(code):
    """Run python code in a fresh interpreter; its peak resident memory in MB."""
    probe = f"{code}\nimport resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


def test_zip_bomb_bundle_member_is_refused_before_it_is_read(tmp_path):
    bomb = tmp_path / "bomb.bundle.tar.gz"
    _bundle(bomb, [("manifest.json", 2, b"{"), ("results.jsonl", 300 << 20, b"\0")])
    assert bomb.stat().st_size < 2_000_000
    done = cli("verify", bomb)
    assert done.returncode == 3, text(done)
    assert "bundle_member_bytes=268435456" in text(done)
    assert len(done.stderr.decode().strip().splitlines()) == 1
    peak = _peak_mb_of(
        "from pathlib import Path\nfrom host.offline.verify import read_bundle\n"
        f"try:\n    read_bundle(Path({str(bomb)!r}))\nexcept Exception as exc:\n    print(exc)"
    )
    assert peak < 200, f"{peak} MB"


def test_bundle_total_size_over_the_limit_is_refused(tmp_path):
    bundle = tmp_path / "big.bundle.tar.gz"
    _bundle(bundle, [(f"m{i}", 400_000, b"a") for i in range(5)])
    done = cli("verify", bundle, env={"NPUCONF_LIMIT_BUNDLE_TOTAL_BYTES": "1000000"})
    assert done.returncode == 3, text(done)
    assert "bundle_total_bytes=1000000" in text(done)


def test_bundle_with_too_many_members_is_refused(tmp_path):
    bundle = tmp_path / "many.bundle.tar.gz"
    _bundle(bundle, [(f"m{i}", 1, b"a") for i in range(70)])
    done = cli("verify", bundle)
    assert done.returncode == 3, text(done)
    assert "bundle_members=64" in text(done)


def test_bundle_members_are_never_extracted(tmp_path):
    bundle = tmp_path / "escape.bundle.tar.gz"
    _bundle(bundle, [("../../escaped-member", 10, b"a"), ("/tmp/absolute-member-npuconf", 10, b"a")])
    done = cli("verify", bundle, cwd=tmp_path)
    assert done.returncode == 3, text(done)  # no manifest: unreadable
    assert not (tmp_path.parent.parent / "escaped-member").exists()
    assert not os.path.exists("/tmp/absolute-member-npuconf")


BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


def test_yaml_alias_bomb_waiver_file_is_refused_fast_in_one_line(tmp_path):
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(BOMB)
    assert waivers.stat().st_size < 400
    started = time.monotonic()
    done = cli("run", "--target", "local", "--waivers", waivers, "-k", SELECT, "--out", tmp_path / "run", "-q")
    assert done.returncode == 3, text(done)
    assert "yaml_nodes=200000" in text(done)
    assert len(done.stderr.decode().strip().splitlines()) == 1
    assert time.monotonic() - started < 30
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_yaml_alias_bomb_scenario_file_is_refused_in_one_line(tmp_path):
    scenarios = tmp_path / "scenarios"
    shutil.copytree(ROOT / "conformance" / "scenarios", scenarios)
    (scenarios / next(p.name for p in scenarios.iterdir() if p.is_dir()) / "bomb.yaml").write_text(BOMB)
    done = cli("run", "--target", "local", "--scenarios", scenarios, "-k", SELECT, "--out", tmp_path / "run", "-q")
    assert done.returncode == 3, text(done)
    assert "yaml_nodes=200000" in text(done)
    assert len(done.stderr.decode().strip().splitlines()) == 1


def test_yaml_alias_bomb_costs_little_memory():
    # Measured against the same process loading a tiny file, so the bound is what the bomb costs (an
    # unbounded loader spends close to a gigabyte on it), not what importing the kit costs.
    def peak_loading(document):
        return _peak_mb_of(
            "from host.suite.safe_yaml import load_yaml_text\n"
            f"try:\n    load_yaml_text({document!r}, 'w')\nexcept Exception as exc:\n    print(exc)"
        )

    baseline = peak_loading("waivers: []\n")
    peak = peak_loading(BOMB)
    assert peak - baseline < 50, f"{peak} MB with the bomb, {baseline} MB without"


def test_yaml_file_over_yaml_bytes_is_refused(tmp_path):
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text("waivers: []\n" + "#" * 5000 + "\n")
    done = cli("run", "--target", "local", "--waivers", waivers, "-k", SELECT, "--out", tmp_path / "run", "-q",
               env={"NPUCONF_LIMIT_YAML_BYTES": "4096"})
    assert done.returncode == 3, text(done)
    assert "yaml_bytes=4096" in text(done)


@contextlib.contextmanager
def small_disk(tmp_path, size="2m"):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount, leave):
    """Fill the disk but `leave` bytes."""
    free = shutil.disk_usage(mount).free
    with open(mount / "filler", "wb") as handle:
        handle.write(b"\0" * max(0, free - leave))
    return mount / "filler"


@pytest.mark.slow
def test_disk_full_during_a_run_is_exit_2_with_one_line_naming_the_path(tmp_path, state_env):
    with small_disk(tmp_path) as mount:
        _fill(mount, 64_000)
        run_dir = mount / "run"
        done = cli("run", "--target", "local", "-k", "requests or support", "--out", run_dir, "-q", env=state_env)
        assert done.returncode == 2, text(done)
        err = done.stderr.decode().strip().splitlines()
        assert "Traceback" not in text(done)
        assert err[-1].startswith("npuconf: cannot write ") and str(run_dir) in err[-1]
        assert "No space left on device" in err[-1]


@pytest.mark.slow
def test_resume_after_disk_full_repairs_the_torn_line_and_completes(tmp_path, state_env):
    with small_disk(tmp_path) as mount:
        filler = _fill(mount, 64_000)
        run_dir = mount / "run"
        done = cli("run", "--target", "local", "-k", "requests or support", "--out", run_dir, "-q", env=state_env)
        assert done.returncode == 2, text(done)
        data = (run_dir / "results.jsonl").read_bytes()
        filler.unlink()
        done = cli("run", "--resume", run_dir, "-q", env=state_env)
        assert done.returncode == 0, text(done)
        lines = (run_dir / "results.jsonl").read_bytes().splitlines()
        objects = [json.loads(line) for line in lines]  # every line whole: the torn one was cut
        plan = objects[0]
        results = [o for o in objects if o["kind"] == "result"]
        assert {r["scenario"] for r in results} == {s["id"] for s in plan["scenarios"]}
        assert all(r["verdict"] in ("PASS", "NOT_APPLICABLE") for r in results)
        assert len(data) > 0


def test_resume_reruns_errors_that_came_from_the_host(tmp_path, finished_run, state_env):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    objects = [o for o in records(run_dir) if o["kind"] != "end"]
    first = next(o for o in objects if o["kind"] == "result")
    first.update(verdict="ERROR", reason="device preparation failed: No space left on device", origin="host")
    write_records(run_dir / "results.jsonl", objects)
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 0, text(done)
    chosen = {}
    for record in records(run_dir, "result"):
        chosen[record["scenario"]] = record
    assert chosen[first["scenario"]]["verdict"] == "PASS"


def test_torn_last_line_is_cut_by_resume_and_nothing_else_changes(tmp_path, finished_run, state_env):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    objects = [o for o in records(run_dir) if o["kind"] != "end"]
    last = objects.pop()
    body = "".join(json.dumps(o) + "\n" for o in objects)
    (run_dir / "results.jsonl").write_text(body + json.dumps(last)[:40])
    done = cli("run", "--resume", run_dir, "-q", env=state_env)
    assert done.returncode == 0, text(done)
    data = (run_dir / "results.jsonl").read_text()
    assert data.startswith(body)
    assert all(json.loads(line) for line in data.splitlines())
    assert {r["scenario"] for r in records(run_dir, "result")} == {o["scenario"] for o in [*objects, last]
                                                                  if o["kind"] == "result"}


def test_output_memory_is_bounded_by_the_line_limit_not_the_line():
    """The splitter never holds more than the line limit, whatever the line's length (100 MB here)."""
    from host.probe import LineSplitter

    tracemalloc.start()
    splitter = LineSplitter(1 << 20)
    chunk = b"z" * (1 << 16)
    for _ in range(1600):
        assert splitter.feed(chunk) == []
    ((_, problem),) = splitter.feed(b"\n")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert problem is not None and "trace_line_bytes" in problem and str(1600 * (1 << 16)) in problem
    assert peak < 4 << 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


def test_hanging_logcat_costs_one_deadline_then_is_not_asked_again(monkeypatch):
    from host.targets.adb import AdbServerAddress, AdbTarget

    monkeypatch.setenv("NPUCONF_LIMIT_LOGCAT_SECONDS", "1")
    target = AdbTarget(AdbServerAddress("127.0.0.1", 1), "hung-device", serial="hung")
    calls = []

    def hung(command, timeout, cancel=None):
        calls.append(command)
        time.sleep(30)

    target.transport.shell_once = hung
    started = time.monotonic()
    first = target.failure_context("s1")
    assert time.monotonic() - started < 2.5
    assert len(first) == 1 and "logcat_seconds=1" in first[0]
    started = time.monotonic()
    assert [target.failure_context(f"s{i}") for i in range(2, 6)] == [()] * 4
    assert time.monotonic() - started < 0.1
    assert len(calls) == 1


def test_huge_file_new_in_a_scenario_is_refused_in_one_line_before_anything_runs(tmp_path):
    scenarios = tmp_path / "scenarios"
    (scenarios / "loading").mkdir(parents=True)
    (scenarios / "loading" / "huge.yaml").write_text(
        "scenarios:\n"
        "  - id: loading.huge_file\n"
        "    title: A 3 GiB probe file\n"
        "    clauses: [load-async]\n"
        "    steps:\n"
        "      - file_new: {file: f, size: 3221225472, seed: 1}\n"
    )
    started = time.monotonic()
    done = cli("run", "--target", "local", "--scenarios", scenarios, "--out", tmp_path / "run", "-q")
    output = text(done)
    assert done.returncode == 3, output
    assert len(done.stderr.decode().strip().splitlines()) == 1, output
    assert "loading.huge_file" in output and "steps[0].file_new.size" in output and "64 MiB" in output
    assert time.monotonic() - started < 30
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_file_new_steps_adding_up_past_the_scenario_limit_are_refused_before_anything_runs(tmp_path):
    """Issue 39: 48 `file_new` steps of 64 MiB each (each within its own bound) held 3.15 GB of host memory."""
    scenarios = tmp_path / "scenarios"
    (scenarios / "loading").mkdir(parents=True)
    steps = "".join(f"      - file_new: {{file: f{i}, size: 67108864, seed: {i}}}\n" for i in range(48))
    (scenarios / "loading" / "many.yaml").write_text(
        "scenarios:\n  - id: loading.many_files\n    title: 48 files of 64 MiB\n    clauses: [load-async]\n"
        f"    steps:\n{steps}"
    )
    started = time.monotonic()
    done = cli("run", "--target", "local", "--scenarios", scenarios, "--out", tmp_path / "run", "-q")
    output = text(done)
    assert done.returncode == 3, output
    assert len(done.stderr.decode().strip().splitlines()) == 1, output
    assert "loading.many_files" in output and "over limit scenario_file_bytes=67108864" in output
    assert time.monotonic() - started < 30
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_an_issupported_crash_in_the_discovery_fallback_never_turns_vnpu_control_off(standin, tmp_path):
    """Issue 39: isSupported answered the whole grid, then crashed in a fallback call, before the control
    probe: the run went on without vnpu control, and every scenario needing it was NOT_APPLICABLE."""
    build = standin({"npuconf.discovery": "crash_in_fallback"})
    done = cli("run", "--target", "local", "--build-dir", build, "-k", "preemption.unmapped_buffer_gets_onpreempt",
               "--out", tmp_path / "run", "-q", env={"NPUCONF_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 2, text(done)
    (result,) = records(tmp_path / "run", "result")
    assert result["verdict"] == "ERROR", result
    assert "the discovery ended before its vnpu control probe (signal (SIGSEGV))" in result["reason"]
    (device,) = records(tmp_path / "run", "device")
    assert device["info"]["discovery_failed"] is not None
