"""A bundle cannot make verify hold unbounded device records (issue 26: verify took 60 s and hundreds of
MB on records for devices the plan never named), and its junit.xml cannot expand entities: verify never
parses it, it compares it with the junit.xml it renders (docs/hostile.md)."""

import gzip
import hashlib
import io
import json
import sys
import tarfile
import time

from host.offline import make_bundle
from host.offline.verify import verify_bundle
from tests.hostile.conftest import ROOT, cli
from tests.store.runs import d2_run


def _rebundled(tmp_path, name, edit):
    """A bundle of a two-device run with `edit(members)` applied and the manifest's hashes made to match."""
    bundle = make_bundle(d2_run(tmp_path / "run"), tmp_path / "submission.tar.gz").path
    with tarfile.open(bundle, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    edit(members)
    manifest = json.loads(members["manifest.json"])
    for member in manifest["files"]:
        manifest["files"][member] = hashlib.sha256(members[member]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    forged = tmp_path / name
    forged.write_bytes(gzip.compress(buffer.getvalue()))
    return forged


def _ghosts(members):
    lines = members["results.jsonl"].decode().splitlines()
    ghosts = [json.dumps({"kind": "device", "device": f"ghost-{i}", "info": {}}) for i in range(40)]
    members["results.jsonl"] = ("\n".join([*lines[:2], *ghosts, *lines[2:]]) + "\n").encode()


def test_more_device_records_than_the_limit_are_refused_in_one_line(tmp_path):
    forged = _rebundled(tmp_path, "ghosts.tar.gz", _ghosts)
    done = cli("verify", forged, env={"NPUCONF_LIMIT_DEVICE_RECORDS": "30"})
    err = done.stderr.decode()
    assert done.returncode == 3, done.stdout.decode() + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "over limit device_records=30" in err
    # named as what the submitter sent: the bundle's member, not a temporary copy that is gone
    assert f"{forged}: member results.jsonl: " in err and "npuconf-verify-" not in err, err
    within = cli("verify", forged, env={"NPUCONF_LIMIT_DEVICE_RECORDS": "41"})
    assert within.returncode == 1 and b"device_records" not in within.stdout + within.stderr


BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(8))
    + ']><testsuites><testsuite name="&i;"/></testsuites>'
)  # 10^9 bytes once expanded


def test_junit_xml_entity_expansion_is_refused(tmp_path):
    """verify never parses a bundle's junit.xml: it renders junit.xml again from results.jsonl and compares
    the bytes (issue 39), so an entity bomb is refused as an edit, unexpanded."""

    def bomb(members):
        members["junit.xml"] = BOMB.encode()

    started = time.monotonic()
    done = cli("verify", _rebundled(tmp_path, "bomb.tar.gz", bomb), timeout=60)
    said = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1, said
    assert "junit.xml is not what this kit renders from results.jsonl (line 1:" in said, said
    assert time.monotonic() - started < 20


# What verify does per record lives here (the corpus and catalogue it loads once are in host/suite).
COUNTED = tuple(f"{ROOT / part}/" for part in ("floor", "reports", "host/offline", "host/run", "reference_model"))


def _lines_run(bundle):
    """How many lines of the kit's own code `verify` executes on `bundle`: an operation count, no clock."""
    executed = [0]

    def local(frame, event, arg):
        executed[0] += event == "line"
        return local

    def on_call(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(COUNTED) else None

    sys.settrace(on_call)
    try:
        verify_bundle(bundle)
    finally:
        sys.settrace(None)
    return executed[0]


def _with_devices(count):
    """`count` more devices: planned with a result each, plus as many unplanned with records and results."""

    def edit(members):
        lines = members["results.jsonl"].decode().splitlines()
        plan = json.loads(lines[0])
        planned = [f"planned-{i}" for i in range(count)]
        plan["devices"] = [*plan["devices"], *planned]
        result = next(json.loads(line) for line in lines if json.loads(line)["kind"] == "result")
        extra = []
        for i, name in enumerate(planned):
            ghost = f"ghost-{i}"
            for device in (name, ghost):
                extra.append(json.dumps({"kind": "device", "device": device, "info": {"fingerprint": device}}))
                extra.append(json.dumps(dict(result, device=device)))
        members["results.jsonl"] = ("\n".join([json.dumps(plan), *lines[1:], *extra]) + "\n").encode()

    return edit


def test_verify_work_grows_linearly_with_the_devices_in_a_bundle(tmp_path):
    counts = [
        _lines_run(_rebundled(tmp_path / str(n), "devices.tar.gz", _with_devices(n))) for n in (100, 200, 400)
    ]
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    # linear: doubling the added devices doubles the added work (exactly 2.0 today); an injected scan of the
    # devices seen so far, per device record, gives 2.6 here
    assert first > 0 and second <= 2.3 * first, counts


def test_more_result_records_than_the_limit_are_refused_in_one_line(tmp_path):
    """Issue 39: tiny records for scenarios the plan never named made every report render each of them."""

    def flood(members):
        lines = members["results.jsonl"].decode().splitlines()
        result = next(json.loads(line) for line in lines if json.loads(line)["kind"] == "result")
        extra = [json.dumps(dict(result, scenario=f"x.s{i}", trace=[])) for i in range(60)]
        members["results.jsonl"] = ("\n".join([*lines, *extra]) + "\n").encode()

    forged = _rebundled(tmp_path, "flood.tar.gz", flood)
    done = cli("verify", forged, env={"NPUCONF_LIMIT_RESULT_RECORDS": "50"})
    err = done.stderr.decode()
    assert done.returncode == 3, done.stdout.decode() + err
    assert "over limit result_records=50" in err and len(err.strip().splitlines()) == 1
