"""The results store: every run's verdicts in one database, for dashboards across devices and builds.

One interface (`open_store`, `import_run(s)`, `measured_durations`) over two engines, chosen by the
location: a path is an embedded SQLite file (reports/store/sqlite.py, the default), a
`postgresql://` URL a PostgreSQL server (reports/store/postgresql.py). Both get the same tables from
the same migrations (`MIGRATIONS`); docs/reports.md describes them.

The store is filled from results.jsonl only (`import_run`), never from live objects, so importing a
run directory copied from another host gives the same rows as recording the run where it ran; each
run's behaviour atlas (reports/answers/atlas.py) is kept per device (`atlas_entries`, `stored_atlas`).
Importing is idempotent by run id: the same results again change nothing. A run's rows change only by
a resume of that run recorded on the same host: its results.jsonl grew by a `resume` record naming
the host that recorded the plan, and this process is that host (identity.py); any other
results under a known run id are refused, never overwritten. Devices are keyed by their submitter
(who imported: user@host, or the PostgreSQL role) with serial and fingerprint; plans dated more than
FUTURE_TOLERANCE ahead are refused and dates compare as timestamps. Every import is one transaction
under the store's writer lock.
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

from floor.jsonl import bounded_json

from ..answers.atlas import DeviceAtlas, device_atlas, entry_from_json, sorted_entries
from ..answers.claim import claim_of
from ..answers.clause_answers import answering_clauses
from ..recorded.outputs import DEFAULT_STORE
from ..recorded.records import Plan, ResumeRecord, parse_line, results_file
from ..recorded.results import RunResults, load_results, read_results_bytes, safe_text
from .engine import NoStoreThere, StoreEngine, StoreError
from .identity import host_identity
from .postgresql import PostgresqlEngine, is_postgresql_url, redacted
from .sqlite import SqliteEngine

__all__ = ["DEFAULT_STORE", "StoreEngine", "StoreError", "is_postgresql_url"]

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
    (
        # 3: who recorded and who imported a run (the growth rule, a device's identity), dates as
        # timestamps (seconds since the epoch, UTC) for every comparison. Devices are keyed by their
        # submitter too: the table is rebuilt (rows from before keep submitter '').
        "ALTER TABLE runs ADD COLUMN host TEXT",
        "ALTER TABLE runs ADD COLUMN submitter TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN started_at DOUBLE PRECISION",
        # why the run is no conformance claim whatever its verdicts (reports.answers.claim.partial_reasons),
        # a JSON list: [] for a full published-37 run of the released corpus
        "ALTER TABLE runs ADD COLUMN partial TEXT",
        "ALTER TABLE builds ADD COLUMN first_seen_at DOUBLE PRECISION",
        """CREATE TABLE devices_3 (
    submitter       TEXT NOT NULL,
    serial          TEXT NOT NULL,
    fingerprint     TEXT NOT NULL REFERENCES builds (fingerprint),
    model           TEXT,
    manufacturer    TEXT,
    sdk             TEXT,
    info            TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    last_seen_at    DOUBLE PRECISION,
    PRIMARY KEY (submitter, serial, fingerprint)
)""",
        "INSERT INTO devices_3 (submitter, serial, fingerprint, model, manufacturer, sdk, info, last_seen) "
        "SELECT '', serial, fingerprint, model, manufacturer, sdk, info, last_seen FROM devices",
        "DROP TABLE devices",
        "ALTER TABLE devices_3 RENAME TO devices",
    ),
    (
        # 4: the behaviour atlas of each run and device (reports/answers/atlas.py), one row per question: the
        # answer devices are compared by, and the choices with their sources as JSON. Runs imported
        # before have no rows (the dashboard says so).
        """CREATE TABLE atlas_entries (
    run_id          TEXT NOT NULL REFERENCES runs (run_id),
    serial          TEXT NOT NULL,
    aspect          TEXT NOT NULL,
    question        TEXT NOT NULL,
    answer          TEXT NOT NULL,
    choices         TEXT NOT NULL,
    detail          TEXT NOT NULL,
    note            TEXT NOT NULL,
    PRIMARY KEY (run_id, serial, aspect, question)
)""",
    ),
    (
        # 5: run ids are namespaced by submitter: a run is stored under `<submitter>/<run id>` (its key, in
        # every table's run_id), the plan's own id kept beside it, so one submitter's run id never
        # stands in another's way. Runs stored before keep their plain id as their key.
        "ALTER TABLE runs ADD COLUMN plan_run_id TEXT",
    ),
)
# Dates stored as text before schema 3, converted to timestamps by the migration (table, key columns, text, timestamp).
_BACKFILL: Final = (
    ("runs", ("run_id",), "started", "started_at"),
    ("builds", ("fingerprint",), "first_seen", "first_seen_at"),
    ("devices", ("submitter", "serial", "fingerprint"), "last_seen", "last_seen_at"),
)
# A plan dated later than this after the import's own clock is refused (a far-future date would pin
# a device's row and hide later runs).
FUTURE_TOLERANCE: Final = dt.timedelta(minutes=10)
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
        raise NoStoreThere(f"{path}: no results store there; record runs with `npuconf run` or `npuconf store import`")
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
                raise NoStoreThere(f"{engine.location}: no results store there (an empty database)")
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                engine.execute(statement)
        if 0 < version < 3:
            _backfill_timestamps(engine)
        if version < STORE_SCHEMA:
            engine.set_schema_version(STORE_SCHEMA)


def _backfill_timestamps(engine: StoreEngine) -> None:
    for table, keys, text_column, at_column in _BACKFILL:
        columns = ", ".join((*keys, text_column))
        for row in engine.query(f"SELECT {columns} FROM {table}"):
            moment = parse_date(row[-1])
            if moment is not None:
                where = " AND ".join(f"{k} = ?" for k in keys)
                engine.execute(f"UPDATE {table} SET {at_column} = ? WHERE {where}", (moment.timestamp(), *row[:-1]))


def parse_date(value: object) -> dt.datetime | None:
    """An ISO 8601 date as an aware UTC datetime (a date without offset is UTC); None when not one."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    try:
        return moment.astimezone(dt.UTC)
    except (OverflowError, ValueError):
        return None


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
    data = results_bytes if results_bytes is not None else read_results_bytes(path)
    run = load_results(path)
    if run.plan is None:
        return ImportOutcome(path, "", "skipped", 0, "no plan record, so no run id")
    digest = hashlib.sha256(data).hexdigest()
    plan = run.plan

    def refused(note: str) -> ImportOutcome:
        return ImportOutcome(path, plan.run_id, "refused", len(run.results), safe_text(note))

    started = parse_date(plan.started) if plan.started else dt.datetime.now(dt.UTC)
    if started is None:
        return refused(f"plan field 'started' is {plan.started!r}, not an ISO 8601 date")
    if started > dt.datetime.now(dt.UTC) + FUTURE_TOLERANCE:
        return refused(
            f"plan field 'started' is {plan.started}, in the future; dates more than "
            f"{int(FUTURE_TOLERANCE.total_seconds() // 60)} minutes ahead of this host's clock are refused"
        )
    host = _plan_host(data)
    submitter = conn.submitter()
    key = run_key(submitter, plan.run_id)
    with conn.write_transaction():
        existing = conn.query(
            "SELECT results_sha256, results_bytes, source, host, run_id FROM runs WHERE submitter = ? AND "
            "(run_id = ? OR run_id = ?)",
            _row(submitter, key, plan.run_id),
        )
        if existing and existing[0][0] == digest:
            return ImportOutcome(path, plan.run_id, "unchanged", len(run.results))
        if existing:
            old_digest, old_length, old_source, old_host, old_key = existing[0]
            problem = _growth_problem(data, old_digest, old_length, old_host, plan.run_id)
            if problem:
                return refused(
                    f"the store already holds run {plan.run_id} with other results (from {old_source}) and "
                    f"they are kept: {problem}"
                )
            for table in ("atlas_entries", "verdict_clauses", "verdicts", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", _row(old_key))
        _insert_run(conn, run, path, kit_hash, digest, len(data), started, host, submitter, key)
    status = "updated" if existing else "added"
    return ImportOutcome(path, plan.run_id, status, len(run.results))


def run_key(submitter: str, run_id: str) -> str:
    """Where a run is stored: its id in its submitter's namespace (run ids hold no `/`, checked_name)."""
    return f"{submitter}/{run_id}"


# A measured duration past this is no measurement (a scenario's own limit is at most 10 minutes): it is
# neither stored nor read back, so no row can steer the --shard balance of the runs that read the store.
DURATION_MAX_MS: Final = 600_000.0


def measured(duration_ms: float | None) -> float | None:
    """`duration_ms` when it is a duration the store keeps: finite, above 0, at most DURATION_MAX_MS."""
    if duration_ms is None or not 0.0 < duration_ms <= DURATION_MAX_MS:  # also refuses NaN
        return None
    return duration_ms


def _plan_host(data: bytes) -> str | None:
    """The host identity the plan record (the first line) carries, if any."""
    record, _ = parse_line(data.split(b"\n", 1)[0], 1)
    host = record.host if isinstance(record, Plan) else None
    return host if host is not None and 0 < len(host) <= 128 else None


def _growth_problem(data: bytes, old_digest: object, old_length: object, old_host: object, run_id: str) -> str:
    """Why `data` is not the stored results of `run_id` grown by a resume recorded and imported on the run's
    host ("" when it is): the stored bytes come first, then a `resume` record naming that host."""
    if not isinstance(old_length, int) or not 0 < old_length < len(data):
        return "these are not the stored results grown"
    if hashlib.sha256(data[:old_length]).hexdigest() != old_digest or data[old_length - 1 : old_length] != b"\n":
        return "these do not start with the stored results"
    record, _ = parse_line(data[old_length:].split(b"\n", 1)[0], 0)
    if not isinstance(record, ResumeRecord):
        return "what was appended does not start with a resume record (only `npuconf run --resume` grows a run)"
    if record.run_id != run_id:
        return "the appended resume record names another run"
    if not isinstance(old_host, str) or not old_host:
        return "the stored run records no host (an older kit), so no resume of it can be trusted"
    if record.host != old_host:
        return "the run was resumed on another host than the one that recorded it"
    if host_identity() != old_host:
        return "a resumed run is imported only on the host that recorded it, and this is another host"
    return ""


def _insert_run(
    conn: StoreEngine,
    run: RunResults,
    path: Path,
    kit_hash: str | None,
    digest: str,
    size: int,
    started_at: dt.datetime,
    host: str | None,
    submitter: str,
    key: str,
) -> None:
    plan = run.plan
    assert plan is not None
    claim = claim_of(run)
    started = plan.started or started_at.isoformat(timespec="milliseconds")
    stamp = started_at.timestamp()
    conn.execute(
        "INSERT INTO runs (run_id, started, finished, profile, target, kit_version, kit_hash, model_hash, "
        "corpus_hash, vocabulary, answer, exit_code, source, results_sha256, imported, results_bytes, host, "
        "submitter, started_at, partial, plan_run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        _row(
            key,
            started,
            run.end.finished if run.end else None,
            plan.profile,
            plan.target,
            plan.kit_version,
            kit_hash,
            plan.model_hash,
            plan.corpus_hash,
            plan.vocabulary,
            claim.level.value,
            int(claim.exit_code),
            str(path),
            digest,
            _now(),
            size,
            host,
            submitter,
            stamp,
            json.dumps(list(claim.partial)),
            plan.run_id,
        ),
    )
    for serial in run.device_serials:
        info = dict(run.devices.get(serial, {}))
        fingerprint = fingerprint_of(run, serial)
        conn.execute(
            "INSERT INTO builds (fingerprint, sdk, first_seen, first_seen_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (fingerprint) DO UPDATE SET "
            "first_seen = CASE WHEN builds.first_seen_at IS NULL OR excluded.first_seen_at < builds.first_seen_at "
            "THEN excluded.first_seen ELSE builds.first_seen END, "
            "first_seen_at = CASE WHEN builds.first_seen_at IS NULL OR excluded.first_seen_at < builds.first_seen_at "
            "THEN excluded.first_seen_at ELSE builds.first_seen_at END, "
            "sdk = coalesce(builds.sdk, excluded.sdk)",
            _row(fingerprint, _sdk(info.get("sdk")), started, stamp),
        )
        conn.execute(
            "INSERT INTO devices (submitter, serial, fingerprint, model, manufacturer, sdk, info, last_seen, "
            "last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (submitter, serial, fingerprint) DO UPDATE "
            "SET model = excluded.model, manufacturer = excluded.manufacturer, sdk = excluded.sdk, "
            "info = excluded.info, last_seen = excluded.last_seen, last_seen_at = excluded.last_seen_at "
            "WHERE excluded.last_seen_at >= coalesce(devices.last_seen_at, excluded.last_seen_at)",
            _row(
                submitter,
                serial,
                fingerprint,
                _text(info.get("model")),
                _text(info.get("manufacturer")),
                _sdk(info.get("sdk")),
                json.dumps(info, ensure_ascii=True, sort_keys=True),
                started,
                stamp,
            ),
        )
    fingerprints = {serial: fingerprint_of(run, serial) for serial in run.device_serials}
    conn.execute_many(
        "INSERT INTO verdicts (run_id, serial, fingerprint, scenario, chapter, clauses, verdict, discrepancy, "
        "divergence_clause, duration_ms, shard_group) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id, serial, scenario) DO NOTHING",
        [
            _row(
                key,
                r.device,
                fingerprints.get(r.device, ""),
                r.scenario,
                r.chapter,
                json.dumps(list(r.clauses)),
                str(r.verdict),
                r.discrepancy,
                r.divergence.clause if r.divergence else None,
                measured(r.duration_ms) if r.recorded else None,
                run.groups.get(r.device) if plan.shard else None,
            )
            for r in run.results
        ],
    )
    conn.execute_many(
        "INSERT INTO verdict_clauses (run_id, serial, scenario, clause) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [_row(key, r.device, r.scenario, c) for r in run.results for c in answering_clauses(run, r)],
    )
    conn.execute_many(
        "INSERT INTO atlas_entries (run_id, serial, aspect, question, answer, choices, detail, note) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [
            _row(key, serial, str(e.aspect), e.question, e.answer, json.dumps(e.to_json()["choices"]),
                 e.detail, e.note)
            for serial in run.device_serials
            for e in device_atlas(run, serial).entries
        ],
    )


def stored_atlas(conn: StoreEngine, run_id: str, serial: str) -> DeviceAtlas | None:
    """The atlas a run recorded for a device (None: the run was imported before the store kept atlases)."""
    rows = conn.query(
        "SELECT aspect, question, choices, detail, note FROM atlas_entries WHERE run_id = ? AND serial = ?",
        _row(run_id, serial),
    )
    if not rows:
        return None
    entries = []
    for aspect, question, choices, detail, note in rows:
        decoded = bounded_json(choices)  # a store row is others' text: nesting and size bounded
        if decoded is None:
            continue
        entry = entry_from_json(str(aspect), str(question), decoded, str(detail or ""), str(note or ""))
        if entry is not None:
            entries.append(entry)
    return DeviceAtlas(serial, sorted_entries(entries))


def import_runs(store: str | Path, paths: Sequence[Path], kit_hash: str | None = None) -> list[ImportOutcome]:
    """Import several runs into the store at `store` (a path, created when missing, or a URL)."""
    with open_store(store) as conn:
        return [import_run(conn, path, kit_hash) for path in paths]


@dataclass(frozen=True, slots=True)
class MeasuredDurations:
    """What the store measured of each scenario: per scenario, per build fingerprint, (total ms, count)."""

    by_build: dict[str, dict[str, tuple[float, int]]]

    def for_build(self, fingerprint: str) -> dict[str, float]:
        """Mean measured duration (ms) per scenario: on this build where measured, else on any build."""
        means: dict[str, float] = {}
        for scenario, builds in self.by_build.items():
            if fingerprint in builds:
                total, count = builds[fingerprint]
            else:
                total, count = sum(t for t, _ in builds.values()), sum(c for _, c in builds.values())
            means[scenario] = total / count
        return means


def measured_durations(store: str | Path) -> MeasuredDurations:
    """Every scenario's measured durations, in one query whatever the build (a run reads them once, before
    its devices are ready). An absent store (no file, an empty database) gives none: nothing was measured
    yet; it is not created."""
    by_build: dict[str, dict[str, tuple[float, int]]] = {}
    try:
        with open_store(store, create=False) as conn:
            rows = conn.query(
                "SELECT scenario, fingerprint, sum(duration_ms), count(*) FROM verdicts WHERE duration_ms > 0 "
                "AND duration_ms <= ? GROUP BY scenario, fingerprint",
                (DURATION_MAX_MS,),
            )
            for scenario, fingerprint, total, count in rows:
                mean = float(total) / int(count) if count else 0.0
                if measured(mean) is not None:  # bounded rows give a bounded mean; a store's text is not trusted
                    by_build.setdefault(str(scenario), {})[str(fingerprint)] = (float(total), int(count))
    except NoStoreThere:
        pass
    return MeasuredDurations(by_build)
