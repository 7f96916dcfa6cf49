"""A bundle's results.jsonl cannot make verify hold unbounded device records (issue 26: verify took 60 s
and hundreds of MB on records for devices the plan never named)."""

import gzip
import hashlib
import io
import json
import tarfile

from host.offline import make_bundle
from tests.hostile.conftest import cli
from tests.store.runs import d2_run


def test_more_device_records_than_the_limit_are_refused_in_one_line(tmp_path):
    bundle = make_bundle(d2_run(tmp_path / "run"), tmp_path / "submission.tar.gz").path
    with tarfile.open(bundle, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    lines = members["results.jsonl"].decode().splitlines()
    ghosts = [json.dumps({"kind": "device", "device": f"ghost-{i}", "info": {}}) for i in range(40)]
    members["results.jsonl"] = ("\n".join([*lines[:2], *ghosts, *lines[2:]]) + "\n").encode()
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["results.jsonl"] = hashlib.sha256(members["results.jsonl"]).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    forged = tmp_path / "ghosts.tar.gz"
    forged.write_bytes(gzip.compress(buffer.getvalue()))
    done = cli("verify", forged, env={"NPUCONF_LIMIT_DEVICE_RECORDS": "30"})
    err = done.stderr.decode()
    assert done.returncode == 3, done.stdout.decode() + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "over limit device_records=30" in err
    within = cli("verify", forged, env={"NPUCONF_LIMIT_DEVICE_RECORDS": "41"})
    assert within.returncode == 1 and b"device_records" not in within.stdout + within.stderr
