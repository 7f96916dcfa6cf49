"""The server engine of the results store: PostgreSQL through psycopg 3, for dashboards shared by a lab.

`--store postgresql://user@host:port/dbname` (libpq URL syntax, so `?host=/socket/dir`, passwords
from ~/.pgpass or PGPASSWORD work too). The schema version lives in the table `npuconf_schema`.
Writers take turns with a transaction-scoped advisory lock, so concurrent imports from several
processes or hosts never interleave their check-then-write, and concurrent creation of a new store
creates it once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import unquote

from .engine import Params, StoreError, first_line, rows_of

URL_SCHEMES: Final = ("postgresql://", "postgres://")
# pg_advisory_xact_lock key held by every writer of an npuconf store ("npuconf" in ASCII).
WRITER_LOCK: Final = 0x6E7075636F6E66
CONNECT_TIMEOUT_S: Final = 10


def is_postgresql_url(text: str) -> bool:
    return text.startswith(URL_SCHEMES)


# Query parameters libpq takes a secret from (the key may be percent-encoded: libpq decodes it).
SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})


def redacted(url: str) -> str:
    """The URL without its passwords (user info and query), for messages and the dashboard page."""
    scheme, _, rest = url.partition("://")
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:authority_end], rest[authority_end:]
    if "@" in authority:
        user_info, hosts = authority.rsplit("@", 1)
        user, has_password, _ = user_info.partition(":")
        authority = f"{user}:***@{hosts}" if has_password else f"{user}@{hosts}"
    path, has_query, query = tail.partition("?")
    if has_query:
        query = "&".join(_redacted_parameter(p) for p in query.split("&"))
    return f"{scheme}://{authority}{path}{'?' if has_query else ''}{query}"


def _secret_key(key: str) -> bool:
    """A query parameter that may hold a secret: `password`, `sslpassword`, and any malformed spelling of
    them libpq might still echo (`password%`): every key that mentions a password."""
    return "password" in unquote(key).lower()


def _redacted_parameter(parameter: str) -> str:
    key, _, _ = parameter.partition("=")
    return f"{key}=***" if _secret_key(key) else parameter


def secrets_of(url: str) -> list[str]:
    """Every text of `url` that may be a secret, as written and percent-decoded: the password of its user
    information and the values of its password parameters, however malformed the URL is."""
    _, _, rest = url.partition("://")
    authority_end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority = rest[:authority_end]
    found: list[str] = []
    if "@" in authority:
        user_info = authority.rsplit("@", 1)[0]
        found.append(user_info.partition(":")[2])
    _, _, query = rest.partition("?")
    for parameter in query.split("&"):
        key, _, value = parameter.partition("=")
        if _secret_key(key):
            found.append(value)
    both = [*found, *(unquote(f) for f in found)]
    return sorted({f for f in both if f}, key=len, reverse=True)


def scrubbed(message: str, url: str) -> str:
    """`message` (a driver's words) with the URL shown redacted and every secret of it as `***`: libpq
    echoes the parts of a URL it cannot parse, passwords included."""
    message = message.replace(url, redacted(url))
    for secret in secrets_of(url):
        message = message.replace(secret, "***")
    return message


def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresqlEngine:
    engine = "postgresql"

    def __init__(self, url: str) -> None:
        self.location = redacted(url)
        self._url = url
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                f"{self.location}: PostgreSQL stores need psycopg 3 (pip install 'psycopg[binary]')"
            ) from None
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            problem = scrubbed(first_line(exc), url)
            raise StoreError(f"{self.location}: cannot connect to the results store ({problem})") from None
        self._in_transaction = False

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            raise StoreError(f"{self.location}: results store error ({scrubbed(first_line(exc), self._url)})") from None

    def query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            return rows_of(self._conn.execute(_placeholders(sql), tuple(params)).fetchall())

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._errors():
            self._conn.execute(_placeholders(sql), tuple(params))

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        if not rows:
            return
        with self._errors(), self._conn.cursor() as cursor:
            cursor.executemany(_placeholders(sql), [tuple(r) for r in rows])

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        if self._in_transaction:
            yield
            return
        with self._errors(), self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            self._in_transaction = True
            try:
                yield
            finally:
                self._in_transaction = False

    def schema_version(self) -> int:
        with self._errors():
            # pg_tables is read with the statement's snapshot; to_regclass() would consult the relation
            # cache, which can still say "absent" after another writer's commit while we waited for its lock.
            exists = self._conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'npuconf_schema'"
            ).fetchone()
            if not exists or not exists[0]:
                return 0
            row = self._conn.execute("SELECT max(version) FROM npuconf_schema").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def set_schema_version(self, version: int) -> None:
        with self._errors():
            self._conn.execute("CREATE TABLE IF NOT EXISTS npuconf_schema (version INTEGER NOT NULL)")
            self._conn.execute("DELETE FROM npuconf_schema")
            self._conn.execute("INSERT INTO npuconf_schema VALUES (%s)", (int(version),))

    def foreign_tables(self) -> set[str]:
        with self._errors():
            rows = self._conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'npuconf_schema'"
            ).fetchall()
        return {str(r[0]) for r in rows}

    def submitter(self) -> str:
        with self._errors():
            row = self._conn.execute("SELECT session_user").fetchone()
        return str(row[0]) if row else "unknown"

    def close(self) -> None:
        self._conn.close()
