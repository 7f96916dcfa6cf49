"""report.html's layout measured in headless Chromium: the All results notes get a readable width, and a
long trace line is shown whole, wrapped inside its excerpt, without widening the page."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from synthetic_results import ResultsBuilder, load, scenario, trace_lines

from reports.renderers.run_reports import write_run_reports
from tests.chromium import chromium, console_lines, needs_chromium

pytestmark = [pytest.mark.chromium, needs_chromium]

# As wide as the longest scenario names and clause lists of the real corpus, which squeezed the note.
LONG_SCENARIO = "preemption.two_mapped_buffers_with_onpreempt_freed_in_one_call"
CLAUSES = [
    "alloc-one-callback-per-request",
    "alloc-errornum-iff-buf",
    "alloc-async",
    "req-type-unknown-einval",
    "req-device-negative-einval",
    "priority-request-range",
    "req-prot-values",
    "req-size-bytes",
]
DIVERGENCE = {
    "step": 481,
    "event": 4,
    "observed": "onAlloc(errorNum=ENOSYS)",
    "allowed": ["EINVAL"],
    "clause": "req-type-unknown-einval",
    "quote": "Otherwise, the request is responded with errorNum set to EINVAL.",
    "message": "the request has an invalid type 0",
}
# A batch's alloc call: one JSON line of thousands of characters without a space to break at.
LONG_LINE = json.dumps(
    {"ev": "call", "step": 480, "op": "alloc", "args": {"reqs": [f"r{i}" for i in range(400)]}, "t": 5}
).replace(" ", "")
LONG_LINE_TAIL = '"r399"]},"t":5}'

# Measures the page once laid out and leaves the figures in the DOM for --dump-dom.
MEASURE = """<script>
(function () {
  function lines(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) { tops[Math.round(r.top)] = 1; });
    return Object.keys(tops).length;
  }
  var out = {notes: [], page: document.documentElement.scrollWidth, viewport: window.innerWidth};
  Array.prototype.forEach.call(document.querySelectorAll("#results td.note"), function (cell) {
    out.notes.push({text: cell.textContent, width: cell.getBoundingClientRect().width, lines: lines(cell)});
  });
  var longest = null;
  Array.prototype.forEach.call(document.querySelectorAll("pre.trace .tl"), function (line) {
    if (longest === null || line.textContent.length > longest.textContent.length) { longest = line; }
  });
  var pre = longest.parentNode;
  var text = longest.lastChild;
  var range = document.createRange();
  range.selectNodeContents(text);
  var rects = Array.prototype.slice.call(range.getClientRects());
  var box = pre.getBoundingClientRect();
  out.trace = {
    text: longest.textContent,
    lines: lines(text),
    overflow: pre.scrollWidth - pre.clientWidth,
    textLeft: Math.min.apply(null, rects.map(function (r) { return r.left; })),
    textRight: Math.max.apply(null, rects.map(function (r) { return r.right; })),
    numberRight: longest.querySelector(".ln").getBoundingClientRect().right,
    boxRight: box.right
  };
  var o = document.createElement("pre");
  o.id = "measured";
  o.textContent = JSON.stringify(out);
  document.body.appendChild(o);
})();
</script>
</body>"""


def _run(builder: ResultsBuilder) -> Path:
    others = [scenario(f"allocation.batch_case_{i}", CLAUSES) for i in range(6)]
    builder.plan(["local"], [scenario(LONG_SCENARIO, CLAUSES), *others])
    builder.device("local", personality="aosp-2026")
    trace = trace_lines(LONG_SCENARIO)
    trace.insert(3, LONG_LINE)
    builder.result("local", LONG_SCENARIO, "FAIL", divergence=DIVERGENCE, discrepancy="D2,D3,D12", trace=trace)
    for s in others:
        builder.result("local", s["id"], "PASS", reason="every event is allowed by the model")
    return write_run_reports(load(builder.write()), builder.directory / "out")["html"]


def _measure(report: Path, tmp_path: Path, width: int) -> dict[str, Any]:
    page = tmp_path / f"measured-{width}.html"
    page.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE, 1), encoding="utf-8")
    dom, err = chromium(tmp_path, "--dump-dom", f"--window-size={width},1600", page.as_uri())
    assert console_lines(err) == []
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    measured: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return measured


@pytest.mark.parametrize("width", [1280, 1400])
def test_all_results_notes_get_a_readable_width(builder: ResultsBuilder, tmp_path: Path, width: int):
    measured = _measure(_run(builder), tmp_path, width)
    fail_note = next(n for n in measured["notes"] if n["text"].startswith("req-type-unknown-einval"))
    assert "step 481: observed onAlloc(errorNum=ENOSYS); allowed: EINVAL [D2,D3,D12]" in fail_note["text"]
    assert fail_note["width"] >= 280, fail_note
    assert fail_note["lines"] <= 3, fail_note  # 14 words; one or two per line before the fix
    assert all(n["lines"] == 1 for n in measured["notes"] if n["text"] == "every event is allowed by the model")
    assert measured["page"] <= measured["viewport"]  # the table fits, the page does not scroll sideways


def test_a_long_trace_line_is_shown_whole_and_wrapped(builder: ResultsBuilder, tmp_path: Path):
    measured = _measure(_run(builder), tmp_path, 1280)
    trace = measured["trace"]
    assert trace["text"].endswith(LONG_LINE) and trace["text"].rstrip().endswith(LONG_LINE_TAIL)
    assert trace["overflow"] <= 0, "the excerpt scrolls sideways: its long line is cut at the box's edge"
    assert trace["lines"] >= 3
    assert trace["textRight"] <= trace["boxRight"]
    # The wrapped part continues under the text, not under the line number.
    assert trace["textLeft"] >= trace["numberRight"]
    assert measured["page"] <= measured["viewport"]
