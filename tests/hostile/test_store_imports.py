"""Store imports by a submitter who edits results.jsonl or dates, on both engines (SQLite, PostgreSQL).

A run's rows change only by a resume of that run recorded on the host that recorded the run and
imported there; a far-future date is refused; a device's rows are its submitter's own.
"""

import datetime as dt
import json
import os
import secrets
import socket

import pytest

from reports.store.runs import import_runs, open_store
from tests.hostile.conftest import cli
from tests.store.conftest import pg_server, store_location  # noqa: F401  (both engines)
from tests.store.runs import resume_line, simple_run, verdict_record

A, B = "requests.create_then_free", "requests.default_size_is_zero"
FINGERPRINT = "acme/npu/phone-1:37/BUILD1/1:user/release-keys"


def rows(store, query, params=()):
    with open_store(store, create=False) as conn:
        return conn.query(query, params)


def failing_run(directory, run_id="run-1", started="2026-03-01T10:00:00Z", **plan_extra):
    verdicts = {("p1", A): "FAIL", ("p1", B): "CRASH"}
    return simple_run(directory, run_id, started, {"p1": FINGERPRINT}, verdicts, plan_extra or None)


def append(run_dir, *records):
    with (run_dir / "results.jsonl").open("a") as stream:
        stream.writelines(json.dumps(r) + "\n" for r in records)


def passes():
    return [verdict_record("p1", s, "PASS", "2026-03-01T11:00:00Z") for s in (A, B)]


def kept(store):
    return rows(store, "SELECT scenario, verdict FROM verdicts ORDER BY scenario") == [(A, "FAIL"), (B, "CRASH")]


def test_appended_pass_records_do_not_replace_a_run(tmp_path, store_location):  # noqa: F811
    """Issue 26: a copy of results.jsonl with PASS records appended turned FAIL + CRASH into conformant."""
    run_dir = failing_run(tmp_path / "run")
    assert [o.status for o in import_runs(store_location, [run_dir])] == ["added"]
    append(run_dir, *passes())
    (outcome,) = import_runs(store_location, [run_dir])
    assert outcome.status == "refused" and "does not start with a resume record" in outcome.note
    assert "\n" not in outcome.line()
    assert kept(store_location)
    assert rows(store_location, "SELECT answer FROM runs") == [("non-conformant",)]


def test_a_resume_record_of_another_host_is_refused(tmp_path, store_location):  # noqa: F811
    run_dir = failing_run(tmp_path / "run")
    import_runs(store_location, [run_dir])
    append(run_dir, resume_line("run-1", host=secrets.token_hex(32)), *passes())
    (outcome,) = import_runs(store_location, [run_dir])
    assert outcome.status == "refused" and "resumed on another host" in outcome.note
    assert kept(store_location)


def test_a_resume_is_imported_only_on_the_recording_host(tmp_path, store_location, monkeypatch):  # noqa: F811
    """The resume record copied from the plan's own host proves nothing elsewhere: the importer's identity
    must be the run's host too."""
    run_dir = failing_run(tmp_path / "run")
    import_runs(store_location, [run_dir])
    append(run_dir, resume_line("run-1"), *passes())
    monkeypatch.setenv("NPUCONF_STATE_DIR", str(tmp_path / "another-host"))
    (outcome,) = import_runs(store_location, [run_dir])
    assert outcome.status == "refused" and "only on the host that recorded it" in outcome.note
    assert kept(store_location)
    monkeypatch.undo()
    assert [o.status for o in import_runs(store_location, [run_dir])] == ["updated"]
    grown = rows(store_location, "SELECT scenario, verdict FROM verdicts ORDER BY scenario")
    assert grown == [(A, "PASS"), (B, "PASS")]


def test_a_run_whose_plan_names_no_host_never_grows(tmp_path, store_location):  # noqa: F811
    run_dir = failing_run(tmp_path / "run", host=None)
    import_runs(store_location, [run_dir])
    append(run_dir, resume_line("run-1"), *passes())
    (outcome,) = import_runs(store_location, [run_dir])
    assert outcome.status == "refused" and "records no host" in outcome.note
    assert kept(store_location)


def later(minutes):
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


@pytest.mark.parametrize("started", ["9999-12-31T23:59:59Z", "not a date", "2027-01-01T00:00:00+14:00"])
def test_far_future_or_unreadable_dates_are_refused(tmp_path, store_location, started):  # noqa: F811
    """Issue 26: a run dated 9999 hid another lab's regressions and pinned its device row."""
    (outcome,) = import_runs(store_location, [failing_run(tmp_path / "run", started=started)])
    assert outcome.status == "refused" and "plan field 'started'" in outcome.note, outcome.note
    assert rows(store_location, "SELECT count(*) FROM runs") == [(0,)]
    assert rows(store_location, "SELECT count(*) FROM devices") == [(0,)]


def test_dates_compare_as_timestamps_and_a_near_future_is_accepted(tmp_path, store_location):  # noqa: F811
    """Text order would put 09:00+00:00 after 10:30+02:00 (08:30 UTC); the device keeps its newest description."""
    newer = failing_run(tmp_path / "a", run_id="run-a", started="2026-03-01T09:00:00+00:00")
    older = failing_run(tmp_path / "b", run_id="run-b", started="2026-03-01T10:30:00+02:00")
    for run_dir, model in ((newer, "new name"), (older, "old name")):
        path = run_dir / "results.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        lines[1]["info"]["model"] = model
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert [o.status for o in import_runs(store_location, [newer, older])] == ["added", "added"]
    assert rows(store_location, "SELECT model FROM devices") == [("new name",)]
    soon = failing_run(tmp_path / "c", run_id="run-c", started=later(5))
    assert [o.status for o in import_runs(store_location, [soon])] == ["added"]


def other_submitter(store, monkeypatch, name):
    """The store as another lab sees it: another user (SQLite), another role (PostgreSQL)."""
    if not store.startswith("postgresql://"):
        # another local user: the submitter is the kernel's uid (an environment variable changes nothing,
        # test_the_sqlite_submitter_is_the_kernels_user_not_logname), so stand in for that user's process
        monkeypatch.setattr("reports.store.sqlite.local_submitter", lambda: f"{name}@{socket.gethostname()}")
        return store
    import psycopg

    password = secrets.token_hex(8)
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {name}")
    _user_info, rest = store.split("://", 1)[1].split("@", 1)
    return f"postgresql://{name}:{password}@{rest}"


def test_one_labs_import_neither_overwrites_nor_hides_anothers_device(tmp_path, store_location, monkeypatch):  # noqa: F811
    lab_a = failing_run(tmp_path / "a", run_id="run-a", started="2026-03-01T10:00:00Z")
    import_runs(store_location, [lab_a])
    (mine,) = rows(store_location, "SELECT submitter, model, last_seen FROM devices")
    name = "lab_b_" + secrets.token_hex(3)
    store_b = other_submitter(store_location, monkeypatch, name)
    lab_b = failing_run(tmp_path / "b", run_id="run-b", started="2026-03-02T10:00:00Z")
    path = lab_b / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[1]["info"]["model"] = "renamed by lab B"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert [o.status for o in import_runs(store_b, [lab_b])] == ["added"]
    devices = rows(store_location, "SELECT submitter, serial, fingerprint, model FROM devices ORDER BY last_seen_at")
    assert devices == [
        (mine[0], "p1", FINGERPRINT, mine[1]),
        (devices[1][0], "p1", FINGERPRINT, "renamed by lab B"),
    ]
    assert devices[1][0] != mine[0] and devices[1][0].startswith(name)
    assert rows(store_location, "SELECT plan_run_id, submitter FROM runs ORDER BY plan_run_id") == [
        ("run-a", mine[0]),
        ("run-b", devices[1][0]),
    ]


def test_a_run_id_squatted_by_another_submitter_does_not_refuse_the_labs_own_import(
    tmp_path,
    store_location,  # noqa: F811
    monkeypatch,
):
    """Issue 39: whoever imported a run id first owned it; the lab's own import of its run was refused."""
    lab = failing_run(tmp_path / "lab", run_id="run-lab", started="2026-03-01T10:00:00Z")
    squat = tmp_path / "squat"
    squat.mkdir()
    objects = [json.loads(line) for line in (lab / "results.jsonl").read_text().splitlines()]
    for record in objects:
        if record["kind"] == "result":
            record["verdict"], record["divergence"] = "PASS", None  # the lab's run, all passing
    (squat / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in objects))
    with open_store(store_location):
        pass  # the shared store exists (on PostgreSQL, the lab made its tables and grants them to the others)
    with monkeypatch.context() as patch:
        squatter = other_submitter(store_location, patch, "squat_" + secrets.token_hex(3))
        assert [o.status for o in import_runs(squatter, [squat])] == ["added"]
    assert [o.status for o in import_runs(store_location, [lab])] == ["added"]
    stored = {submitter: (plan_id, answer) for submitter, plan_id, answer in
              rows(store_location, "SELECT submitter, plan_run_id, answer FROM runs")}  # fmt: skip
    assert len(stored) == 2 and {plan_id for plan_id, _ in stored.values()} == {"run-lab"}
    with open_store(store_location) as conn:
        lab_submitter = conn.submitter()
    assert stored[lab_submitter][1] == "non-conformant"  # the lab's own rows, beside the squatter's
    assert [o.status for o in import_runs(store_location, [lab])] == ["unchanged"]


def test_the_sqlite_submitter_is_the_kernels_user_not_logname(tmp_path):
    import pwd

    run_dir = failing_run(tmp_path / "run")
    store = tmp_path / "s.sqlite"
    done = cli("store", "import", "--store", store, run_dir, env={"LOGNAME": "lab", "USER": "lab"})
    assert done.returncode == 0, done.stderr
    (submitter,) = rows(str(store), "SELECT submitter FROM runs")[0]
    assert submitter == f"{pwd.getpwuid(os.geteuid()).pw_name}@{socket.gethostname()}"


def test_durations_beyond_any_measurement_steer_no_lanes(tmp_path, store_location):  # noqa: F811
    """Issue 39: a row with duration_ms 1e308 made every lab's --shard lanes 2 to 8 times slower."""
    from reports.store.runs import measured_durations

    run_dir = failing_run(tmp_path / "run")
    path = run_dir / "results.jsonl"
    objects = [json.loads(line) for line in path.read_text().splitlines()]
    for record in objects:
        if record["kind"] == "result":
            record["duration_ms"] = 1e308
    path.write_text("".join(json.dumps(r) + "\n" for r in objects))
    assert [o.status for o in import_runs(store_location, [run_dir])] == ["added"]
    assert rows(store_location, "SELECT count(*) FROM verdicts WHERE duration_ms IS NOT NULL") == [(0,)]
    with open_store(store_location) as conn, conn.write_transaction():  # a row written past the import
        conn.execute("UPDATE verdicts SET duration_ms = ?", (1e308,))
    assert measured_durations(store_location).for_build(FINGERPRINT) == {}


def test_json_nested_past_any_reading_in_a_store_row_is_no_traceback(tmp_path, store_location):  # noqa: F811
    """Issue 39: a nested JSON array in a store row gave `dashboard` a RecursionError traceback."""
    assert [o.status for o in import_runs(store_location, [failing_run(tmp_path / "run")])] == ["added"]
    nested = "[" * 200_000 + "]" * 200_000
    with open_store(store_location) as conn, conn.write_transaction():
        conn.execute("UPDATE runs SET partial = ?", (nested,))
        conn.execute("UPDATE atlas_entries SET choices = ?", (nested,))
    done = cli("dashboard", "--store", store_location, "--out", tmp_path / "dash", timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert "unreadable partial reasons" in (tmp_path / "dash" / "dashboard.html").read_text()
