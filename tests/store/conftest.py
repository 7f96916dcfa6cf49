"""A private PostgreSQL server for the store tests, started and stopped by the suite itself.

The server is Debian's `postgresql` package (installed by .ci/setup): a fresh cluster from `initdb`
in a private directory, `pg_ctl` on a loopback port and a private socket directory, password
authentication over TCP. PostgreSQL refuses to run as root, so as root the cluster belongs to the
`postgres` system user (`runuser`). Every test gets a database of its own. The tests skip, with the
reason, only when the PostgreSQL binaries are absent.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PgServer:
    port: int
    user: str
    password: str

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries absent (/usr/lib/postgresql/*/bin/initdb); .ci/setup installs them")
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="npuconf-pg-"))
    if as_root:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    base.chmod(0o700)
    data, log, pwfile = base / "data", base / "server.log", base / "pw"
    password = secrets.token_hex(12)
    user = "npuconf"
    port = _free_port()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, check=False)

    started = False
    try:
        run("sh", "-c", f"umask 077; printf '%s\\n' {password} > {pwfile}")
        done = run(
            str(bin_dir / "initdb"), "-D", str(data), "-U", user, f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        options = f"-k {base} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40"
        done = run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
        assert done.returncode == 0, done.stdout + done.stderr + (log.read_text() if log.exists() else "")
        started = True
        yield PgServer(port, user, password)
    finally:
        if started:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A new, empty database on the private server."""
    return pg_server.create_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store location for each engine: a new SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.create_database()
