"""The results store: schema, idempotent import, recording by `npuconf run`."""

import json
import sqlite3

import pytest

from reports.store import STORE_SCHEMA, StoreError, import_runs, open_store
from tests.conftest import npuconf
from tests.store.runs import d2_run, simple_run, write

A, B = "requests.create_then_free", "requests.default_size_is_zero"


def rows(store, query):
    with sqlite3.connect(store) as conn:
        return conn.execute(query).fetchall()


def test_import_fills_every_table(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    store = tmp_path / "npuconf.sqlite"
    (outcome,) = import_runs(store, [run_dir], kit_hash="k" * 64)
    assert (outcome.status, outcome.run_id, outcome.results) == ("added", "20260301-120000-d2d2", 3)
    assert rows(store, "PRAGMA user_version") == [(STORE_SCHEMA,)]
    (run,) = rows(store, "SELECT run_id, started, profile, kit_hash, model_hash, corpus_hash, target, answer FROM runs")
    assert run == (
        "20260301-120000-d2d2",
        "2026-03-01T12:00:00Z",
        "published-37",
        "k" * 64,
        "deadbeefdeadbeef",
        "c0ffee00c0ffee00",
        "adb",
        "non-conformant",
    )
    fingerprint = "acme/npu/phone-1:37/BUILD1/1:user/release-keys"
    assert rows(store, "SELECT serial, fingerprint, model, sdk FROM devices") == [
        ("phone-1", fingerprint, "Acme NPU phone", "37")
    ]
    assert rows(store, "SELECT fingerprint FROM builds") == [(fingerprint,)]
    verdicts = rows(
        store, "SELECT scenario, verdict, discrepancy, fingerprint, clauses FROM verdicts ORDER BY scenario"
    )
    by_scenario = {v[0]: v for v in verdicts}
    d2 = by_scenario["requests.default_device_is_rejected_with_einval"]
    assert d2[1:4] == ("FAIL", "D2", fingerprint)
    assert "req-device-negative-einval" in json.loads(d2[4])
    clause_rows = rows(store, "SELECT count(*) FROM verdict_clauses WHERE clause = 'req-device-negative-einval'")
    assert clause_rows == [(1,)]


def test_import_is_idempotent_by_run_id(tmp_path):
    run_dir = simple_run(
        tmp_path / "run", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "PASS", ("p1", B): "FAIL"}
    )
    store = tmp_path / "store.sqlite"
    assert [o.status for o in import_runs(store, [run_dir])] == ["added"]
    snapshot = rows(store, "SELECT * FROM verdicts ORDER BY scenario")
    assert [o.status for o in import_runs(store, [run_dir, run_dir])] == ["unchanged", "unchanged"]
    assert rows(store, "SELECT * FROM verdicts ORDER BY scenario") == snapshot
    assert rows(store, "SELECT count(*) FROM runs") == [(1,)]

    # The same run id with changed results (a resumed run) replaces its rows.
    simple_run(run_dir, "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "PASS", ("p1", B): "PASS"})
    assert [o.status for o in import_runs(store, [run_dir])] == ["updated"]
    assert rows(store, "SELECT scenario, verdict FROM verdicts ORDER BY scenario") == [(A, "PASS"), (B, "PASS")]
    assert rows(store, "SELECT count(*) FROM runs") == [(1,)]


def test_run_without_plan_is_skipped(tmp_path):
    write(tmp_path / "noplan", [{"kind": "device", "device": "p", "info": {}}])
    (outcome,) = import_runs(tmp_path / "s.sqlite", [tmp_path / "noplan"])
    assert outcome.status == "skipped" and "no plan" in outcome.note


def test_foreign_or_newer_files_are_refused(tmp_path):
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("hello, this is not a database at all" * 20)
    with pytest.raises(StoreError, match="not an npuconf results store"), open_store(not_sqlite):
        pass
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {STORE_SCHEMA + 1}")
    with pytest.raises(StoreError, match="newer"), open_store(newer):
        pass
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not an npuconf results store"), open_store(other):
        pass
    with pytest.raises(StoreError, match="no results store"), open_store(tmp_path / "missing.sqlite", create=False):
        pass


def test_cli_store_import_and_errors(tmp_path):
    run_dir = d2_run(tmp_path / "run")
    store = tmp_path / "s.sqlite"
    first = npuconf("store", "import", run_dir, "--store", store, timeout=60)
    again = npuconf("store", "import", run_dir, "--store", store, timeout=60)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert "added: 20260301-120000-d2d2" in first.stdout
    assert "unchanged: 20260301-120000-d2d2" in again.stdout
    missing = npuconf("store", "import", tmp_path / "nothing", "--store", store, timeout=60)
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    no_store = npuconf("dashboard", "--store", tmp_path / "none.sqlite", timeout=60)
    assert no_store.returncode == 3 and "no results store" in no_store.stderr


@pytest.mark.slow
def test_npuconf_run_records_itself_in_the_store(tmp_path, probe_build):
    done = npuconf("run", "--target", "local", "-k", "requests.create", "--out", tmp_path / "runs" / "r1", "-q")
    assert done.returncode == 0, done.stderr
    store = tmp_path / "runs" / "npuconf.sqlite"  # next to the run directory
    (run_id,) = rows(store, "SELECT run_id FROM runs")[0]
    plan = json.loads((tmp_path / "runs" / "r1" / "results.jsonl").read_text().splitlines()[0])
    assert run_id == plan["run_id"]
    assert rows(store, "SELECT count(*) FROM verdicts WHERE verdict = 'PASS'")[0][0] >= 1
    (kit_hash,) = rows(store, "SELECT kit_hash FROM runs")[0]
    assert len(kit_hash) == 64


def test_hostile_device_text_is_stored(tmp_path):
    run_dir = simple_run(
        tmp_path / "run", "run-x", "2026-03-01T10:00:00Z", {"p\x1b1": "fp/\ud800"}, {("p\x1b1", A): "PASS"}
    )
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    device = json.loads(lines[1])
    device["info"]["model"] = "<b>\x00\udfff"
    lines[1] = json.dumps(device)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.sqlite"
    assert [o.status for o in import_runs(store, [run_dir])] == ["added"]
    assert rows(store, "SELECT serial, fingerprint, model FROM devices") == [
        ("p\\x1b1", "fp/\\ud800", "<b>\\x00\\udfff")
    ]
    assert [o.status for o in import_runs(store, [run_dir])] == ["unchanged"]
