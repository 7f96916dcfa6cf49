"""The embedded engine of the results store: one SQLite file (stdlib `sqlite3`), the default.

The schema version is SQLite's `user_version`, as in every store written before there were engines.
Writers take turns with `BEGIN IMMEDIATE` (the file's write lock, waited for up to 30 s), so a store
created by several runs at once is created once and every run's import lands.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .store_engine import Params, StoreError, first_line, rows_of
from .store_identity import local_submitter

BUSY_TIMEOUT_S = 30.0


class SqliteEngine:
    engine = "sqlite"

    def __init__(self, path: Path) -> None:
        self.location = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the results store ({first_line(exc)})") from None
        self._in_transaction = False

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            problem = first_line(exc)
            raise StoreError(f"{self.location}: not an npuconf results store, or a damaged one ({problem})") from None
        except sqlite3.Error as exc:
            raise StoreError(f"{self.location}: results store error ({first_line(exc)})") from None

    def query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return rows_of(self._conn.execute(sql, tuple(params)).fetchall())

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._errors():
            self._conn.execute(sql, tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        with self._errors():
            self._conn.executemany(sql, [tuple(r) for r in rows])

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        if self._in_transaction:
            yield
            return
        with self._errors():
            self._conn.execute("BEGIN IMMEDIATE")
        self._in_transaction = True
        try:
            yield
        except BaseException:
            self._in_transaction = False
            with self._errors():
                self._conn.execute("ROLLBACK")
            raise
        self._in_transaction = False
        with self._errors():
            self._conn.execute("COMMIT")

    def schema_version(self) -> int:
        with self._errors():
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        with self._errors():
            self._conn.execute(f"PRAGMA user_version = {int(version)}")

    def foreign_tables(self) -> set[str]:
        with self._errors():
            return {str(r[0]) for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def submitter(self) -> str:
        return local_submitter()

    def close(self) -> None:
        self._conn.close()
