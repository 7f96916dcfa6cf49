"""report.html rendered as text: content, escaping, self-containment."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from synthetic_results import DIVERGENCE, ResultsBuilder, load, scenario, trace_lines

from reports.renderers.html import format_ns, html_chunks, write_html
from tests.conftest import PRINTED_NPUCONF

HOSTILE = "<script>alert(1)</script>\x01\x1b[31m\ud800"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.scripts = 0
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("src", "href", "action", "data", "srcset"):
                self.refs.append((tag, name, value or ""))
        if tag == "script":
            self.scripts += 1


def _html(builder: ResultsBuilder) -> str:
    return b"".join(html_chunks(load(builder.write()))).decode("utf-8")


def test_answer_and_counts_lead(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    answer = html.index('id="answer"')
    assert html.index("non-conformant", answer) < html.index('id="matrix"')
    assert "exit code 1" in html
    assert "FAIL 1" in html and "PASS 7" in html and "NOT_EXECUTED 1" in html


def test_matrix_has_worst_verdict_with_tooltip(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    row = re.search(r'<th class="clause mono">alloc-supported-succeeds</th>(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r'<td class="cell v v-(\w+)" title="([^"]*)">', row.group(1))
    assert [c[0] for c in cells] == ["FAIL", "WAIVED"]
    assert "alloc.enomem FAIL" in cells[0][1] and "alloc.basic PASS" in cells[0][1]


def test_charts_are_inline_svg(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    assert '<svg id="chapters"' in html
    assert '<svg id="latency"' in html
    assert "1/2 pass (50%)" in html  # cookie: one PASS, one CRASH
    # latencies 3 µs ×2, 45 µs ×2, 1.2 ms ×1
    assert "2 callbacks, 2 µs to 5 µs after their alloc call" in html
    assert "1 callbacks, 1 ms to 2 ms after their alloc call" in html


def test_no_latency_chart_without_alloc_callbacks(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS").end()
    html = _html(builder)
    assert "no alloc callbacks in the traces" in html
    assert '<svg id="latency"' not in html


def test_failures_come_first_most_severe_first(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    failures = re.findall(r'<article class="detail d-(\w+)" id="(f\d+)"', html)
    # Only what a reader must act on, most severe first: no WAIVED, NOT_APPLICABLE or NOT_EXECUTED blocks.
    assert [v for v, _ in failures] == ["CRASH", "FAIL", "TIMEOUT", "ERROR"]
    assert html.index('id="failures"') < html.index('id="matrix"') < html.index('id="coverage"')
    assert html.index('id="coverage"') < html.index('id="charts"') < html.index('id="all-results"')
    for _, ident in failures:
        assert f'href="#{ident}"' in html  # from the index above the failures and from the results table
    assert f"<code>{PRINTED_NPUCONF} run --target virtual --scenario alloc.enomem</code>" in html
    assert "An allocation for a supported pair succeeds unless memory is exhausted." in html
    assert "D4" in html
    assert "no trace: the scenario never ran" not in html  # NOT_EXECUTED is not a failure


def test_the_divergent_line_is_marked_and_numbered(builder: ResultsBuilder):
    trace = [f'{{"ev":"call","step":{n},"op":"noop","t":{n}}}' for n in range(1, 101)]
    builder.plan(["a"], [scenario("alloc.x")])
    builder.result("a", "alloc.x", "FAIL", divergence={**DIVERGENCE, "event": 57}, trace=trace)
    html = _html(builder)
    marked = re.findall(r'<mark class="tl hit" data-line="(\d+)"[^>]*><span class="ln">\s*(\d+)</span>', html)
    assert marked == [("57", "57")]
    numbers = [int(n) for n in re.findall(r'class="tl[^"]*" data-line="(\d+)"', html)]
    assert numbers == list(range(47, 68))  # ten lines either side
    assert "lines 47-67 of 100, centred on line 57" in html


def test_reason_and_why_do_not_repeat_each_other(builder: ResultsBuilder):
    message = "observed onAlloc(errorNum=ENOSYS), allowed EINVAL: the request has an invalid type 0"
    divergence = {**DIVERGENCE, "observed": "onAlloc(errorNum=ENOSYS)", "allowed": ["EINVAL"], "message": message}
    builder.plan(["a"], [scenario("alloc.x")])
    builder.result("a", "alloc.x", "FAIL", divergence=divergence, reason=f"trace line 9: alloc-x: {message}")
    html = _html(builder)
    assert html.count("the request has an invalid type 0") == 1  # once, in the failure's "why" row
    assert "<tr><td>why</td><td>the request has an invalid type 0</td></tr>" in html
    assert "<td>reason</td>" not in html


def test_matrix_is_grouped_by_chapter_with_a_failing_filter(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    chapters = re.findall(r'<details class="chapter" data-failing="(\d+)"( open)?>\s*<summary>(\w+)', html)
    assert [c[2] for c in chapters] == ["alloc", "cookie", "free", "load", "map", "preempt"]
    assert {c[2]: (c[0], c[1]) for c in chapters}["alloc"] == ("1", " open")
    assert {c[2]: (c[0], c[1]) for c in chapters}["load"] == ("0", "")
    assert '<input type="checkbox" id="matrix-failing">' in html


def test_coverage_lists_clauses_not_demonstrated_with_reasons(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    coverage = html[html.index('<section id="coverage">') : html.index('<section id="charts">')]
    assert "Clauses not demonstrated (4)" in coverage
    assert "no exit within 5000 m" in coverage  # map-prot-subset on emulator-5554: its only scenario timed out
    assert "requires vnpu-control" in coverage  # preempt-never-mapped on emulator-5554: NOT_APPLICABLE
    assert "free-twice-crashes" in coverage  # NOT_EXECUTED on vnpu-1
    assert "ret without its call" in coverage  # map-prot-subset on vnpu-1: its only scenario ended ERROR
    assert "alloc-supported-succeeds" not in coverage  # FAIL and WAIVED both exercised it


def test_configuration_block_shows_what_the_plan_records(builder: ResultsBuilder):
    options = {"impl": "/opt/libx.so", "personality": "aosp-2026", "policy": "budget", "keyword": "alloc"}
    builder.plan(["a"], [scenario("alloc.x")], target="local", options=options)
    html = _html(builder.result("a", "alloc.x", "PASS"))
    block = html[html.index('id="claim"') : html.index("</section>", html.index('id="claim"'))]
    shown = [("profile", "published-37"), ("target", "local"), ("impl", "/opt/libx.so"),
             ("personality", "aosp-2026"), ("policy", "budget"), ("filters", "-k alloc")]
    for key, value in shown:
        assert f"<tr><td>{key}</td><td class=\"mono\">{value}</td></tr>" in block
    assert "Partial run, not a conformance claim:</strong> filtered with -k alloc" in block
    assert html.index('id="answer"') < html.index('id="claim"') < html.index('id="failures"')


def test_replay_names_the_serial_on_adb(builder: ResultsBuilder):
    builder.plan(["R58M123"], [scenario("alloc.x")], target="adb")
    builder.result("R58M123", "alloc.x", "FAIL", divergence=DIVERGENCE)
    assert "npuconf run --target adb --serial R58M123 --scenario alloc.x" in _html(builder)


def test_hostile_text_is_escaped(builder: ResultsBuilder, tmp_path: Path):
    builder.plan(["d"], [scenario("alloc.x")])
    builder.device("d", model=HOSTILE)
    builder.result("d", "alloc.x", "FAIL", reason=HOSTILE, divergence={**DIVERGENCE, "quote": HOSTILE}, trace=[HOSTILE])
    path = tmp_path / "report.html"
    write_html(load(builder.write()), path)
    html = path.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x01\\x1b[31m\\ud800" in html
    assert "\x01" not in html and "\x1b" not in html
    collector = _Collector()
    collector.feed(html)
    assert collector.scripts == 1


def test_self_contained(mixed_run: ResultsBuilder):
    html = _html(mixed_run)
    collector = _Collector()
    collector.feed(html)
    assert "link" not in collector.tags and "img" not in collector.tags and "iframe" not in collector.tags
    # in-page anchors, and one link to the errata draft beside the report (a page of its own, fetched by nothing)
    assert all(value.startswith("#") or value == "errata.html" for _, _, value in collector.refs), collector.refs
    assert "@import" not in html and "url(" not in html and "@font-face" not in html
    assert "default-src 'none'" in html  # the page may not fetch anything even if it tried
    wanted = {"matrix", "matrix-failing", "results", "filters", "filter-text", "chapters", "latency"}
    wanted |= {"failures", "coverage"}
    assert wanted <= collector.ids


def test_problems_are_shown(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")]).raw("{oops").result("a", "alloc.x", "PASS")
    html = _html(builder)
    assert 'id="problems"' in html
    assert "results.jsonl line 2: not JSON" in html


@pytest.mark.parametrize(
    ("ns", "text"), [(999, "999 ns"), (1_000, "1 µs"), (45_000, "45 µs"), (1_200_000, "1.2 ms"), (3e9, "3 s")]
)
def test_format_ns(ns: float, text: str):
    assert format_ns(ns) == text


def _warn_reason(*readings: str) -> str:
    from reference_model.readings import READINGS

    named = ", ".join(f"{r} ({READINGS[r]})" for r in readings)
    return f"allowed by the text, but departs from the kit's reading(s) {named}"


def test_warns_are_grouped_by_reading_one_row_per_reading_and_device(builder: ResultsBuilder):
    """Many WARNs of one reading fill one row per device, naming the reading, not one row per clause list;
    FAILs keep their rows per clause."""
    ids = [f"loading.l{n}" for n in range(40)]
    builder.plan(["d1", "d2"], [scenario(s, ["load-callback-on-done"]) for s in [*ids, "alloc.both", "alloc.x"]])
    for device in ("d1", "d2"):
        for sid in ids:
            builder.result(device, sid, "WARN", reason=_warn_reason("R8"), trace=trace_lines(sid))
    builder.result("d1", "alloc.both", "WARN", reason=_warn_reason("R1", "R8"), trace=trace_lines("alloc.both"))
    builder.result("d1", "alloc.x", "FAIL", divergence=DIVERGENCE, trace=trace_lines("alloc.x"))
    html = _html(builder.end())
    rows = re.findall(r'<tr class="reading-row" data-reading="(R\d+)" data-device="(\w+)">(.*?)</tr>', html, re.S)
    assert [(r, d) for r, d, _ in rows] == [("R8", "d1"), ("R1", "d1"), ("R8", "d2")]
    counts = {(r, d): re.search(r"<td>(\d+) on", body).group(1) for r, d, body in rows}
    assert counts == {("R8", "d1"): "41", ("R1", "d1"): "1", ("R8", "d2"): "40"}
    assert "a valid, in-bounds loadAsync of a live, unmapped buffer answered with an error" in rows[0][2]
    assert "loading.l0, loading.l1, loading.l2 and 38 more" in rows[0][2]
    index = re.search(r'<table class="failure-index".*?</table>', html, re.S).group(0)
    assert index.count("<tr") == 1 + 1 + 3  # the head, the FAIL's clause, three readings
    groups = re.findall(r'<article class="detail d-WARN reading-group" id="(w\d+)"', html)
    assert len(groups) == 3 and html.count('class="detail d-WARN"') == 0
    # every WARN row of the results table leads to its group; the FAIL keeps its own article
    assert html.count('href="#w1"') >= 41 and 'id="f1"' in html
    assert "Failures (82)" in html
