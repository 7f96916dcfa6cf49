"""The embedded engine of the results store: one SQLite file (stdlib `sqlite3`), the default.

The schema version is SQLite's `user_version`, as in every store written before there were engines.
Writers take turns with `BEGIN IMMEDIATE` (the file's write lock, waited for up to 30 s), so a store
created by several runs at once is created once and every run's import lands.

The file is reached the way the kit reaches every file it writes (floor/safe_io.py): its directory
with no other user's symlink followed, the file itself created by the kit (never by SQLite, which is
opened with `mode=rw`) and refused when it is another user's symlink; once SQLite has opened it, the
file it holds open must be the one checked, or the store is refused. A planted symlink never makes
root's import write into a file the planter chose.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from floor.safe_io import SYMLINK_HOPS, UnsafeOutput, create_exclusive, open_directory, refuse_foreign_symlink

from .engine import Params, StoreError, first_line, rows_of
from .identity import local_submitter

BUSY_TIMEOUT_S = 30.0


class SqliteEngine:
    engine = "sqlite"

    def __init__(self, path: Path) -> None:
        self.location = str(path)
        try:
            self._conn = _connect(Path(os.path.abspath(path)))
        except UnsafeOutput as exc:
            raise StoreError(f"cannot open the results store: {exc}") from None
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


def _connect(path: Path, hops: int = 0) -> sqlite3.Connection:
    """A connection to the SQLite file `path`, checked as the module docstring says."""
    create_exclusive(path, b"", 0o644)  # an empty file is an empty database; nothing if one is there
    directory = open_directory(path.parent)
    try:
        refuse_foreign_symlink(directory, path.name, path)
        link = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
        target = os.readlink(path.name, dir_fd=directory) if stat.S_ISLNK(link.st_mode) else None
        checked = link if target is None else None
    finally:
        os.close(directory)
    if target is not None:  # root's or this user's own symlink: the store is where it leads, reached the same way
        if hops >= SYMLINK_HOPS:
            raise UnsafeOutput(f"{path}: too many symlinks")
        return _connect(path.parent / target, hops + 1)
    assert checked is not None
    if not stat.S_ISREG(checked.st_mode):
        raise UnsafeOutput(f"{path}: is not a regular file")
    before = set(os.listdir("/proc/self/fd"))
    uri = f"file:{urllib.parse.quote(str(path))}?mode=rw"
    connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        with contextlib.suppress(sqlite3.DatabaseError):  # not a store, or a damaged one: the first query says so
            connection.execute("PRAGMA schema_version").fetchone()  # the file is open and read
        if any((s.st_dev, s.st_ino) != (checked.st_dev, checked.st_ino) for s in _opened_since(before, path.name)):
            raise UnsafeOutput(f"{path}: changed between its check and SQLite's open; not used")
    except BaseException:
        connection.close()
        raise
    return connection


def _opened_since(before: set[str], name: str) -> list[os.stat_result]:
    """The regular files named `name` that this process opened since `before` (a listing of /proc/self/fd)."""
    found = []
    for fd in set(os.listdir("/proc/self/fd")) - before:
        try:
            if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) != name:
                continue
            info = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.append(info)
    return found
