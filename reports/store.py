"""The results store: every run's verdicts in one SQLite file, for dashboards across devices and builds.

The store is filled from results.jsonl only (`import_run`), never from live objects, so importing a
run directory copied from another host gives the same rows as recording the run where it ran.
Importing is idempotent by run id: the same results again change nothing; a run whose
results.jsonl changed since (a resumed run) replaces its earlier rows.

The schema version is SQLite's `user_version`; docs/reports.md describes the tables.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reference_model.errors import KitError

from .jsonl import results_file
from .results import RunResults, load_results, safe_text

STORE_SCHEMA: Final = 1
DEFAULT_STORE: Final = Path("out") / "npuconf.sqlite"

_SCHEMA_SQL: Final = """
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    started         TEXT NOT NULL,
    finished        TEXT,
    profile         TEXT NOT NULL,
    target          TEXT NOT NULL,
    kit_version     TEXT NOT NULL,
    kit_hash        TEXT,
    model_hash      TEXT NOT NULL,
    corpus_hash     TEXT NOT NULL,
    vocabulary      TEXT NOT NULL,
    answer          TEXT NOT NULL,
    exit_code       INTEGER NOT NULL,
    source          TEXT NOT NULL,
    results_sha256  TEXT NOT NULL,
    imported        TEXT NOT NULL
);
CREATE TABLE builds (
    fingerprint     TEXT PRIMARY KEY,
    sdk             TEXT,
    first_seen      TEXT NOT NULL
);
CREATE TABLE devices (
    serial          TEXT NOT NULL,
    fingerprint     TEXT NOT NULL REFERENCES builds (fingerprint),
    model           TEXT,
    manufacturer    TEXT,
    sdk             TEXT,
    info            TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    PRIMARY KEY (serial, fingerprint)
);
CREATE TABLE verdicts (
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    serial          TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    scenario        TEXT NOT NULL,
    chapter         TEXT NOT NULL,
    clauses         TEXT NOT NULL,
    verdict         TEXT NOT NULL,
    discrepancy     TEXT,
    divergence_clause TEXT,
    PRIMARY KEY (run_id, serial, scenario)
);
CREATE TABLE verdict_clauses (
    run_id          TEXT NOT NULL,
    serial          TEXT NOT NULL,
    scenario        TEXT NOT NULL,
    clause          TEXT NOT NULL,
    PRIMARY KEY (run_id, serial, scenario, clause)
);
CREATE INDEX verdicts_by_device ON verdicts (serial, fingerprint);
CREATE INDEX verdict_clauses_by_clause ON verdict_clauses (clause);
"""


class StoreError(KitError):
    """The store file cannot be used (not SQLite, a newer schema, locked)."""


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    source: Path
    run_id: str
    status: str  # "added", "updated", "unchanged" or "skipped"
    results: int
    note: str = ""

    def line(self) -> str:
        what = f"{self.run_id} ({self.results} results)" if self.run_id else str(self.source)
        return f"{self.status}: {what}{': ' + self.note if self.note else ''}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@contextmanager
def open_store(path: Path, create: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection to the store at `path` with the current schema (created when `create`)."""
    if not create and not path.is_file():
        raise StoreError(f"{path}: no results store there; record runs with `npuconf run` or `npuconf store import`")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30.0)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"{path}: cannot open the results store ({exc})") from None
    try:
        conn.row_factory = sqlite3.Row
        _ensure_schema(conn, path)
        yield conn
    finally:
        conn.close()


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not an npuconf results store ({exc})") from None
    if version > STORE_SCHEMA:
        raise StoreError(
            f"{path}: store schema {version} is newer than this kit's ({STORE_SCHEMA}); use a newer npuconf"
        )
    if version == 0:
        if tables:
            raise StoreError(f"{path}: an SQLite file that is not an npuconf results store (tables: {sorted(tables)})")
        with conn:
            conn.executescript(_SCHEMA_SQL)
            conn.execute(f"PRAGMA user_version = {STORE_SCHEMA}")


def _row(*values: object) -> tuple[object, ...]:
    """Parameters for one row: text made storable (lone surrogates cannot be encoded for SQLite)."""
    return tuple(safe_text(v) if isinstance(v, str) else v for v in values)


def _sdk(value: object) -> str | None:
    return None if value is None else str(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def fingerprint_of(run: RunResults, serial: str) -> str:
    value = run.devices.get(serial, {}).get("fingerprint")
    return value if isinstance(value, str) else ""


def import_run(
    conn: sqlite3.Connection, path: Path, kit_hash: str | None = None, results_bytes: bytes | None = None
) -> ImportOutcome:
    """Import one run (its directory or results.jsonl) into the store; see the module docstring."""
    path = results_file(path)
    run = load_results(path)
    if run.plan is None:
        return ImportOutcome(path, "", "skipped", 0, "no plan record, so no run id")
    data = results_bytes if results_bytes is not None else path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    plan = run.plan
    existing = conn.execute("SELECT results_sha256 FROM runs WHERE run_id = ?", _row(plan.run_id)).fetchone()
    if existing is not None and existing[0] == digest:
        return ImportOutcome(path, plan.run_id, "unchanged", len(run.results))
    started = plan.started or _now()
    with conn:
        if existing is not None:
            for table in ("verdict_clauses", "verdicts", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", _row(plan.run_id))
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _row(
                plan.run_id,
                started,
                run.end.finished if run.end else None,
                plan.profile,
                plan.target,
                plan.kit_version,
                kit_hash,
                plan.model_hash,
                plan.corpus_hash,
                plan.vocabulary,
                run.answer,
                int(run.exit_code),
                str(path),
                digest,
                _now(),
            ),
        )
        for serial in run.device_serials:
            info = dict(run.devices.get(serial, {}))
            fingerprint = fingerprint_of(run, serial)
            conn.execute(
                "INSERT INTO builds VALUES (?, ?, ?) ON CONFLICT (fingerprint) DO UPDATE SET "
                "first_seen = min(first_seen, excluded.first_seen), sdk = coalesce(sdk, excluded.sdk)",
                _row(fingerprint, _sdk(info.get("sdk")), started),
            )
            conn.execute(
                "INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (serial, fingerprint) DO UPDATE SET "
                "model = excluded.model, manufacturer = excluded.manufacturer, sdk = excluded.sdk, "
                "info = excluded.info, last_seen = excluded.last_seen WHERE excluded.last_seen >= devices.last_seen",
                _row(
                    serial,
                    fingerprint,
                    _text(info.get("model")),
                    _text(info.get("manufacturer")),
                    _sdk(info.get("sdk")),
                    json.dumps(info, ensure_ascii=True, sort_keys=True),
                    started,
                ),
            )
        fingerprints = {serial: fingerprint_of(run, serial) for serial in run.device_serials}
        conn.executemany(
            "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                _row(
                    plan.run_id,
                    r.device,
                    fingerprints.get(r.device, ""),
                    r.scenario,
                    r.chapter,
                    json.dumps(list(r.clauses)),
                    str(r.verdict),
                    r.discrepancy,
                    r.divergence.clause if r.divergence else None,
                )
                for r in run.results
            ],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO verdict_clauses VALUES (?, ?, ?, ?)",
            [_row(plan.run_id, r.device, r.scenario, clause) for r in run.results for clause in r.clauses],
        )
    status = "updated" if existing is not None else "added"
    return ImportOutcome(path, plan.run_id, status, len(run.results))


def import_runs(store: Path, paths: Sequence[Path], kit_hash: str | None = None) -> list[ImportOutcome]:
    """Import several runs into the store file `store` (created when missing)."""
    with open_store(store) as conn:
        return [import_run(conn, path, kit_hash) for path in paths]
