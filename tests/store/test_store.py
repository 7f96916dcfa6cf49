"""The results store on both engines (SQLite file, PostgreSQL server): schema, idempotent import,
refusal of a different run under a known run id, recording by `npuconf run`."""

import hashlib
import json
import sqlite3

import pytest

from reports.store.runs import STORE_SCHEMA, StoreError, import_runs, measured_durations, open_store
from tests.conftest import npuconf
from tests.store.runs import d2_run, resume_line, simple_run, write

A, B = "requests.create_then_free", "requests.default_size_is_zero"


def rows(store, query, params=()):
    with open_store(store, create=False) as conn:
        return conn.query(query, params)


def test_import_fills_every_table(tmp_path, store_location):
    run_dir = d2_run(tmp_path / "run")
    store = store_location
    (outcome,) = import_runs(store, [run_dir], kit_hash="k" * 64)
    assert (outcome.status, outcome.run_id, outcome.results) == ("added", "20260301-120000-d2d2", 3)
    with open_store(store) as conn:
        assert conn.schema_version() == STORE_SCHEMA
    (run,) = rows(
        store, "SELECT plan_run_id, started, profile, kit_hash, model_hash, corpus_hash, target, answer FROM runs"
    )
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
    # the clause the FAIL answers: a request left at its default device names the default's sentence
    clause_rows = rows(store, "SELECT count(*) FROM verdict_clauses WHERE clause = 'req-device-default-negative'")
    assert clause_rows == [(1,)]


def test_import_is_idempotent_by_run_id(tmp_path, store_location):
    run_dir = simple_run(
        tmp_path / "run", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "PASS", ("p1", B): "FAIL"}
    )
    store = store_location
    assert [o.status for o in import_runs(store, [run_dir])] == ["added"]
    snapshot = rows(store, "SELECT * FROM verdicts ORDER BY scenario")
    assert [o.status for o in import_runs(store, [run_dir, run_dir])] == ["unchanged", "unchanged"]
    assert rows(store, "SELECT * FROM verdicts ORDER BY scenario") == snapshot
    assert rows(store, "SELECT count(*) FROM runs") == [(1,)]

    # A resume on this host appends to its results.jsonl: the grown run replaces its rows.
    results = run_dir / "results.jsonl"
    later = json.loads(results.read_text().splitlines()[-2])  # B's FAIL record, re-run and now PASS
    later |= {"verdict": "PASS", "divergence": None, "finished": "2026-03-01T11:00:00Z"}
    with results.open("a") as stream:
        stream.write(json.dumps(resume_line("run-1")) + "\n" + json.dumps(later) + "\n")
    assert [o.status for o in import_runs(store, [run_dir])] == ["updated"]
    assert rows(store, "SELECT scenario, verdict FROM verdicts ORDER BY scenario") == [(A, "PASS"), (B, "PASS")]
    assert rows(store, "SELECT count(*) FROM runs") == [(1,)]


def test_a_different_run_under_a_known_run_id_is_refused_not_overwritten(tmp_path, store_location):
    """Issue 13: a second run with the same run_id replaced another run's FAILs with PASSes."""
    first = simple_run(
        tmp_path / "a", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "FAIL", ("p1", B): "FAIL"}
    )
    other = simple_run(
        tmp_path / "b", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "PASS", ("p1", B): "PASS"}
    )
    store = store_location
    assert [o.status for o in import_runs(store, [first])] == ["added"]
    (refused,) = import_runs(store, [other])
    assert refused.status == "refused" and "already holds run run-1" in refused.note
    assert rows(store, "SELECT scenario, verdict FROM verdicts ORDER BY scenario") == [(A, "FAIL"), (B, "FAIL")]
    (source,) = rows(store, "SELECT source FROM runs")
    assert source[0] == str(first / "results.jsonl")
    done = npuconf("store", "import", other, "--store", store, timeout=60)
    assert done.returncode == 1 and "refused: run-1" in done.stdout, done.stdout + done.stderr


def test_run_without_plan_is_skipped(tmp_path):
    write(tmp_path / "noplan", [{"kind": "device", "device": "p", "info": {}}])
    (outcome,) = import_runs(tmp_path / "s.sqlite", [tmp_path / "noplan"])
    assert outcome.status == "skipped" and "no plan" in outcome.note


def test_a_schema_1_store_is_migrated_in_place(tmp_path):
    """Stores written before the engines (schema 1, user_version 1) keep their rows and gain the new columns."""
    run_dir = d2_run(tmp_path / "run")
    store = tmp_path / "old.sqlite"
    from reports.store.runs import MIGRATIONS

    with sqlite3.connect(store) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO runs VALUES ('old-run', '2026-01-01T00:00:00Z', NULL, 'published-37', 'adb', '0.1.0', NULL, "
            "'m', 'c', 'v', 'conformant', 0, 'somewhere', 'abc', '2026-01-01T00:00:00Z')"
        )
        conn.execute("PRAGMA user_version = 1")
    assert [o.status for o in import_runs(store, [run_dir])] == ["added"]
    stored = rows(store, "SELECT coalesce(plan_run_id, run_id) AS id FROM runs ORDER BY id")
    assert stored == [("20260301-120000-d2d2",), ("old-run",)]
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (STORE_SCHEMA,)
    durations = rows(store, "SELECT duration_ms FROM verdicts WHERE verdict = 'FAIL'")
    assert durations == [(1.5,)]


def test_foreign_or_newer_files_are_refused(tmp_path):
    """Also issue 13: a corrupt store is one line on the command line, exit 3, no traceback."""
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
    # A real store, then damaged in its middle pages: the import and the dashboard each print one line.
    broken = tmp_path / "broken.sqlite"
    import_runs(broken, [d2_run(tmp_path / "run")])
    data = bytearray(broken.read_bytes())
    data[100:] = b"\xa5" * (len(data) - 100)
    broken.write_bytes(bytes(data))
    for args in (("store", "import", tmp_path / "run"), ("dashboard",)):
        done = npuconf(*args, "--store", broken, timeout=60)
        assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and str(broken) in done.stderr


def test_cli_store_import_and_errors(tmp_path, store_location):
    run_dir = d2_run(tmp_path / "run")
    store = store_location
    first = npuconf("store", "import", run_dir, "--store", store, timeout=60)
    again = npuconf("store", "import", run_dir, "--store", store, timeout=60)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert "added: 20260301-120000-d2d2" in first.stdout
    assert "unchanged: 20260301-120000-d2d2" in again.stdout
    missing = npuconf("store", "import", tmp_path / "nothing", "--store", store, timeout=60)
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    no_store = npuconf("dashboard", "--store", tmp_path / "none.sqlite", timeout=60)
    assert no_store.returncode == 3 and "no results store" in no_store.stderr
    dashboard = npuconf("dashboard", "--store", store, "--out", tmp_path / "dash", timeout=60)
    assert dashboard.returncode == 0, dashboard.stderr
    assert "20260301-120000-d2d2" in (tmp_path / "dash" / "dashboard.html").read_text()
    if store.startswith("postgresql://"):
        password = store.split(":")[2].split("@")[0]
        assert password not in first.stdout + (tmp_path / "dash" / "dashboard.html").read_text()


@pytest.mark.slow
def test_npuconf_run_records_itself_in_the_store(tmp_path, probe_build):
    done = npuconf("run", "--target", "local", "-k", "requests.create", "--out", tmp_path / "runs" / "r1", "-q")
    assert done.returncode == 0, done.stderr
    store = tmp_path / "runs" / "npuconf.sqlite"  # next to the run directory
    (run_id,) = rows(store, "SELECT plan_run_id FROM runs")[0]
    plan = json.loads((tmp_path / "runs" / "r1" / "results.jsonl").read_text().splitlines()[0])
    assert run_id == plan["run_id"]
    assert rows(store, "SELECT count(*) FROM verdicts WHERE verdict = 'PASS'")[0][0] >= 1
    (kit_hash,) = rows(store, "SELECT kit_hash FROM runs")[0]
    assert len(kit_hash) == 64


def test_hostile_device_text_is_stored(tmp_path, store_location):
    run_dir = simple_run(
        tmp_path / "run", "run-x", "2026-03-01T10:00:00Z", {"p\x1b1": "fp/\ud800"}, {("p\x1b1", A): "PASS"}
    )
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    device = json.loads(lines[1])
    device["info"]["model"] = "<b>\x00\udfff"
    lines[1] = json.dumps(device)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    store = store_location
    assert [o.status for o in import_runs(store, [run_dir])] == ["added"]
    assert rows(store, "SELECT serial, fingerprint, model FROM devices") == [
        ("p\\x1b1", "fp/\\ud800", "<b>\\x00\\udfff")
    ]
    assert [o.status for o in import_runs(store, [run_dir])] == ["unchanged"]


# A run's rows are stored under its key (its submitter's namespace); the plan's own id is in runs.plan_run_id.
STORED_AS = "UPDATE verdicts SET duration_ms = ? WHERE run_id IN (SELECT run_id FROM runs WHERE plan_run_id = '{}')"


def test_measured_durations_prefer_the_build_then_any_build(tmp_path, store_location):
    store = store_location
    first = simple_run(tmp_path / "r1", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", A): "PASS"})
    second = simple_run(tmp_path / "r2", "run-2", "2026-03-02T10:00:00Z", {"p2": "fp/2"}, {("p2", B): "PASS"})
    import_runs(store, [first, second])

    with open_store(store) as conn, conn.write_transaction():
        conn.execute(STORED_AS.format('run-1'), (40.0,))
        conn.execute(STORED_AS.format('run-2'), (7.0,))
    assert measured_durations(store).for_build("fp/1") == {A: 40.0, B: 7.0}  # B never ran on fp/1: any build's
    assert measured_durations(tmp_path / "absent.sqlite").for_build("fp/1") == {}
    assert not (tmp_path / "absent.sqlite").exists()

    # Any build's mean is over every measured row, not a mean of the builds' means.
    devices = {"p3": "fp/3", "p4": "fp/3"}
    both = {("p3", A): "PASS", ("p4", A): "PASS"}
    third = simple_run(tmp_path / "r3", "run-3", "2026-03-03T10:00:00Z", devices, both)
    import_runs(store, [third])
    with open_store(store) as conn, conn.write_transaction():
        conn.execute(STORED_AS.format('run-3'), (10.0,))
    assert measured_durations(store).for_build("fp/2") == {A: 20.0, B: 7.0}  # (40 + 10 + 10) / 3
    assert measured_durations(store).for_build("fp/3") == {A: 10.0, B: 7.0}


@pytest.mark.slow
def test_npuconf_run_records_itself_in_a_postgresql_store(tmp_path, probe_build, pg_url):
    out = tmp_path / "r1"
    done = npuconf("run", "--target", "local", "-k", "requests.create", "--out", out, "-q", "--store", pg_url)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    plan = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert rows(pg_url, "SELECT plan_run_id FROM runs") == [(plan["run_id"],)]
    assert rows(pg_url, "SELECT count(*) FROM verdicts WHERE verdict = 'PASS' AND duration_ms > 0")[0][0] >= 1
    dashboard = npuconf("dashboard", "--store", pg_url, "--out", tmp_path / "web", timeout=60)
    assert dashboard.returncode == 0 and plan["run_id"] in (tmp_path / "web" / "dashboard.html").read_text()
    unreachable = pg_url.rsplit(":", 1)[0] + ":1/nothing"
    done = npuconf("dashboard", "--store", unreachable, timeout=60)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot connect" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_resumed_run_is_recorded_in_the_store(tmp_path, probe_build):
    """Issue 13: resumed runs were never recorded. The grown results.jsonl replaces the run's rows."""
    run_dir = tmp_path / "runs" / "r1"
    done = npuconf("run", "--target", "local", "-k", "requests.create", "--out", run_dir, "-q")
    assert done.returncode == 0, done.stderr
    store = tmp_path / "runs" / "npuconf.sqlite"
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["kind"] != "end"][:-2]  # as if killed two results early
    results.write_text("\n".join(kept) + "\n")
    with open_store(store) as conn, conn.write_transaction():  # the store as the interrupted run left it
        for table in ("verdict_clauses", "verdicts", "runs"):
            conn.execute(f"DELETE FROM {table}")
    assert import_runs(store, [run_dir])[0].status == "added"
    before = rows(store, "SELECT count(*) FROM verdicts WHERE verdict = 'PASS'")[0][0]
    done = npuconf("run", "--resume", run_dir, "-q")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    after = rows(store, "SELECT verdict, count(*) FROM verdicts GROUP BY verdict")
    assert after == [("PASS", before + 2)]
    (digest,) = rows(store, "SELECT results_sha256 FROM runs")[0]
    assert digest == hashlib.sha256(results.read_bytes()).hexdigest()
