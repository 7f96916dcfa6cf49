"""The behaviour atlas (reports/answers/atlas.py): what each device chose where the text leaves it free, from the
recorded traces; the published vnpu and the aosp-2026 twin side by side show the twin's documented
differences (docs/vnpu.md §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_results import ResultsBuilder, load, scenario

import host.suite  # noqa: F401  (provides the kit's facts)
from reports.answers.atlas import Aspect, Atlas, AtlasRow, device_atlas, run_atlas, side_by_side
from reports.recorded.results import load_results
from reports.renderers.html import html_chunks

CALLER = "caller's thread (inside the API call)"

# F1's race: when the buffer's onAlloc had written its last event but not yet returned as the buffer was freed,
# the twin lets the cookie go as that callback returns, on its thread, after later calls: the atlas then names
# every call that may have let it go.
RACED = "at ANpuBuffer_free or ANpuBuffer_unmap"
# docs/vnpu.md §5 rows the atlas shows between the published vnpu and the aosp-2026 twin. Each: the §5 row,
# the aspect, text every matching question holds, and the answers (published, twin), a tuple for each answer
# a race allows. Only rows whose behaviour is stable are listed (not D14's order, onPreempt after free,
# INT64_MAX sizes or fd -7 loads).
DOCUMENTED = (
    ("D1 map after preemption: ENOMEM", Aspect.ERRNO, "ANpuBuffer_map() at preemption.map_fails_repeatedly ",
     "ENOENT", "ENOMEM"),
    ("D1 map during a load: ENOMEM", Aspect.ERRNO, "ANpuBuffer_map() at loading.map_during_delayed_load ",
     "EBUSY", "ENOMEM"),
    ("D2 negative device: ENOSYS", Aspect.CALLBACK_ERROR, "onAlloc for NULL in requests.negative_device_is_rejected",
     "EINVAL", "ENOSYS"),
    ("D2 pair not configured: ENOSYS", Aspect.CALLBACK_ERROR, "onAlloc for c in requests.unsupported_pair_device",
     "ENODEV", "ENOSYS"),
    ("F1 mapped buffer freed: the deleter at free", Aspect.DELETER,
     "deleter of c in free.mapped_buffer_with_deleter_then_unmap", ("at ANpuBuffer_unmap", RACED),
     ("at ANpuBuffer_free", RACED)),
    ("F2 free during a load: the descriptor still closed", Aspect.DESCRIPTOR,
     "await_closed of f at loading.free_while_load_in_flight ", "closed, position 0", "closed, position 0"),
    ("vnpu §5 intro: preemption control the same", Aspect.PREEMPTION,
     "preemption in preemption.lowest_among_three_priorities", "onPreempt(c1)", "onPreempt(c1)"),
    ("vnpu §3, §5 intro: threads the same", Aspect.THREAD, "onAlloc, success", "one device thread",
     "one device thread"),
)


def _rows(atlas: Atlas, aspect: Aspect, text: str) -> list[AtlasRow]:
    rows = [r for r in atlas.rows if r.aspect is aspect and text in r.question]
    assert rows, f"no {aspect} entry holds {text!r}"
    return rows


@pytest.fixture(scope="module")
def pair(vnpu: Path, twin: Path) -> Atlas:
    published, aosp = load_results(vnpu), load_results(twin)
    return side_by_side([("published", device_atlas(published, "local")), ("aosp-2026", device_atlas(aosp, "local"))])


@pytest.mark.parametrize(("row", "aspect", "text", "published", "aosp"), DOCUMENTED, ids=[d[0] for d in DOCUMENTED])
def test_the_twin_differs_where_docs_vnpu_says(pair: Atlas, row: str, aspect: Aspect, text: str,
                                               published: str | tuple[str, ...], aosp: str | tuple[str, ...]):
    allowed = [(a,) if isinstance(a, str) else a for a in (published, aosp)]
    for found in _rows(pair, aspect, text):
        answers = tuple(c.answer if c is not None else "—" for c in found.cells)
        assert all(a in ok for a, ok in zip(answers, allowed, strict=True)), f"{row}: {found.question}: {answers}"
        assert found.differs is (answers[0] != answers[1])
        if allowed[0][0] != allowed[1][0] and RACED not in answers:
            assert found.differs, f"{row}: {found.question}"


def test_load4_and_immediate_errors_come_on_the_callers_thread_on_the_twin_only(pair: Atlas):
    """LOAD-4: a loadAsync on a preempted buffer, or during another load, gets onLoad(EINVAL) inside the call."""
    (row,) = _rows(pair, Aspect.THREAD, "onLoad with an error")
    published, aosp = row.cells
    assert published is not None and aosp is not None and row.differs
    assert CALLER not in [c.value for c in published.choices]
    caller = next(c for c in aosp.choices if c.value == CALLER)
    assert {"preemption.load_after_preemption", "loading.async_two_loads_in_flight"} <= {
        s.scenario for s in caller.sources
    }


def test_every_entry_names_its_scenarios_and_trace_lines(twin: Path):
    run = load_results(twin)
    traces = {r.scenario: r.trace for r in run.results}
    discovery = run.devices["local"]["discovery_trace"]
    atlas = device_atlas(run, "local")
    assert {e.aspect for e in atlas.entries} == set(Aspect)
    for entry in atlas.entries:
        for choice in entry.choices:
            assert choice.sources and choice.count >= len(choice.sources)
            for source in choice.sources:
                if entry.aspect is Aspect.READING:
                    assert source.lines == () and source.scenario in traces  # a WARN's reason, no line
                    continue
                trace = discovery if source.scenario == "npuconf.discovery" else traces[source.scenario]
                assert source.lines and all(1 <= n <= len(trace) for n in source.lines), entry.question
    # an errno entry's lines are its call and its ret, which carries the errno
    (d1,) = [e for e in atlas.entries if e.aspect is Aspect.ERRNO and "map_fails_repeatedly step 14" in e.question]
    call, ret = d1.choices[0].sources[0].lines
    trace = traces["preemption.map_fails_repeatedly"]
    assert json.loads(trace[call - 1])["ev"] == "call" and json.loads(trace[ret - 1])["errno"] == "ENOMEM"
    assert "FAIL on preempt-map-enoent" in d1.note


def test_atlas_json_beside_summary(twin: Path):
    data = json.loads((twin / "atlas.json").read_text(encoding="utf-8"))
    assert data["kind"] == "npuconf-atlas" and data["schema"] == 1 and data["devices"] == ["local"]
    assert set(data["aspects"]) == {str(a) for a in Aspect}
    reading = next(e for e in data["entries"] if e["aspect"] == "reading" and e["question"] == "R4")
    assert reading["devices"]["local"]["answer"] == "needed" and not reading["differs"]


def _event(**fields: object) -> str:
    return json.dumps(fields, separators=(",", ":"))


def _trace(sid: str, *, pool: bool, error: str, thread: str) -> list[str]:
    """Two requests with their own cookies in one allocAsync; both onAlloc fail with `error`."""
    lines = [_event(ev="begin", scenario=sid, pid=1, trace=2, t=1)]
    for i in (0, 1):
        lines += [_event(ev="call", step=2 * i, op="req_create", th="main", args={"req": f"r{i}"}, t=2),
                  _event(ev="ret", step=2 * i, op="req_create", th="main", ret=None, errno=None, t=3),
                  _event(ev="call", step=2 * i + 1, op="req_set_cookie", th="main",
                         args={"req": f"r{i}", "cookie": f"c{i}", "deleter": False}, t=4),
                  _event(ev="ret", step=2 * i + 1, op="req_set_cookie", th="main", ret=None, errno=None, t=5)]
    lines.append(_event(ev="call", step=4, op="alloc", th="main", args={"reqs": ["r0", "r1"]}, t=10))
    callbacks = [(1, "w1"), (0, "w2" if pool else "w1")]  # the second request first: out of request order
    inside = thread == "caller"
    if not inside:
        lines.append(_event(ev="ret", step=4, op="alloc", th="main", ret=None, errno=None, t=11))
    for t, (i, th) in enumerate(callbacks, 20):
        lines.append(_event(ev="cb", kind="alloc", cookie=f"c{i}", error=error, buf=None, thread=thread,
                            th="main" if inside else th, t=t))
        lines.append(_event(ev="cb_return", kind="alloc", cookie=f"c{i}", th="main" if inside else th, t=t))
    if inside:
        lines.append(_event(ev="ret", step=4, op="alloc", th="main", ret=None, errno=None, t=30))
    lines += [_event(ev="end", scenario=sid, t=40), _event(ev="exit", scenario=sid, status="ok", code=0, signal=None,
                                                          t=41)]
    return lines


def test_two_devices_side_by_side_in_report_html(builder: ResultsBuilder):
    sid = "allocation.two_requests"
    builder.plan(["pool", "inline"], [scenario(sid)])
    builder.result("pool", sid, "PASS", trace=_trace(sid, pool=True, error="EINVAL", thread="other"),
                   slots={"ra": "r0", "rb": "r1", "ca": "c0", "cb": "c1"})
    builder.result("inline", sid, "PASS", trace=_trace(sid, pool=False, error="ENOSYS", thread="caller"),
                   slots={"ra": "r0", "rb": "r1", "ca": "c0", "cb": "c1"})
    run = load(builder.write())
    atlas = run_atlas(run)
    assert atlas.columns == ("pool", "inline")
    thread = atlas.row(Aspect.THREAD, "onAlloc with an error")
    assert thread is not None and thread.differs
    assert [c.answer if c else None for c in thread.cells] == ["several device threads", CALLER]
    order = atlas.row(Aspect.ORDER, "onAlloc order within one allocAsync")
    assert order is not None and not order.differs
    assert [c.answer if c else None for c in order.cells] == ["not in request order"] * 2
    errors = atlas.row(Aspect.CALLBACK_ERROR, f"onAlloc for ca in {sid}")  # the scenario's name for c0
    assert errors is not None and [c.answer if c else None for c in errors.cells] == ["EINVAL", "ENOSYS"]
    page = b"".join(html_chunks(run, atlas)).decode("utf-8")
    assert '<section id="atlas" class="atlas">' in page
    assert '<tr class="differs"><td class="q">onAlloc with an error</td>' in page
    assert '<td class="odd"' in page  # the inline device's answer is marked against the first column's
