"""`npuconf bundle` / `npuconf verify`: a submission archive and its independent check."""

import gzip
import hashlib
import io
import json
import shlex
import tarfile
from pathlib import Path

import pytest
from junitparser import xunit2

from host.offline import BundleUnreadable, make_bundle, verify_bundle
from host.suite import checkout_tree_hashes, corpus_hash, model_hash
from tests.conftest import PRINTED_NPUCONF, npuconf
from tests.store.runs import D2_SCENARIO, PASS_SCENARIO, d2_run

FILES = {"results.jsonl", "junit.xml", "report.html", "summary.json", "atlas.json", "manifest.json"}


@pytest.fixture
def bundle(tmp_path):
    return make_bundle(d2_run(tmp_path / "run"), tmp_path / "submission.tar.gz").path


def members(path):
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def repack(path, contents, rehash=True):
    """Write `contents` as a bundle again; with `rehash`, the manifest lists the new file hashes."""
    contents = dict(contents)
    if rehash:
        manifest = json.loads(contents["manifest.json"])
        manifest["files"] = {n: hashlib.sha256(d).hexdigest() for n, d in contents.items() if n != "manifest.json"}
        contents["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in contents.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path


def edit_results(contents, edit):
    lines = [json.loads(line) for line in contents["results.jsonl"].decode().splitlines()]
    lines = edit(lines)
    return {**contents, "results.jsonl": "".join(json.dumps(r) + "\n" for r in lines).encode()}


def problems(report, kind):
    return [p.message for p in report.problems if p.kind == kind]


def test_manifest_lists_every_file_and_the_kit(bundle):
    contents = members(bundle)
    assert set(contents) == FILES
    manifest = json.loads(contents["manifest.json"])
    assert manifest["run_id"] == "20260301-120000-d2d2"
    assert manifest["files"] == {n: hashlib.sha256(d).hexdigest() for n, d in contents.items() if n != "manifest.json"}
    assert manifest["schema"] == 2 and "hashes" not in manifest
    assert manifest["tree_hashes"] == checkout_tree_hashes()
    assert set(manifest["tree_hashes"]) == {"kit", "model", "probe", "suite"}
    assert manifest["plan"]["corpus_hash"] == "c0ffee00c0ffee00"
    assert manifest["devices"] == {"phone-1": "acme/npu/phone-1:37/BUILD1/1:user/release-keys"}


def test_junit_in_the_bundle_names_versions_chapters_and_ids(bundle, tmp_path):
    path = tmp_path / "junit.xml"
    path.write_bytes(members(bundle)["junit.xml"])
    (suite,) = list(xunit2.JUnitXml.fromfile(str(path)))
    props = {p.name: p.value for p in suite.properties()}
    for key in ("kit_version", "model_hash", "vocabulary", "corpus_hash", "probe_version", "profile"):
        assert props[key], key
    assert props["profile"] == "published-37" and props["probe_version"] == "test"
    cases = {case.name: case.classname for case in suite}
    assert cases[D2_SCENARIO] == "requests"


def test_untouched_bundle_verifies(bundle):
    report = verify_bundle(bundle)
    assert report.problems == ()
    # Intact, every verdict re-derived (the NOT_APPLICABLE from the scenario's requirement and the
    # device's discovery trace); a run with a FAIL is no conformance claim: exit 2.
    assert (report.ok, report.exit_code, report.results, report.rejudged) == (True, 2, 3, 3)
    assert report.claim.level == "non-conformant"
    done = npuconf("verify", bundle, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("bundle verifies, but it is not a conformance claim: non-conformant: 1 FAIL")


def test_the_atlas_travels_in_the_bundle_and_an_edited_one_is_named(bundle, tmp_path):
    contents = members(bundle)
    atlas = json.loads(contents["atlas.json"])
    assert atlas["kind"] == "npuconf-atlas" and atlas["run_id"] == "20260301-120000-d2d2"
    atlas["entries"] = atlas["entries"][1:]
    report = verify_bundle(repack(tmp_path / "a.tar.gz", {**contents, "atlas.json": json.dumps(atlas).encode()}))
    # rendered again and compared byte for byte, as every report of a bundle is
    (said,) = problems(report, "report")
    assert said.startswith("atlas.json is not what this kit renders from results.jsonl (line 1: "), said
    # the one line quoted from its start on both sides, though it parts ten bytes in
    assert """(line 1: '{"schema": 1, "kind": "npuconf-atlas",""" in said
    assert """, '{"schema":1,"kind":"npuconf-atlas",""" in said  # and the rendering's
    # A bundle made before atlas.json travelled still verifies.
    older = {n: d for n, d in contents.items() if n != "atlas.json"}
    assert verify_bundle(repack(tmp_path / "b.tar.gz", older)).problems == ()


@pytest.mark.parametrize(
    "words", [("/opt/elsewhere/.venv/bin/npuconf",), ("/usr/local/bin/python3.12", "-m", "host")],
    ids=["script", "interpreter"],
)
def test_a_bundle_made_by_the_kit_installed_elsewhere_verifies_and_edits_beside_its_commands_do_not(
    tmp_path, monkeypatch, words
):
    """The replay and errata commands in summary.json and report.html name the npuconf that rendered them:
    the same kit installed elsewhere (and a run directory named relative to another working directory)
    still verifies, byte for byte but for those words; a verdict or a command's own options edited do not."""
    from reports.recorded import run_options

    made_in, verified_in = tmp_path / "lab", tmp_path / "verifier"
    made_in.mkdir()
    verified_in.mkdir()
    d2_run(made_in / "run")
    here = run_options.npuconf_words
    monkeypatch.chdir(made_in)
    monkeypatch.setattr(run_options, "npuconf_words", lambda: words)
    made = make_bundle(Path("run"), made_in / "elsewhere.tar.gz").path
    monkeypatch.setattr(run_options, "npuconf_words", here)  # verify renders naming this install
    monkeypatch.chdir(verified_in)
    contents = members(made)
    printed = " ".join(shlex.quote(w) for w in words).encode()
    assert contents["summary.json"].count(printed + b" run ") == 1  # the failure's replay line
    assert contents["report.html"].count(printed + b" run ") == 1 and printed + b" errata " in contents["report.html"]
    assert PRINTED_NPUCONF.encode() not in contents["summary.json"] + contents["report.html"]
    assert verify_bundle(made).problems == ()

    replay = f"--scenario {D2_SCENARIO}".encode()
    edits = {
        "a verdict in summary.json": ("summary.json", b'"verdict": "FAIL"', b'"verdict": "PASS"'),
        "a verdict in report.html": ("report.html", b">FAIL<", b">PASS<"),
        "a replay line's options": ("report.html", replay, replay.replace(b"requests.", b"support.")),
        "the install path beside a replay line": ("summary.json", printed + b" run", printed + b" run --help; run"),
    }
    for what, (name, old, new) in edits.items():
        assert old in contents[name], what
        edited = repack(tmp_path / "edited.tar.gz", {**contents, name: contents[name].replace(old, new, 1)})
        said = problems(verify_bundle(edited), "report")
        assert len(said) == 1 and said[0].startswith(f"{name} is not what this kit renders"), (what, said)


def test_commands_are_made_portable_the_same_whatever_pieces_the_bytes_come_in(bundle):
    """verify reads a member and renders the kit's copy in pieces cut in different places: the portable
    form of their commands must not depend on where the cuts fall (a command cut in two included)."""
    from host.offline.verify import _portable

    contents = members(bundle)
    portable = {"summary.json": [b'"replay": "npuconf run '], "report.html": [b"<code>npuconf run ",
                                                                             b"<code>npuconf errata /"]}
    for name, expected in portable.items():
        whole = b"".join(_portable(name, [contents[name]]))
        assert PRINTED_NPUCONF.encode() not in whole and all(e in whole for e in expected), name
        for size in (1, 5, 7, 4096):
            data = contents[name]
            out = list(_portable(name, [data[i : i + size] for i in range(0, len(data), size)]))
            assert all(out) and b"".join(out) == whole  # no empty piece: a reader takes one for the end
    # a span too long to be a command the kit printed is compared as it is, however it is cut
    long = b"<code>/x/npuconf run " + b"a" * (70 * 1024) + b"</code><code>/y/npuconf run b</code>"
    expected = long.replace(b"/y/npuconf", b"npuconf")
    for size in (1000, 1 << 20):
        assert b"".join(_portable("report.html", [long[i : i + size] for i in range(0, len(long), size)])) == expected


def test_edited_verdict_is_named(bundle, tmp_path):
    def to_pass(lines):
        for r in lines:
            if r.get("scenario") == D2_SCENARIO:
                r.update(verdict="PASS", divergence=None, reason="")
        return lines

    edited = edit_results(members(bundle), to_pass)
    # Edited in place: the file hash no longer matches the manifest.
    report = verify_bundle(repack(tmp_path / "a.tar.gz", edited, rehash=False))
    assert report.exit_code == 1
    assert any(m.startswith("results.jsonl: sha256") for m in problems(report, "file"))
    # Manifest rewritten too: re-deriving the verdict from the trace still catches it.
    report = verify_bundle(repack(tmp_path / "b.tar.gz", edited))
    assert problems(report, "file") == []
    assert problems(report, "verdict") == [
        f"{D2_SCENARIO} on phone-1: stored PASS, re-derived FAIL (the model judged the trace)"
    ]
    assert any(m.startswith("summary.json") for m in problems(report, "report"))
    done = npuconf("verify", tmp_path / "b.tar.gz", timeout=60)
    assert done.returncode == 1
    assert f"verdict: {D2_SCENARIO} on phone-1: stored PASS, re-derived FAIL" in done.stdout


def test_missing_and_duplicated_scenarios_are_named(bundle, tmp_path):
    contents = members(bundle)
    without = edit_results(contents, lambda lines: [r for r in lines if r.get("scenario") != PASS_SCENARIO])
    report = verify_bundle(repack(tmp_path / "missing.tar.gz", without))
    assert report.exit_code == 1
    assert problems(report, "coverage") == [f"{PASS_SCENARIO} on phone-1: planned but missing"]

    def duplicate(lines):
        return lines[:-1] + [r for r in lines if r.get("scenario") == PASS_SCENARIO] + lines[-1:]

    report = verify_bundle(repack(tmp_path / "dup.tar.gz", edit_results(contents, duplicate)))
    assert problems(report, "coverage") == [f"{PASS_SCENARIO} on phone-1: recorded 2 times (duplicated)"]


def test_other_kit_is_reported_as_such(bundle, tmp_path):
    contents = members(bundle)
    manifest = json.loads(contents["manifest.json"])
    manifest["tree_hashes"]["model"] = "0" * 64
    report = verify_bundle(
        repack(tmp_path / "kit.tar.gz", {**contents, "manifest.json": json.dumps(manifest).encode()})
    )
    assert report.exit_code == 1
    (message,) = problems(report, "kit")
    assert message.startswith("model tree hash 0000000000000000… differs from this checkout's")
    assert "made with another model" in message


def schema_1_manifest(manifest):
    """The manifest as the previous kit wrote it: schema 1, `hashes`, the suite part named `corpus`."""
    old = {k: v for k, v in manifest.items() if k != "tree_hashes"}
    parts = manifest["tree_hashes"]
    old["hashes"] = {"kit": parts["kit"], "model": parts["model"], "probe": parts["probe"], "corpus": parts["suite"]}
    old["schema"] = 1
    return old


def test_bundle_of_the_previous_kit_still_verifies_its_tree_hashes(bundle, tmp_path):
    contents = members(bundle)
    old = schema_1_manifest(json.loads(contents["manifest.json"]))
    intact = verify_bundle(repack(tmp_path / "old.tar.gz", {**contents, "manifest.json": json.dumps(old).encode()}))
    assert intact.problems == ()
    assert dict(intact.tree_hashes) == checkout_tree_hashes()
    old["hashes"]["corpus"] = "1" * 64
    changed = verify_bundle(repack(tmp_path / "old2.tar.gz", {**contents, "manifest.json": json.dumps(old).encode()}))
    assert [m.split("…")[0] for m in problems(changed, "kit")] == ["suite tree hash 1111111111111111"]


def test_verify_shows_the_corpus_and_model_hashes_the_reports_show(bundle):
    contents = members(bundle)
    summary = json.loads(contents["summary.json"])
    assert (summary["corpus_hash"], summary["model_hash"]) == ("c0ffee00c0ffee00", "deadbeefdeadbeef")
    junit = contents["junit.xml"].decode()
    assert '<property name="corpus_hash" value="c0ffee00c0ffee00"/>' in junit
    assert '<property name="model_hash" value="deadbeefdeadbeef"/>' in junit
    html = contents["report.html"].decode()
    assert '<td>corpus hash</td><td class="mono">c0ffee00c0ffee00</td>' in html
    assert '<td>model hash</td><td class="mono">deadbeefdeadbeef</td>' in html
    done = npuconf("verify", bundle, timeout=60)
    lines = done.stdout.splitlines()
    assert f"  corpus hash c0ffee00c0ffee00 (plan and reports; this checkout: {corpus_hash()})" in lines
    assert f"  model hash deadbeefdeadbeef (plan and reports; this checkout: {model_hash()})" in lines
    trees = checkout_tree_hashes()
    for part in ("kit", "model", "probe", "suite"):
        assert f"  {part} tree hash {trees[part][:16]} (manifest)" in lines
    # one name per hash: no bare "kit hash"/"probe hash" and no second "corpus hash"/"model hash" line
    named = [line.split(" hash ")[0].strip() for line in lines if " hash " in line]
    assert sorted(named) == sorted(["corpus", "model", "kit tree", "model tree", "probe tree", "suite tree"])


def test_extra_and_missing_files(bundle, tmp_path):
    contents = members(bundle)
    changed = {k: v for k, v in contents.items() if k != "junit.xml"}
    changed["notes.txt"] = b"hello"
    report = verify_bundle(repack(tmp_path / "files.tar.gz", changed, rehash=False))
    assert "junit.xml is listed in the manifest but missing from the bundle" in problems(report, "file")
    assert "notes.txt is in the bundle but not listed in the manifest" in problems(report, "file")


def test_unreadable_input_exits_3(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    with pytest.raises(BundleUnreadable):
        verify_bundle(junk)
    no_manifest = repack(tmp_path / "nomanifest.tar.gz", {"results.jsonl": b"{}\n"}, rehash=False)
    with pytest.raises(BundleUnreadable, match="manifest"):
        verify_bundle(no_manifest)
    for path in (junk, no_manifest, tmp_path / "absent.tar.gz"):
        done = npuconf("verify", path, timeout=60)
        assert done.returncode == 3, done.stdout + done.stderr
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_cli_bundle_default_name(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    done = npuconf("bundle", run_dir, timeout=60)
    assert done.returncode == 0, done.stderr
    archive = run_dir / "20260301-120000-d2d2.bundle.tar.gz"
    assert archive.is_file() and set(members(archive)) == FILES
    assert npuconf("bundle", tmp_path / "nothing", timeout=60).returncode == 3


def test_verify_of_a_run_directory_says_what_to_do_in_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    done = npuconf("verify", tmp_path / "run")
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 3 and len(lines) == 1, lines
    assert "Errno" not in lines[0] and "(is a directory)" in lines[0]
    assert f"`{PRINTED_NPUCONF} bundle {tmp_path / 'run'}` first" in lines[0]


@pytest.mark.parametrize("alias", ["./summary.json", "./results.jsonl", "summary.json"])
def test_member_names_are_exact_and_unique(bundle, tmp_path, alias):
    """Issue 26: `./summary.json` listed beside `summary.json` passed verify while `tar x` extracts the other copy."""
    contents = list(members(bundle).items())
    base = alias.removeprefix("./")
    forged = dict(contents)
    manifest = json.loads(forged["manifest.json"])
    other = b'{"forged": true}\n'
    if alias != base:
        manifest["files"][alias] = hashlib.sha256(other).hexdigest()
    forged["manifest.json"] = json.dumps(manifest).encode()
    path = tmp_path / "alias.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in [*forged.items(), (alias, other)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()))
    report = verify_bundle(path)
    assert not report.ok
    assert any(repr(alias) in m or "a second member" in m for m in problems(report, "file")), report.problems
    done = npuconf("verify", path, timeout=60)
    assert done.returncode == 1 and done.stdout.startswith("bundle rejected: file: "), done.stdout
    second = done.stdout.splitlines()[1 + len(report.problems) - 1]
    assert second.startswith("checked: ") and "rejected, so no claim" in second
    assert "claim non-conformant" not in done.stdout and "(exit " not in done.stdout


def _rebundled(bundle, tmp_path, edit, name):
    """The bundle's run edited, then bundled by the kit itself (the reports agree with the edit)."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    lines = [json.loads(line) for line in members(bundle)["results.jsonl"].decode().splitlines()]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in edit(lines)))
    return make_bundle(run_dir, tmp_path / f"{name}.tar.gz").path


def test_waivers_as_of_before_the_run_started_is_rejected(bundle, tmp_path):
    def backdate(lines):
        lines[0]["options"]["waivers_as_of"] = "2026-01-01"  # the run started 2026-03-01
        return lines

    def same_day(lines):
        lines[0]["options"]["waivers_as_of"] = "2026-03-01"
        return lines

    report = verify_bundle(_rebundled(bundle, tmp_path, backdate, "backdated"))
    assert problems(report, "plan") == [
        "options.waivers_as_of 2026-01-01 is earlier than the run's start 2026-03-01T12:00:00Z: waivers would be "
        "judged as of a day before the run"
    ]
    assert verify_bundle(_rebundled(bundle, tmp_path, same_day, "same-day")).problems == ()


def test_a_claimed_32_bit_abi_is_named_on_the_answer_line_and_the_unknowns_listed(bundle, tmp_path):
    def narrow(lines):
        lines[1]["info"]["abis"] = ["armeabi-v7a"]
        return lines

    path = _rebundled(bundle, tmp_path, narrow, "narrow")
    report = verify_bundle(path)
    assert report.ok and report.narrow_devices == ("phone-1",) and report.pointer_64_only > 0
    done = npuconf("verify", path, timeout=60)
    first = done.stdout.splitlines()[0]
    assert first.startswith("bundle verifies, but it is not a conformance claim: non-conformant")
    assert "for a claimed 32-bit ABI on phone-1" in first and "the device record's word" in first
    unknowns = [line for line in done.stdout.splitlines() if line.startswith("cannot know: ")]
    assert len(unknowns) == 3
    assert "hand-written trace" in unknowns[1] and "32-bit ABI" in unknowns[2]
    plain = npuconf("verify", bundle, timeout=60).stdout.splitlines()[0]
    assert "32-bit" not in plain
