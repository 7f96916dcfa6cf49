"""dashboard.html from the results store: matrix of latest builds, trends, regressions, headless Chromium."""

import re

import pytest

from reports.renderers.dashboard import build_dashboard, write_dashboard
from reports.store.runs import import_runs, open_store
from tests.chromium import chromium, console_lines, needs_chromium
from tests.conftest import npuconf
from tests.store.runs import (
    CLAIM_BASIS,
    CORPUS,
    D2_SCENARIO,
    default_device_trace,
    device_info,
    plan,
    simple_run,
    verdict_record,
    write,
)

FULL = {"corpus_hash": CLAIM_BASIS["kit_corpus_hash"]}  # the released corpus: a run that can be a claim

A = "requests.create_then_free"  # clauses req-create-returns-request, req-free-destroys
B = "requests.default_size_is_zero"
OLD, NEW = "acme/phone:37/B1/1:user/release-keys", "acme/phone:37/B2/1:user/release-keys"


@pytest.fixture
def store(tmp_path):
    return _filled(tmp_path, tmp_path / "store.sqlite")


def _filled(tmp_path, path):
    """phone-1: build B1 passes A and B; build B2 (two runs later) FAILs A. phone-2: one build, hostile model."""
    runs = [
        simple_run(
            tmp_path / "r1",
            "run-1",
            "2026-03-01T10:00:00Z",
            {"phone-1": OLD, "phone-2": "other/fp"},
            {("phone-1", A): "PASS", ("phone-1", B): "PASS", ("phone-2", A): "PASS"},
            FULL,
        ),
        simple_run(
            tmp_path / "r2",
            "run-2",
            "2026-03-02T10:00:00Z",
            {"phone-1": NEW},
            {("phone-1", A): "PASS", ("phone-1", B): "NOT_APPLICABLE"},
            FULL,
        ),
        simple_run(
            tmp_path / "r3",
            "run-3",
            "2026-03-03T10:00:00Z",
            {"phone-1": NEW},
            {("phone-1", A): "FAIL", ("phone-1", B): "PASS"},
            FULL,
        ),
    ]
    import_runs(path, runs)
    with open_store(path) as conn, conn.write_transaction():  # a hostile model name, as a device could report it
        conn.execute("UPDATE devices SET model = ? WHERE serial = 'phone-2'", ("<script>alert(1)</script>\x1b",))
    return path


def test_latest_build_matrix_and_regressions(tmp_path, store_location):
    """The same dashboard from either engine."""
    store = _filled(tmp_path, store_location)
    with open_store(store) as conn:
        dashboard = build_dashboard(conn)
    phone1 = next(d for d in dashboard.devices if d.serial == "phone-1")
    assert [b.fingerprint for b in phone1.builds] == [OLD, NEW]
    assert phone1.latest.runs == 2
    assert phone1.latest.scenario_verdicts == {A: "FAIL", B: "PASS"}  # the newest run of the build wins
    assert [(r.serial, r.clause, r.verdict) for r in dashboard.regressions] == [
        ("phone-1", "req-create-returns-request", "FAIL"),
        ("phone-1", "req-free-destroys", "FAIL"),
    ]
    rates = [p.tooltip.split(": ")[-1] for p in phone1.trend.points]
    assert rates == ["2/2 pass (100%)", "1/1 pass (100%)", "1/2 pass (50%)"]
    assert [m.label for m in phone1.trend.marks] == ["build 1", "build 2"]
    matrix = {row.clause: row for row in dashboard.matrix}
    assert matrix["req-create-returns-request"].regression
    assert [c.verdict for c in matrix["req-create-returns-request"].cells] == ["FAIL", "PASS"]


def test_page_is_self_contained_and_escapes_device_text(store, tmp_path):
    page = write_dashboard(store, tmp_path / "dash").read_text(encoding="utf-8")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b" in page
    matrix = page[page.index('<table id="matrix"') :]
    matrix = matrix[: matrix.index("</table>")]
    assert matrix.count('class="cell v v-FAIL regression"') == 2
    assert page.count('class="cell v v-FAIL regression"') == 4  # and in phone-1's table across builds
    assert '<table id="regressions">' in page
    assert page.count("<polyline") == 1  # phone-2 has one run: a point, no line
    assert "2/2 pass (100%)" in page


def test_cli_writes_the_dashboard_next_to_the_store(store):
    done = npuconf("dashboard", "--store", store, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (store.parent / "dashboard.html").is_file()


@needs_chromium
def test_dashboard_in_headless_chromium(store, tmp_path):
    page = write_dashboard(store, tmp_path / "dash")
    dom, err = chromium(tmp_path, "--dump-dom", page.as_uri() + "#regressions-only")
    assert console_lines(err) == []
    assert re.search(r'<body[^>]*data-ready="1"', dom), "the inline script did not reach its end"
    assert '<table id="matrix"' in dom
    assert '<span id="shown-count">2</span>' in dom  # only the two regressed clauses are shown
    assert "alert(1)" in dom and "<script>alert(1)" not in dom

    shot = tmp_path / "dashboard.png"
    _, err = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri())
    assert console_lines(err) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 30_000


def test_histories_hold_full_claims_of_one_submitter(tmp_path, store_location, monkeypatch):
    """Issue 25: a replay, an aosp-2026 run and another lab's imports changed a device's history and hid
    its regressions. Here they are listed apart, and the other lab's device is a device of its own."""
    store = store_location
    at = iter(f"2026-03-0{day}T10:00:00Z" for day in range(1, 10))

    def run(name, verdicts, fingerprint, **plan):
        return simple_run(tmp_path / name, name, next(at), {"phone-1": fingerprint}, verdicts, FULL | plan)

    claims = [run("claim-1", {("phone-1", A): "PASS"}, OLD), run("claim-2", {("phone-1", A): "FAIL"}, NEW)]
    replay = run("replay", {("phone-1", A): "PASS"}, NEW, options={"scenario_ids": [A]})
    aosp = run("aosp", {("phone-1", A): "PASS"}, OLD, profile="aosp-2026")
    assert [o.status for o in import_runs(store, [*claims, replay, aosp])] == ["added"] * 4
    mine = rows_of(store, "SELECT DISTINCT submitter FROM runs")[0][0]

    from tests.hostile.test_store_imports import other_submitter

    store_b = other_submitter(store, monkeypatch, "lab_b_dash")
    future = simple_run(
        tmp_path / "future", "future", "9999-01-01T00:00:00Z", {"phone-1": NEW}, {("phone-1", A): "PASS"}, FULL
    )
    other = simple_run(tmp_path / "other", "other", next(at), {"phone-1": NEW}, {("phone-1", A): "PASS"}, FULL)
    assert [o.status for o in import_runs(store_b, [future, other])] == ["refused", "added"]
    monkeypatch.undo()

    with open_store(store) as conn:
        dashboard = build_dashboard(conn)
    ours = next(d for d in dashboard.devices if d.submitter == mine)
    theirs = next(d for d in dashboard.devices if d.submitter != mine)
    assert (ours.serial, theirs.serial) == ("phone-1", "phone-1")
    assert [b.fingerprint for b in ours.builds] == [OLD, NEW] and [b.runs for b in ours.builds] == [1, 1]
    assert ours.latest.scenario_verdicts == {A: "FAIL"}
    assert [p.tooltip.split(": ")[-1] for p in ours.trend.points] == ["1/1 pass (100%)", "0/1 pass (0%)"]
    assert {(r.submitter, r.clause) for r in dashboard.regressions} == {
        (mine, "req-create-returns-request"),
        (mine, "req-free-destroys"),
    }
    assert [b.fingerprint for b in theirs.builds] == [NEW] and theirs.latest.scenario_verdicts == {A: "PASS"}
    assert [r.run_id for r in dashboard.runs] == ["other", "claim-2", "claim-1"]
    apart = {r.run_id: r.apart for r in dashboard.apart}
    assert set(apart) == {"replay", "aosp"}
    assert "aosp-2026" in apart["aosp"] and "scenario" in apart["replay"]

    page = write_dashboard(store, tmp_path / "dash").read_text(encoding="utf-8")
    listed = page[page.index('<table id="apart">') :]
    listed = listed[: listed.index("</table>")]
    assert "replay" in listed and "aosp" in listed and "claim-1" not in listed


def rows_of(store, query):
    with open_store(store, create=False) as conn:
        return conn.query(query)


def _build_run(tmp_path, run_id, started, fingerprint, records):
    """A full claim on phone-1 (`fingerprint`) and phone-2 with the given result records."""
    scenarios = list(dict.fromkeys(r["scenario"] for r in records))
    head = [plan(run_id, started, ["phone-1", "phone-2"], scenarios, corpus_hash=FULL["corpus_hash"])]
    head += [{"kind": "device", "device": s, "info": device_info(s, fingerprint)} for s in ("phone-1", "phone-2")]
    return write(tmp_path / run_id, [*head, *records, {"kind": "end", "finished": started, "counts": {},
                                                       "exit_code": None}])


def test_consecutive_builds_list_newly_failing_fixed_and_atlas_changes(tmp_path, store_location):
    """Issue 25: a clause going from not demonstrated to FAIL was no regression, nothing listed what was fixed or
    what changed in the behaviour atlas between a device's builds."""
    d2 = CORPUS[D2_SCENARIO].clauses[0]
    first = _build_run(tmp_path, "build-1", "2026-03-01T10:00:00Z", OLD, [
        verdict_record("phone-1", D2_SCENARIO, "PASS", "2026-03-01T10:00:01Z", trace=default_device_trace("EINVAL")),
        verdict_record("phone-1", B, "NOT_APPLICABLE", "2026-03-01T10:00:02Z"),
        verdict_record("phone-2", A, "FAIL", "2026-03-01T10:00:03Z"),
    ])
    second = _build_run(tmp_path, "build-2", "2026-03-02T10:00:00Z", NEW, [
        verdict_record("phone-1", D2_SCENARIO, "FAIL", "2026-03-02T10:00:01Z", trace=default_device_trace("ENOSYS"),
                       divergence={"step": 4, "event": 13, "observed": "ENOSYS", "allowed": ["EINVAL"], "clause": d2,
                                   "quote": "", "message": ""}),
        verdict_record("phone-1", B, "FAIL", "2026-03-02T10:00:02Z"),
        verdict_record("phone-2", A, "PASS", "2026-03-02T10:00:03Z"),
    ])
    assert [o.status for o in import_runs(store_location, [first, second])] == ["added", "added"]
    with open_store(store_location) as conn:
        dashboard = build_dashboard(conn)
    newly = {(r.serial, r.clause, r.before, r.verdict) for r in dashboard.regressions}
    assert ("phone-1", d2, "PASS", "FAIL") in newly
    assert {("phone-1", c, "not demonstrated", "FAIL") for c in CORPUS[B].clauses} <= newly  # was never flagged
    assert {(r.serial, r.clause, r.before, r.verdict) for r in dashboard.fixed} == {
        ("phone-2", c, "FAIL", "PASS") for c in CORPUS[A].clauses
    }
    phone1 = next(d for d in dashboard.devices if d.serial == "phone-1")
    assert phone1.atlas_compared
    changes = {(str(c.aspect), c.question, c.before, c.now) for c in phone1.atlas_changes}
    assert ("callback-error", f"onAlloc for NULL in {D2_SCENARIO}", "EINVAL", "ENOSYS") in changes
    page = write_dashboard(store_location, tmp_path / "dash").read_text(encoding="utf-8")
    assert '<table id="fixed">' in page and '<section id="atlas" class="atlas">' in page
    atlas = page[page.index('<section id="atlas"') :]
    assert f"onAlloc for NULL in {D2_SCENARIO}" in atlas[: atlas.index("</section>")]


def _claim(tmp_path, run_id, started, fingerprints, verdicts, shard=False):
    """A full claim; `fingerprints`: serial -> build; with `shard`, each device's group is its build."""
    scenarios = list(dict.fromkeys(s for _, s in verdicts))
    head = [plan(run_id, started, list(fingerprints), scenarios, corpus_hash=FULL["corpus_hash"], shard=shard)]
    head += [{"kind": "device", "device": s, **({"group": f} if shard else {}), "info": device_info(s, f)}
             for s, f in fingerprints.items()]
    body = [verdict_record(d, s, v, started) for (d, s), v in verdicts.items()]
    return write(tmp_path / run_id, [*head, *body, {"kind": "end", "finished": started, "counts": {},
                                                    "exit_code": None}])


def test_builds_keep_their_numbers_and_a_return_to_an_older_build_is_no_regression(tmp_path):
    """Issue 40: B1, B2, then back to B1 renumbered the builds and showed the switch back as regressions."""
    store = tmp_path / "store.sqlite"
    runs = [
        _claim(tmp_path, "run-1", "2026-03-01T10:00:00Z", {"phone-1": OLD}, {("phone-1", A): "FAIL"}),
        _claim(tmp_path, "run-2", "2026-03-02T10:00:00Z", {"phone-1": NEW}, {("phone-1", A): "PASS"}),
    ]
    import_runs(store, runs)
    with open_store(store) as conn:
        before = build_dashboard(conn)
    (phone,) = before.devices
    assert [(b.label, b.fingerprint) for b in phone.builds] == [("build 1", OLD), ("build 2", NEW)]
    assert {r.clause for r in before.fixed} == set(CORPUS[A].clauses) and before.regressions == ()

    import_runs(store, [_claim(tmp_path, "run-3", "2026-03-03T10:00:00Z", {"phone-1": OLD},
                               {("phone-1", A): "FAIL"})])
    with open_store(store) as conn:
        after = build_dashboard(conn)
    (phone,) = after.devices
    assert [(b.label, b.fingerprint) for b in phone.builds] == [("build 1", OLD), ("build 2", NEW)]  # stable
    assert phone.latest.fingerprint == OLD and phone.previous is None  # B1 came before B2: nothing before it
    assert after.regressions == () and after.fixed == ()
    assert [m.label for m in phone.trend.marks] == ["build 1", "build 2", "build 1"]
    page = write_dashboard(store, tmp_path / "dash").read_text(encoding="utf-8")
    assert "build 1 of 2" in page and 'class="cell v v-FAIL regression"' not in page

    # a third build first seen after B2: its regressions are against B2, the build before it in time
    import_runs(store, [_claim(tmp_path, "run-4", "2026-03-04T10:00:00Z", {"phone-1": "acme/phone:37/B3"},
                               {("phone-1", A): "FAIL"})])
    with open_store(store) as conn:
        third = build_dashboard(conn)
    (phone,) = third.devices
    assert [b.label for b in phone.builds] == ["build 1", "build 2", "build 3"]
    assert phone.previous.fingerprint == NEW
    assert {(r.clause, r.before) for r in third.regressions} == {(c, "PASS") for c in CORPUS[A].clauses}


def test_a_sharded_build_is_answered_by_its_whole_group(tmp_path):
    """Issue 40: each device of a sharded build showed the clauses its shard did not run as unexercised."""
    store = tmp_path / "store.sqlite"
    run = _claim(tmp_path, "shard-1", "2026-03-01T10:00:00Z", {"phone-1": OLD, "phone-2": OLD},
                 {("phone-1", A): "PASS", ("phone-2", B): "FAIL"}, shard=True)
    import_runs(store, [run])
    with open_store(store) as conn:
        dashboard = build_dashboard(conn)
    for device in dashboard.devices:
        assert device.latest.scenario_verdicts == {A: "PASS", B: "FAIL"}, device.serial
    matrix = {row.clause: [c.verdict for c in row.cells] for row in dashboard.matrix}
    for clause in CORPUS[A].clauses:
        assert matrix[clause] == ["PASS", "PASS"]
    assert len(dashboard.devices[0].trend.points) == 1
