"""The store's measured durations, read for a run's lane balance (host/run/record.py `Estimates`)."""

from __future__ import annotations

import threading

from host.run import record
from host.run.record import Estimates
from reports.store.runs import import_runs, measured_durations, open_store
from tests.store.runs import PASS_SCENARIO, simple_run


def test_a_sqlite_store_is_read_ahead_on_its_own_thread(tmp_path, capsys, monkeypatch):
    store = tmp_path / "npuconf.sqlite"
    run = simple_run(tmp_path / "r1", "run-1", "2026-03-01T10:00:00Z", {"p1": "fp/1"}, {("p1", PASS_SCENARIO): "PASS"})
    import_runs(store, [run])
    with open_store(store) as conn, conn.write_transaction():
        conn.execute("UPDATE verdicts SET duration_ms = ?", (12.5,))

    read_on: list[str] = []

    def spy(location):
        read_on.append(threading.current_thread().name)
        return measured_durations(location)

    monkeypatch.setattr(record, "measured_durations", spy)
    estimates = Estimates(store)
    assert estimates("fp/1") == {PASS_SCENARIO: 12.5}
    assert estimates("fp/other") == {PASS_SCENARIO: 12.5}  # read once, asked per build
    assert read_on == ["durations"]
    assert capsys.readouterr().err == ""


def test_no_store_gives_no_estimates_and_creates_none(tmp_path, capsys):
    assert Estimates(tmp_path / "absent.sqlite")("fp/1") == {}
    assert not (tmp_path / "absent.sqlite").exists()
    assert capsys.readouterr().err == ""


def test_an_unreadable_store_is_a_one_line_warning_and_no_estimates(tmp_path, capsys):
    store = tmp_path / "npuconf.sqlite"
    store.write_bytes(b"not a database" * 100)
    assert Estimates(store)("fp/1") == {}
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("npuconf: warning: no measured durations from"), err
