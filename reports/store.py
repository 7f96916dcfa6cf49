"""The results store: every run's verdicts in one database, for dashboards across devices and builds.

One interface (`open_store`, `import_run(s)`, `scenario_durations`) over two engines, chosen by the
location: a path is an embedded SQLite file (reports/store_sqlite.py, the default), a
`postgresql://` URL a PostgreSQL server (reports/store_postgresql.py). Both get the same tables from
the same migrations (`MIGRATIONS`); docs/reports.md describes them.

The store is filled from results.jsonl only (`import_run`), never from live objects, so importing a
run directory copied from another host gives the same rows as recording the run where it ran.
Importing is idempotent by run id: the same results again change nothing; a run whose results.jsonl
grew since (a resumed run appends to it) replaces its earlier rows; a run id already in the store
with other results is refused, never overwritten. Every import is one transaction under the
store's writer lock.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .clause_answers import answering_clauses
from .jsonl import results_file
from .results import RunResults, load_results, safe_text
from .store_engine import StoreEngine, StoreError
from .store_postgresql import PostgresqlEngine, is_postgresql_url, redacted
from .store_sqlite import SqliteEngine

__all__ = ["StoreEngine", "StoreError", "is_postgresql_url"]

DEFAULT_STORE: Final = Path("out") / "npuconf.sqlite"

# Schema version n is reached by running MIGRATIONS[n - 1]; the same statements on both engines.
MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE runs (
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
)""",
        """CREATE TABLE builds (
    fingerprint     TEXT PRIMARY KEY,
    sdk             TEXT,
    first_seen      TEXT NOT NULL
)""",
        """CREATE TABLE devices (
    serial          TEXT NOT NULL,
    fingerprint     TEXT NOT NULL REFERENCES builds (fingerprint),
    model           TEXT,
    manufacturer    TEXT,
    sdk             TEXT,
    info            TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    PRIMARY KEY (serial, fingerprint)
)""",
        """CREATE TABLE verdicts (
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
)""",
        """CREATE TABLE verdict_clauses (
    run_id          TEXT NOT NULL,
    serial          TEXT NOT NULL,
    scenario        TEXT NOT NULL,
    clause          TEXT NOT NULL,
    PRIMARY KEY (run_id, serial, scenario, clause)
)""",
        "CREATE INDEX verdicts_by_device ON verdicts (serial, fingerprint)",
        "CREATE INDEX verdict_clauses_by_clause ON verdict_clauses (clause)",
    ),
    (
        # 2: measured durations (the --shard balance), the imported length (a resumed run grows its
        # results.jsonl; anything else under a known run id is refused), the group of a sharded run.
        "ALTER TABLE verdicts ADD COLUMN duration_ms DOUBLE PRECISION",
        "ALTER TABLE verdicts ADD COLUMN shard_group TEXT",
        "ALTER TABLE runs ADD COLUMN results_bytes BIGINT",
        "CREATE INDEX verdicts_by_scenario ON verdicts (scenario, fingerprint)",
    ),
)
STORE_SCHEMA: Final = len(MIGRATIONS)


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    source: Path
    run_id: str
    status: str  # "added", "updated", "unchanged", "refused" or "skipped"
    results: int
    note: str = ""

    def line(self) -> str:
        what = f"{self.run_id} ({self.results} results)" if self.run_id else str(self.source)
        return f"{self.status}: {what}{': ' + self.note if self.note else ''}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def describe_location(location: str | Path) -> str:
    """The store's location for messages (a URL without its password)."""
    text = str(location)
    return redacted(text) if is_postgresql_url(text) else text


def _engine(location: str | Path, create: bool) -> StoreEngine:
    text = str(location)
    if is_postgresql_url(text):
        return PostgresqlEngine(text)
    path = Path(location)
    if not create and not path.is_file():
        raise StoreError(f"{path}: no results store there; record runs with `npuconf run` or `npuconf store import`")
    return SqliteEngine(path)


@contextmanager
def open_store(location: str | Path, create: bool = True) -> Iterator[StoreEngine]:
    """A connection to the store at `location` (a path or a postgresql:// URL) with the current schema.

    A new store is initialised when `create`; without it, a store that was never initialised is refused.
    """
    engine = _engine(location, create)
    try:
        _ensure_schema(engine, create)
        yield engine
    finally:
        engine.close()


def _ensure_schema(engine: StoreEngine, create: bool) -> None:
    version = engine.schema_version()
    if version == STORE_SCHEMA:
        return
    if version > STORE_SCHEMA:
        raise StoreError(
            f"{engine.location}: store schema {version} is newer than this kit's ({STORE_SCHEMA}); use a newer npuconf"
        )
    with engine.write_transaction():  # re-read under the writer lock: another process may have just done it
        version = engine.schema_version()
        if version == 0:
            tables = engine.foreign_tables()
            if tables:
                raise StoreError(
                    f"{engine.location}: a database that is not an npuconf results store (tables: {sorted(tables)})"
                )
            if not create:
                raise StoreError(f"{engine.location}: no results store there (an empty database)")
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                engine.execute(statement)
        if version < STORE_SCHEMA:
            engine.set_schema_version(STORE_SCHEMA)


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
    conn: StoreEngine, path: Path, kit_hash: str | None = None, results_bytes: bytes | None = None
) -> ImportOutcome:
    """Import one run (its directory or results.jsonl) into the store; see the module docstring."""
    path = results_file(path)
    data = results_bytes if results_bytes is not None else path.read_bytes()
    run = load_results(path)
    if run.plan is None:
        return ImportOutcome(path, "", "skipped", 0, "no plan record, so no run id")
    digest = hashlib.sha256(data).hexdigest()
    plan = run.plan
    with conn.write_transaction():
        existing = conn.query(
            "SELECT results_sha256, results_bytes, source FROM runs WHERE run_id = ?", _row(plan.run_id)
        )
        if existing and existing[0][0] == digest:
            return ImportOutcome(path, plan.run_id, "unchanged", len(run.results))
        if existing:
            old_digest, old_length, old_source = existing[0]
            grown = (
                isinstance(old_length, int)
                and 0 < old_length < len(data)
                and hashlib.sha256(data[:old_length]).hexdigest() == old_digest
            )
            if not grown:
                note = (
                    f"the store already holds run {plan.run_id} with other results (from {old_source}); "
                    "it is kept, not overwritten"
                )
                return ImportOutcome(path, plan.run_id, "refused", len(run.results), safe_text(note))
            for table in ("verdict_clauses", "verdicts", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", _row(plan.run_id))
        _insert_run(conn, run, path, kit_hash, digest, len(data))
    status = "updated" if existing else "added"
    return ImportOutcome(path, plan.run_id, status, len(run.results))


def _insert_run(conn: StoreEngine, run: RunResults, path: Path, kit_hash: str | None, digest: str, size: int) -> None:
    plan = run.plan
    assert plan is not None
    started = plan.started or _now()
    conn.execute(
        "INSERT INTO runs (run_id, started, finished, profile, target, kit_version, kit_hash, model_hash, "
        "corpus_hash, vocabulary, answer, exit_code, source, results_sha256, imported, results_bytes) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            size,
        ),
    )
    for serial in run.device_serials:
        info = dict(run.devices.get(serial, {}))
        fingerprint = fingerprint_of(run, serial)
        conn.execute(
            "INSERT INTO builds (fingerprint, sdk, first_seen) VALUES (?, ?, ?) ON CONFLICT (fingerprint) DO UPDATE "
            "SET first_seen = CASE WHEN excluded.first_seen < builds.first_seen THEN excluded.first_seen "
            "ELSE builds.first_seen END, sdk = coalesce(builds.sdk, excluded.sdk)",
            _row(fingerprint, _sdk(info.get("sdk")), started),
        )
        conn.execute(
            "INSERT INTO devices (serial, fingerprint, model, manufacturer, sdk, info, last_seen) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (serial, fingerprint) DO UPDATE SET "
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
    conn.execute_many(
        "INSERT INTO verdicts (run_id, serial, fingerprint, scenario, chapter, clauses, verdict, discrepancy, "
        "divergence_clause, duration_ms, shard_group) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id, serial, scenario) DO NOTHING",
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
                r.duration_ms if r.recorded else None,
                run.groups.get(r.device) if plan.shard else None,
            )
            for r in run.results
        ],
    )
    conn.execute_many(
        "INSERT INTO verdict_clauses (run_id, serial, scenario, clause) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [_row(plan.run_id, r.device, r.scenario, c) for r in run.results for c in answering_clauses(run, r)],
    )


def import_runs(store: str | Path, paths: Sequence[Path], kit_hash: str | None = None) -> list[ImportOutcome]:
    """Import several runs into the store at `store` (a path, created when missing, or a URL)."""
    with open_store(store) as conn:
        return [import_run(conn, path, kit_hash) for path in paths]


def scenario_durations(store: str | Path, fingerprint: str) -> dict[str, float]:
    """Mean measured duration (ms) per scenario: on this build where measured, else on any build.

    An absent store gives no durations (nothing was measured yet); it is not created.
    """
    if not is_postgresql_url(str(store)) and not Path(store).is_file():
        return {}
    with open_store(store, create=False) as conn:
        query = "SELECT scenario, avg(duration_ms) FROM verdicts WHERE duration_ms > 0 {} GROUP BY scenario"
        anywhere = {str(r[0]): float(r[1]) for r in conn.query(query.format(""))}
        here = {str(r[0]): float(r[1]) for r in conn.query(query.format("AND fingerprint = ?"), (fingerprint,))}
    return anywhere | here
