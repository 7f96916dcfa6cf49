"""The verdict that cannot lie (issue "A verdict that cannot lie"): setup errors, claims, partial runs,
verify against edited bundles, replays that reproduce, Ctrl-C, signing, merging and waivers.

Every case runs the real CLI against real compiled libraries: the virtual NPU, and small defective
libraries built here that wrap it (RTLD_NEXT) to misbehave in one function.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from host.suite import load_catalogue, load_corpus
from reports.answers.claim import claim_of
from tests.conftest import PRINTED_NPUCONF, ROOT, npuconf, npuconf_interruptible, paste

LIBZ = Path("/lib/x86_64-linux-gnu/libz.so.1")
CORPUS_SIZE = len(load_corpus(known_clauses=load_catalogue().ids()))
VNPU_DIR = ROOT / "build" / "probe"

# isSupported answers the number of supported requests instead of 0 (or never returns, on request).
COUNTING_IS_SUPPORTED = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
typedef struct ANpuManager_AllocRequest ANpuManager_AllocRequest;
typedef int (*is_supported_fn)(ANpuManager_AllocRequest *const *, size_t, bool *);
int ANpuManager_isSupported(ANpuManager_AllocRequest *const *requests, size_t n, bool *out) {
    if (getenv("NPUCONF_TEST_DISCOVERY_HANG") != NULL) {
        for (;;) pause();
    }
    is_supported_fn real = (is_supported_fn)dlsym(RTLD_NEXT, "ANpuManager_isSupported");
    int ret = real(requests, n, out);
    if (ret != 0) return ret;
    int count = 0;
    for (size_t i = 0; i < n; i++) count += out[i] ? 1 : 0;
    return count;
}
"""

# unmap always fails with EINVAL: the published text requires 0 for a valid range.
FAILING_UNMAP = r"""
#include <errno.h>
#include <stddef.h>
typedef struct ANpuBuffer ANpuBuffer;
int ANpuBuffer_unmap(ANpuBuffer *buf, void *addr, size_t length) {
    (void)buf; (void)addr; (void)length;
    errno = EINVAL;
    return -1;
}
"""


def build_library(directory: Path, name: str, source: str, wrap_vnpu: bool = True) -> Path:
    """Compile `source` into lib<name>.so; with `wrap_vnpu` it depends on libvnpu (everything else)."""
    directory.mkdir(parents=True, exist_ok=True)
    c_file = directory / f"{name}.c"
    c_file.write_text(source)
    library = directory / f"lib{name}.so"
    command = ["cc", "-std=c11", "-shared", "-fPIC", "-o", str(library), str(c_file)]
    if wrap_vnpu:
        command += ["-Wl,--no-as-needed", f"-L{VNPU_DIR}", "-lvnpu", f"-Wl,-rpath,{VNPU_DIR}", "-ldl"]
    subprocess.run(command, check=True, capture_output=True)
    return library


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def write_results(run_dir: Path, records: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture(scope="module")
def aosp_run(tmp_path_factory, aosp_twin_run) -> Path:
    """The whole corpus on the virtual NPU with the aosp-2026 personality: FAILs under published-37 (a
    copy of the session's shared run, tests/conftest.py)."""
    assert first_line(aosp_twin_run.stdout).startswith("non-conformant:")
    return aosp_twin_run.copy(tmp_path_factory.mktemp("aosp") / "run")


# ---------------------------------------------------------------------------------------------
# setup errors: exit 3, one line, nothing written


def test_libz_empty_library_and_an_executable_are_setup_errors(tmp_path, probe_build):
    empty = build_library(tmp_path / "empty", "empty", "int npuconf_nothing_here(void) { return 0; }\n", False)
    for impl, expected in (
        (LIBZ, "exports none of the 18 functions"),
        (empty, "exports none of the 18 functions"),
        (Path("/bin/ls"), "cannot be loaded as a shared library"),
    ):
        out = tmp_path / f"out-{impl.name}"
        done = npuconf("run", "--target", "local", "--impl", impl, "-q", "--out", out)
        assert done.returncode == 3, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and str(impl) in lines[0], done.stderr
        assert not (out / "results.jsonl").exists()


def test_missing_cross_build_is_a_setup_error(tmp_path):
    build = tmp_path / "no-cross-build"
    done = npuconf(
        "run", "--target", "local", "--cross", "aarch64", "--build-dir", build, "-q", "--out", tmp_path / "o"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"npuconf: {build}: no cross build there; run `{PRINTED_NPUCONF} probe build --cross aarch64` first"
    ]
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_pytest_layer_bad_impl_is_one_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:xdist", "--npu-impl", str(LIBZ)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "--npu-impl" in done.stderr and "exports none of the 18 functions" in done.stderr
    assert done.stderr.count("exports none") == 1 and "Traceback" not in done.stderr


def test_default_adb_server_absent_does_not_blame_adb_server_option(tmp_path):
    env_port = "15999"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "host", "run", "--target", "adb", "--serial", "X", "-q", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT), ANDROID_ADB_SERVER_PORT=env_port),
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "--adb-server 127" not in done.stderr and "no adb server answers on" in done.stderr


# ---------------------------------------------------------------------------------------------
# discovery failure is ERROR: never exit 0


@pytest.mark.parametrize("hang", [False, True], ids=["isSupported-returns-a-count", "isSupported-hangs"])
def test_discovery_failure_never_exits_0(tmp_path, probe_build, hang):
    library = build_library(tmp_path / "lib", "counting", COUNTING_IS_SUPPORTED)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if hang:
        env["NPUCONF_TEST_DISCOVERY_HANG"] = "1"
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "host",
            "run",
            "--target",
            "local",
            "--impl",
            str(library),
            "-q",
            "--timeout-multiplier",
            "0.1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    # What needs the pairs is ERROR; what does not still runs: a count from isSupported is its FAIL
    # (exit 1), a hang its TIMEOUTs (exit 2). Never exit 0.
    records = [r for r in results(out) if r["kind"] == "result"]
    errors = [r for r in records if r["verdict"] == "ERROR"]
    assert errors and all(r["reason"].startswith("pair discovery failed") for r in errors)
    headline = first_line(done.stdout)
    data = summary(out)
    if hang:
        assert done.returncode == 2, done.stdout + done.stderr
        assert headline.startswith("incomplete: "), headline
        assert data["answer"] == "incomplete" and data["exit_code"] == 2
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert headline.startswith("non-conformant: "), headline
        failed = {r["divergence"]["clause"] for r in records if r["verdict"] == "FAIL"}
        assert "support-returns" in failed, failed
    device = next(r for r in results(out) if r["kind"] == "device")
    assert device["info"]["discovery_failed"].startswith("pair discovery failed")


# ---------------------------------------------------------------------------------------------
# claims


def test_full_run_on_the_virtual_npu_is_conformant_and_says_its_configuration(tmp_path, published_run):
    done, out = published_run, published_run.path  # the session's shared run (tests/conftest.py)
    assert done.returncode == 0, done.stdout + done.stderr
    assert first_line(done.stdout) == "conformant"
    assert "configuration: target local, impl vnpu, personality published, policy budget" in done.stdout
    claim = summary(out)["claim"]
    assert claim["level"] == "conformant" and claim["not_demonstrated"] == [] and claim["partial"] == []
    bundle = tmp_path / "run.tar.gz"
    assert npuconf("bundle", out, "--out", bundle).returncode == 0
    verified = npuconf("verify", bundle)
    assert verified.returncode == 0, verified.stdout
    assert first_line(verified.stdout).startswith("bundle verifies: conformant; on the submitter's word: target local")
    assert "cannot know: where the traces came from" in verified.stdout


def test_keyword_run_is_partial_in_summary_junit_report_and_bundle(tmp_path, probe_build):
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "-k", "cookie", "-q", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert first_line(done.stdout) == "partial run, not a conformance claim: filtered with -k cookie"
    data = summary(out)
    assert data["answer"] == "partial" and data["claim"]["configuration"]["filters"] == "-k cookie"
    assert '<property name="claim" value="partial"/>' in (out / "junit.xml").read_text()
    assert "partial run, not a conformance claim" in (out / "report.html").read_text()
    bundle = tmp_path / "k.tar.gz"
    assert npuconf("bundle", out, "--out", bundle).returncode == 0
    manifest = json.loads(subprocess.run(["tar", "-xzOf", bundle, "manifest.json"], capture_output=True).stdout)
    assert manifest["claim"]["level"] == "partial"
    verified = npuconf("verify", bundle)
    assert verified.returncode == 2, verified.stdout
    assert (
        first_line(verified.stdout) == "bundle verifies; partial run, not a conformance claim: filtered with -k cookie"
    )


def test_claim_names_clauses_not_demonstrated_and_old_runs_never_claim(tmp_path):
    from reports.recorded.kit import ClaimBasis, KitFacts
    from reports.recorded.results import load_results
    from tests.store.runs import CLAIM_BASIS, CORPUS, create_then_free_trace, device_info, judged_record, plan

    scenario = "requests.create_then_free"
    cited = {scenario: tuple(CORPUS[scenario].clauses)}
    # The claim takes the kit's facts, never the plan's: these tests hand it a small kit of their own.
    hash_ = CLAIM_BASIS["kit_corpus_hash"]
    testable = frozenset([*CORPUS[scenario].clauses, "alloc-async"])
    kit = KitFacts(cited, ClaimBasis(hash_, testable, frozenset(), frozenset()))
    info = device_info("phone-1")
    record = judged_record("phone-1", info, scenario, create_then_free_trace(), "published-37", "2026-01-01T00:00:01Z")
    run_plan = plan("r1", "2026-01-01T00:00:00Z", ["phone-1"], [scenario], claim_basis=CLAIM_BASIS, corpus_hash=hash_)
    write_results(tmp_path / "a", [run_plan, {"kind": "device", "device": "phone-1", "info": info}, record])
    claim = claim_of(load_results(tmp_path / "a", kit))
    assert (claim.level, int(claim.exit_code)) == ("incomplete", 2)
    # alloc-async: no scenario cites it; req-free-destroys: cited, but its trace frees a request holding
    # no cookie, so no deleter shows the request destroyed.
    assert claim.headline.startswith("incomplete: 2 required clauses not demonstrated on phone-1"), claim.headline
    assert sorted((g.device, g.why, g.clauses) for g in claim.gaps) == [
        ("phone-1", "no planned scenario cites it", ("alloc-async",)),
        ("phone-1", "passed without showing it (a refusal or failure the text allows, where the scenario needed a "
         "success) (1 scenario)", ("req-free-destroys",)),
    ]

    # A record citing the missing clause itself earns nothing: the clauses come from the kit.
    forged = dict(record, clauses=[*record["clauses"], "alloc-async"])
    write_results(tmp_path / "f", [run_plan, {"kind": "device", "device": "phone-1", "info": info}, forged])
    assert claim_of(load_results(tmp_path / "f", kit)).gaps == claim.gaps
    # Nor does a record of a scenario the kit did not release that says it demonstrated the clause.
    made_up = dict(record, scenario="requests.made_up", demonstrated=["alloc-async", "req-free-destroys"])
    write_results(tmp_path / "m", [run_plan, {"kind": "device", "device": "phone-1", "info": info}, record, made_up])
    assert claim_of(load_results(tmp_path / "m", kit)).gaps == claim.gaps

    # The same run from an older kit (no claim basis in the plan): never conformant.
    old_plan = {k: v for k, v in run_plan.items() if k != "claim_basis"}
    write_results(tmp_path / "b", [old_plan, {"kind": "device", "device": "phone-1", "info": info}, record])
    claim = claim_of(load_results(tmp_path / "b", kit))
    assert claim.level == "incomplete" and "no claim basis" in claim.headline

    # A device without the feature and without pairs: judged on what applies without buffers.
    bare = device_info("phone-2", npu_feature=False, supported_pairs=[])
    record2 = judged_record("phone-2", bare, scenario, create_then_free_trace(), "published-37", "2026-01-01T00:00:01Z")
    # (judged on the clauses its trace demonstrates: req-create-returns-request)
    shown = frozenset(record2["demonstrated"]) & frozenset(CORPUS[scenario].clauses)
    assert shown == {"req-create-returns-request"}
    bare_kit = KitFacts(cited, ClaimBasis(hash_, testable, shown, frozenset()))
    plan2 = plan("r2", "2026-01-01T00:00:00Z", ["phone-2"], [scenario], claim_basis=CLAIM_BASIS, corpus_hash=hash_)
    write_results(tmp_path / "c", [plan2, {"kind": "device", "device": "phone-2", "info": bare}, record2])
    claim = claim_of(load_results(tmp_path / "c", bare_kit))
    assert (claim.level, int(claim.exit_code), claim.headline) == (
        "conformant without NPU buffers",
        0,
        "conformant without NPU buffers",
    )

    # A clause only 64-bit pointers can exercise is not asked of a 32-bit device, and only of it.
    wide = frozenset([*shown, "cookie-raw-integer"])
    wide_kit = KitFacts(cited, ClaimBasis(hash_, wide, frozenset(), frozenset({"cookie-raw-integer"})))
    for bits, level in ((32, "conformant"), (64, "incomplete")):
        narrow = device_info("phone-3") | {"pointer_bits": bits}
        record3 = judged_record("phone-3", narrow, scenario, create_then_free_trace(), "published-37", "2026-01-01")
        plan3 = plan("r3", "2026-01-01T00:00:00Z", ["phone-3"], [scenario], claim_basis=CLAIM_BASIS, corpus_hash=hash_)
        write_results(tmp_path / f"p{bits}", [plan3, {"kind": "device", "device": "phone-3", "info": narrow}, record3])
        claim = claim_of(load_results(tmp_path / f"p{bits}", wide_kit))
        assert claim.level == level, (bits, claim.headline)


# ---------------------------------------------------------------------------------------------
# verify rejects edited bundles with a one-line reason


def _edited_bundle(source: Path, work: Path, edit: str) -> Path:
    """Edit the run's results as a cheat would, then regenerate the reports and bundle with the kit."""
    records = results(source)
    failing = {r["scenario"] for r in records if r.get("kind") == "result" and r["verdict"] in ("FAIL", "CRASH")}
    assert failing
    edited = []
    for record in records:
        if record.get("kind") == "result" and record["scenario"] in failing:
            if edit == "not-applicable":
                record.update(verdict="NOT_APPLICABLE", reason="the device supports no pair", divergence=None)
            elif edit == "waived":
                record.update(verdict="WAIVED", waiver="b/42: known issue")
            elif edit == "removed":
                continue
        if record.get("kind") == "plan" and edit == "removed":
            record["scenarios"] = [s for s in record["scenarios"] if s["id"] not in failing]
        if record.get("kind") == "end":
            record.pop("exit_code", None)
        edited.append(record)
    write_results(work, edited)
    bundle = work.with_suffix(".tar.gz")
    made = npuconf("bundle", work, "--out", bundle)
    assert made.returncode == 0, made.stderr
    return bundle


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ("not-applicable", "stored NOT_APPLICABLE, re-derived "),
        ("waived", "stored WAIVED, re-derived FAIL"),
        ("removed", rf"the plan names this kit's full corpus but lacks \d+ of its {CORPUS_SIZE} scenarios"),
    ],
)
def test_verify_rejects_edited_bundles(aosp_run, tmp_path, edit, reason):
    bundle = _edited_bundle(aosp_run, tmp_path / edit, edit)
    done = npuconf("verify", bundle)
    assert done.returncode == 1, done.stdout
    line = first_line(done.stdout)
    assert line.startswith("bundle rejected: ") and re.search(reason, line), line


def test_verify_of_a_run_rejudged_under_aosp_2026_is_no_claim(aosp_run, tmp_path):
    rejudged = tmp_path / "rejudged"
    done = npuconf("rejudge", aosp_run, "--profile", "aosp-2026", "--out", rejudged)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "partial run, not a conformance claim: profile aosp-2026" in done.stdout
    bundle = tmp_path / "rejudged.tar.gz"
    assert npuconf("bundle", rejudged, "--out", bundle).returncode == 0
    verified = npuconf("verify", bundle)
    assert verified.returncode == 2, verified.stdout
    assert first_line(verified.stdout) == (
        "bundle verifies; partial run, not a conformance claim: profile aosp-2026 (only published-37 is normative)"
    )


def test_verify_applies_waivers_only_from_the_command_line(aosp_run, tmp_path):
    records = results(aosp_run)
    fail = next(r for r in records if r.get("kind") == "result" and r["verdict"] == "FAIL")
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(
        "waivers:\n"
        f"  - scenario: {fail['scenario']}\n    device: '*'\n    reason: known on this build\n    expires: 2999-12-31\n"
    )
    run = tmp_path / "waived-run"
    done = npuconf(
        "run",
        "--target",
        "local",
        "--personality",
        "aosp-2026",
        "-k",
        fail["scenario"],
        "--waivers",
        waivers,
        "-q",
        "--out",
        run,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = tmp_path / "waived.tar.gz"
    assert npuconf("bundle", run, "--out", bundle).returncode == 0
    assert first_line(npuconf("verify", bundle).stdout).startswith("bundle rejected: verdict: ")
    with_file = npuconf("verify", bundle, "--waivers", waivers)
    assert with_file.returncode == 2 and first_line(with_file.stdout).startswith("bundle verifies; partial run")


def _plan_dated(run: Path, as_of: str) -> None:
    """Rewrites the day the run recorded for its waivers, and every date of the run with it, as a run made
    on that day would have them (verify checks the dates against each other and the traces' clock)."""
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    plan = records[0]
    assert plan["kind"] == "plan" and plan["options"]["waivers_as_of"]
    plan["options"]["waivers_as_of"] = as_of
    moved = dt.datetime.fromisoformat(f"{as_of}T12:00:00.000+00:00") - dt.datetime.fromisoformat(plan["started"])
    for record in records:
        for field in ("started", "finished"):
            if isinstance(record.get(field), str):
                when = dt.datetime.fromisoformat(record[field]) + moved
                record[field] = when.isoformat(timespec="milliseconds")
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_verify_applies_waivers_as_of_the_day_the_run_applied_them(aosp_run, tmp_path):
    fail = next(r for r in results(aosp_run) if r.get("kind") == "result" and r["verdict"] == "FAIL")
    waiver = f"waivers:\n  - scenario: {fail['scenario']}\n    device: '*'\n    reason: known\n    expires: {{}}\n"
    long_lived, expired_now = tmp_path / "long.yaml", tmp_path / "expired.yaml"
    long_lived.write_text(waiver.format("2999-12-31"))
    expired_now.write_text(waiver.format("2021-01-01"))  # valid on 2020-06-01, expired today
    run = tmp_path / "waived-run"
    done = npuconf("run", "--target", "local", "--personality", "aosp-2026", "-k", fail["scenario"],
                   "--waivers", long_lived, "-q", "--out", run)
    assert done.returncode == 0, done.stdout + done.stderr
    for as_of, verifies in (("2020-06-01", True), ("2022-06-01", False)):
        _plan_dated(run, as_of)
        bundle = tmp_path / f"waived-{as_of}.tar.gz"
        assert npuconf("bundle", run, "--out", bundle).returncode == 0
        checked = npuconf("verify", bundle, "--waivers", expired_now)
        if verifies:
            assert first_line(checked.stdout).startswith("bundle verifies; partial run"), checked.stdout
        else:
            assert first_line(checked.stdout).startswith("bundle rejected: verdict: "), checked.stdout


# ---------------------------------------------------------------------------------------------
# replays reproduce


def _replay(replay: str, out: Path) -> subprocess.CompletedProcess[str]:
    assert shlex.split(replay)[:2] == [shlex.split(PRINTED_NPUCONF)[0], "run"]
    return paste(f"{replay} -q --out {shlex.quote(str(out))}", out.parent)


def test_replay_of_an_aosp_personality_fail_reproduces_it(aosp_run, tmp_path):
    failure = next(f for f in summary(aosp_run)["failures"] if f["verdict"] == "FAIL")
    assert "--personality aosp-2026" in failure["replay"]
    assert failure["replay"] in (aosp_run / "report.html").read_text()
    done = _replay(failure["replay"], tmp_path / "replay")
    assert done.returncode == 1, done.stdout + done.stderr
    replayed = {(f["scenario"], f["verdict"]) for f in summary(tmp_path / "replay")["failures"]}
    assert (failure["scenario"], "FAIL") in replayed


def test_replay_of_an_impl_fail_reproduces_it(tmp_path, probe_build):
    library = build_library(tmp_path / "lib", "badunmap", FAILING_UNMAP)
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--impl", library, "-k", "mapping", "-q", "--out", out)
    assert done.returncode == 1, done.stdout + done.stderr
    failure = next(f for f in summary(out)["failures"] if f["verdict"] == "FAIL")
    assert f"--impl {library}" in failure["replay"]
    again = _replay(failure["replay"], tmp_path / "replay")
    assert again.returncode == 1, again.stdout + again.stderr
    assert (failure["scenario"], "FAIL") in {
        (f["scenario"], f["verdict"]) for f in summary(tmp_path / "replay")["failures"]
    }


# ---------------------------------------------------------------------------------------------
# Ctrl-C


def _interrupted_run(out: Path, when) -> subprocess.CompletedProcess[str]:
    process = npuconf_interruptible("run", "--target", "local", "--out", out)
    deadline = time.monotonic() + 120
    while not when() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_ctrl_c_during_a_run_keeps_results_and_names_the_resume_command(tmp_path, probe_build):
    out = tmp_path / "run"
    results_file = out / "results.jsonl"

    def some_results() -> bool:
        return results_file.is_file() and results_file.read_text().count('"kind":"result"') >= 20

    done = _interrupted_run(out, some_results)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr
    message = done.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert message.startswith("npuconf: interrupted: ") and f" of {CORPUS_SIZE} results kept in " in message
    hint = f"{PRINTED_NPUCONF} run --resume {out}"
    assert message.endswith(f"continue with: {hint}")
    assert not any(r.get("kind") == "end" for r in results(out))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = paste(f"{hint} -q", elsewhere)  # as printed, from another directory, the venv not on PATH
    assert resumed.returncode == 0 and first_line(resumed.stdout) == "conformant", resumed.stdout + resumed.stderr


def test_ctrl_c_during_start_up_says_nothing_was_written_or_leaves_a_resumable_directory(tmp_path, probe_build):
    out = tmp_path / "run"
    started = time.monotonic()
    done = _interrupted_run(out, lambda: time.monotonic() - started > 1.0)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    message = done.stderr.replace("\r", "\n").strip().splitlines()[-1]
    if (out / "results.jsonl").is_file():
        assert "--resume" in message
        assert npuconf("run", "--resume", out, "-q").returncode == 0
    else:
        assert "nothing was" in message, message


# ---------------------------------------------------------------------------------------------
# signing, merging, waivers


def test_signed_bundle_verifies_only_with_its_key(tmp_path, probe_build):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    def key_pair(name: str) -> tuple[Path, Path]:
        key = Ed25519PrivateKey.generate()
        private, public = tmp_path / f"{name}.pem", tmp_path / f"{name}.pub"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        return private, public

    mine, mine_pub = key_pair("mine")
    _, other_pub = key_pair("other")
    out = tmp_path / "run"
    assert npuconf("run", "--target", "local", "-k", "cookie", "-q", "--out", out).returncode == 0
    bundle = tmp_path / "signed.tar.gz"
    assert npuconf("bundle", out, "--out", bundle, "--sign", mine).returncode == 0
    good = npuconf("verify", bundle, "--trusted-key", mine_pub)
    assert good.returncode == 2 and "signed by the trusted key SHA256:" in good.stdout, good.stdout
    bad = npuconf("verify", bundle, "--trusted-key", other_pub)
    assert bad.returncode == 1 and first_line(bad.stdout).startswith("bundle rejected: signature: signed with key")
    unsigned = tmp_path / "unsigned.tar.gz"
    assert npuconf("bundle", out, "--out", unsigned).returncode == 0
    none = npuconf("verify", unsigned, "--trusted-key", mine_pub)
    assert none.returncode == 1 and "the bundle is not signed" in first_line(none.stdout)


def test_merge_refuses_two_personalities_of_one_device(tmp_path, probe_build):
    first, second = tmp_path / "published", tmp_path / "aosp"
    assert npuconf("run", "--target", "local", "-k", "cookie", "-q", "--out", first).returncode == 0
    npuconf("run", "--target", "local", "-k", "cookie", "--personality", "aosp-2026", "-q", "--out", second)
    done = npuconf("report", first, second, "--merge", tmp_path / "merged")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "device local: device personality is 'published'" in done.stderr
    assert "one column holds one configuration" in done.stderr
    fingerprints = {
        next(r for r in results(d) if r["kind"] == "device")["info"]["fingerprint"].split(":")[0]
        for d in (first, second)
    }
    assert fingerprints == {"npuconf/vnpu/published/budget", "npuconf/vnpu/aosp-2026/budget"}


def test_waiver_with_unknown_ids_is_a_usage_error_and_expired_waivers_are_not_applied(aosp_run, tmp_path):
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(
        "waivers:\n  - clause: no-such-clause\n    device: '*'\n    reason: r\n    expires: 2999-01-01\n"
    )
    done = npuconf("run", "--target", "local", "--waivers", unknown, "-q", "--out", tmp_path / "u")
    assert done.returncode == 3 and "waivers[0].clause 'no-such-clause': not a clause ID" in done.stderr
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        "waivers:\n  - scenario: cookies.no_such_*\n    device: '*'\n    reason: r\n    expires: 2999-01-01\n"
    )
    done = npuconf("run", "--target", "local", "--waivers", typo, "-q", "--out", tmp_path / "t")
    assert done.returncode == 3 and "matches no scenario ID" in done.stderr

    fail = next(r for r in results(aosp_run) if r.get("kind") == "result" and r["verdict"] == "FAIL")
    expired = tmp_path / "expired.yaml"
    expired.write_text(
        f"waivers:\n  - scenario: {fail['scenario']}\n    device: '*'\n    reason: old\n    expires: 2020-01-01\n"
    )
    out = tmp_path / "e"
    done = npuconf(
        "run",
        "--target",
        "local",
        "--personality",
        "aosp-2026",
        "-k",
        fail["scenario"],
        "--waivers",
        expired,
        "-q",
        "--out",
        out,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"waiver for scenario {fail['scenario']} on * expired on 2020-01-01 and is not applied" in done.stderr
    assert summary(out)["counts"]["WAIVED"] == 0


def test_old_results_stay_readable(tmp_path):
    """A results.jsonl of an older kit (no claim basis, no discovery trace) loads and never claims."""
    from reports.recorded.results import load_results

    plan = {
        "kind": "plan",
        "schema": 1,
        "run_id": "old",
        "profile": "published-37",
        "target": "local",
        "devices": ["local"],
        "scenarios": [{"id": "requests.create_then_free", "clauses": ["req-free"]}],
        "options": {},
    }
    result = {"kind": "result", "device": "local", "scenario": "requests.create_then_free", "verdict": "PASS"}
    write_results(tmp_path / "old", [plan, result, {"kind": "end", "exit_code": 0}])
    run = load_results(tmp_path / "old")
    assert claim_of(run).level == "incomplete" and int(claim_of(run).exit_code) == 2


# ---------------------------------------------------------------------------------------------
# bounded retries of legally refused allocations


def test_an_enomem_the_scenario_forced_is_not_a_refusal():
    """`vnpu fail_next=ENOMEM` makes the next onAlloc ENOMEM on purpose: that is what the scenario tests, so
    it does not make the scenario run again (one forced answer per accepted command; a further ENOMEM does)."""
    from host.run import allocation_refused
    from reference_model.caps import DeviceCaps

    def trace(*answers: str | int, command_ret: int = 0) -> list[str]:
        events: list[dict[str, object]] = [
            {"ev": "call", "step": 0, "op": "vnpu", "th": "main", "args": {"command": "fail_next=ENOMEM"}, "t": 1},
            {"ev": "ret", "step": 0, "op": "vnpu", "th": "main", "ret": command_ret, "errno": None, "t": 2},
        ]
        events += [{"ev": "cb", "kind": "alloc", "cookie": None, "error": a, "buf": "B1" if a == 0 else None,
                    "thread": "other", "th": "w1", "t": 3 + i} for i, a in enumerate(answers)]
        return [json.dumps(e, separators=(",", ":")) for e in events]

    caps = DeviceCaps(supported_pairs=frozenset({(0, 1)}))
    assert not allocation_refused(trace("ENOMEM", 0), caps)
    assert allocation_refused(trace("ENOMEM", "ENOMEM"), caps)
    assert allocation_refused(trace("ENOMEM", command_ret=-1), caps)


@pytest.mark.parametrize(("refusals", "refused"), [(2, False), (10, True)])
def test_legally_refused_allocations_are_retried_a_bounded_recorded_number_of_times(
    tmp_path, probe_build, refusals, refused
):
    """An implementation without a declared capacity answers ENOMEM to the first `refusals`
    allocations (allowed for any request): the scenario runs again, at most MAX_ATTEMPTS times."""
    from host.run import MAX_ATTEMPTS

    source = (Path(__file__).parent / "data" / "refuse_allocations.c").read_text()
    library = build_library(tmp_path / "lib", "refuse", source)
    out = tmp_path / "run"
    scenario = "allocation.single_supported_request_succeeds"
    command = [sys.executable, "-m", "host", "run", "--target", "local", "--impl", str(library)]
    done = subprocess.run(
        [*command, "-k", scenario, "-q", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            NPUCONF_TEST_REFUSE_FILE=str(tmp_path / "refusals"),
            NPUCONF_TEST_REFUSE_COUNT=str(refusals),
        ),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = next(r for r in results(out) if r["kind"] == "result")
    assert record["verdict"] == "PASS" and record["attempts"] == MAX_ATTEMPTS == 3
    assert record.get("allocations_refused", False) is refused

    # In a run that claims, a refused PASS demonstrates nothing of what followed its allocations: the gap says why.
    from host.suite import kit_facts
    from reports.recorded.kit import KitFacts
    from reports.recorded.results import RESULTS_NAME, load_results

    records = results(out)
    plan = next(r for r in records if r["kind"] == "plan")
    plan["options"]["keyword"] = None
    # A kit whose corpus is this one scenario: the claim then rests on it alone.
    kit = kit_facts()
    one = KitFacts(
        {scenario: kit.clauses_of(scenario)},
        replace(kit.basis, device_testable=frozenset(record["clauses"]), pointer_64_only=frozenset(),
                virtual_only=frozenset()),
    )
    write_results(tmp_path / "unfiltered", records)
    claim = claim_of(load_results(tmp_path / "unfiltered" / RESULTS_NAME, one))
    if refused:
        assert claim.level == "incomplete"
        assert claim.gaps[0].why == (
            "the device refused the allocations (ENOMEM) in 3 attempts, which the text allows, so nothing after "
            "them ran (1 scenario)"
        )
    else:
        assert claim.level == "conformant"
