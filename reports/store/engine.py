"""The seam between the results store and a database: what each engine (SQLite, PostgreSQL) provides.

The store's SQL (reports/store/runs.py) is written once, in the subset both engines accept, with `?`
placeholders; an engine translates placeholders, maps its errors to `StoreError` (one line, no
traceback) and knows how to keep the schema version and how to make writers take turns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from reference_model.errors import KitError

Params = Sequence[object]


class StoreError(KitError):
    """The store cannot be used (not a store, a newer schema, unreachable, corrupt, locked)."""


class NoStoreThere(StoreError):
    """Nothing was ever recorded at the location (no file, or an empty database), and it was not created."""


class StoreEngine(Protocol):
    """One open connection to a results store."""

    engine: str  # "sqlite" or "postgresql"
    location: str  # for messages: the path, or the URL without its password

    def query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Rows of a SELECT, as tuples."""
        ...

    def execute(self, sql: str, params: Params = ()) -> None: ...

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None: ...

    def write_transaction(self) -> AbstractContextManager[None]:
        """A transaction that holds the store's writer lock: one writer at a time, atomically committed."""
        ...

    def schema_version(self) -> int:
        """The schema version recorded in the store; 0 for a store never initialised."""
        ...

    def set_schema_version(self, version: int) -> None:
        """Record the schema version (inside a write transaction)."""
        ...

    def foreign_tables(self) -> set[str]:
        """Tables in an uninitialised store (non-empty means: not ours, refuse it)."""
        ...

    def submitter(self) -> str:
        """Who imports: user@host of this process (SQLite), the role name the server authenticated (PostgreSQL)."""
        ...

    def close(self) -> None: ...


def first_line(exc: BaseException) -> str:
    """An error as one line (drivers print hints on later lines)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def rows_of(cursor_rows: Iterator[Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in cursor_rows]
