"""A PostgreSQL password never leaves the `--store` argument: not in user info, not as `?password=`
(nor a percent-encoded key libpq decodes), neither on the console nor in dashboard.html."""

import pytest

from reports.store.postgresql import redacted
from tests.hostile.conftest import cli, text
from tests.store.conftest import pg_server  # noqa: F401  (the private PostgreSQL server)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://lab:s3cret@db:5432/npu", "postgresql://lab:***@db:5432/npu"),
        ("postgresql://lab@db/npu?password=s3cret", "postgresql://lab@db/npu?password=***"),
        (
            "postgres://lab@db/npu?sslmode=require&%70assword=s3cret",
            "postgres://lab@db/npu?sslmode=require&%70assword=***",
        ),
        ("postgresql://lab:s3:cr@et@db/npu", "postgresql://lab:***@db/npu"),
        (
            "postgresql:///npu?host=/run/pg&PASSWORD=s3cret&sslpassword=s3cret",
            "postgresql:///npu?host=/run/pg&PASSWORD=***&sslpassword=***",
        ),
    ],
)
def test_every_form_of_password_is_redacted(url, shown):
    assert redacted(url) == shown


def test_password_in_the_query_reaches_neither_console_nor_dashboard(pg_server, run_copy, tmp_path):  # noqa: F811
    database = pg_server.create_database().rsplit("/", 1)[1]
    secret = pg_server.password
    url = f"postgresql://{pg_server.user}@127.0.0.1:{pg_server.port}/{database}?password={secret}"
    imported = cli("store", "import", "--store", url, run_copy)
    assert imported.returncode == 0, text(imported)
    dashboard = cli("dashboard", "--store", url, "--out", tmp_path / "dash")
    assert dashboard.returncode == 0, text(dashboard)
    page = (tmp_path / "dash" / "dashboard.html").read_text()
    assert "password=***" in page
    for output in (text(imported), text(dashboard), page):
        assert secret not in output
    wrong = cli("store", "import", "--store", url.replace(secret, secret + "x"), run_copy)
    assert wrong.returncode == 3 and secret not in text(wrong), text(wrong)


@pytest.mark.parametrize("url", [
    "postgresql://lab:s3cretpw@[::1/npu",  # libpq echoes the whole URI it cannot parse
    "postgresql://lab:s3cret%zzpw@127.0.0.1:1/npu",  # ... or the malformed token, the password itself
    "postgresql://lab@127.0.0.1:1/npu?password%=s3cretpw&x",
    "postgresql://lab@127.0.0.1:1/npu?sslpassword=s3cretpw&bogus",
])
def test_a_malformed_url_never_prints_its_password(url, run_copy):
    done = cli("store", "import", "--store", url, run_copy, timeout=60)
    assert done.returncode != 0, text(done)
    assert "cannot connect to the results store" in text(done) and "Traceback" not in text(done)
    assert "s3cret" not in text(done), text(done)
