"""Several processes on one store at once (both engines): nothing lost, nothing doubled, one schema."""

import subprocess
import sys

from reports.store.runs import STORE_SCHEMA, open_store
from tests.conftest import ROOT
from tests.store.runs import PASS_SCENARIO as A
from tests.store.runs import simple_run

B = "requests.default_size_is_zero"


def _import_processes(store, run_dirs):
    """`npuconf store import` of each run directory, all started before any is waited for."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "host", "store", "import", str(run_dir), "--store", str(store)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_dir in run_dirs
    ]
    return [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in processes if p.stdout and p.stderr]


def _runs(tmp_path, count):
    return [
        simple_run(
            tmp_path / f"run{i}",
            f"run-{i}",
            f"2026-03-0{1 + i % 9}T10:00:00Z",
            {f"phone-{i % 3}": f"acme/fp/{i % 2}"},
            {(f"phone-{i % 3}", A): "PASS", (f"phone-{i % 3}", B): "FAIL" if i % 2 else "PASS"},
        )
        for i in range(count)
    ]


def test_three_runs_creating_a_new_store_at_once_lose_nothing(tmp_path, store_location):
    """Issue 13: three runs creating a new store at once lost one run (the schema was not created atomically)."""
    runs = _runs(tmp_path, 3)
    outcomes = _import_processes(store_location, runs)
    assert [code for code, _, _ in outcomes] == [0, 0, 0], outcomes
    with open_store(store_location, create=False) as conn:
        assert conn.schema_version() == STORE_SCHEMA
        assert sorted(r[0] for r in conn.query("SELECT plan_run_id FROM runs")) == ["run-0", "run-1", "run-2"]
        assert conn.query("SELECT count(*) FROM verdicts") == [(6,)]


def test_concurrent_imports_from_several_processes(tmp_path, store_location):
    """Eight processes, six distinct runs and two of them twice: every run once, every verdict once."""
    runs = _runs(tmp_path, 6)
    outcomes = _import_processes(store_location, [*runs, runs[0], runs[3]])
    assert all(code == 0 for code, _, _ in outcomes), outcomes
    statuses = sorted(out.split(":")[0] for _, out, _ in outcomes)
    assert statuses == ["added"] * 6 + ["unchanged"] * 2
    with open_store(store_location, create=False) as conn:
        assert sorted(r[0] for r in conn.query("SELECT plan_run_id FROM runs")) == [f"run-{i}" for i in range(6)]
        assert conn.query("SELECT count(*) FROM verdicts") == [(12,)]
        assert conn.query("SELECT count(*) FROM builds") == [(2,)]
        pairs = {(f"phone-{i % 3}", i % 2) for i in range(6)}
        assert conn.query("SELECT count(*) FROM devices") == [(len(pairs),)]
