"""`npuconf spec`: the published text with each sentence's clause and answer, opened in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cdp import Browser
from tests.chromium import needs_chromium
from tests.conftest import npuconf


@pytest.fixture(scope="module")
def skeleton(skeleton_corpus_run) -> Path:
    """examples/skeleton (refuses every allocation) over the corpus: the session's shared run."""
    return skeleton_corpus_run.path


def _sentence(page: str, clause: str) -> str:
    match = re.search(rf'<span class="s st-(\w+)" data-clause="{clause}" tabindex="0" id="s-{clause}"', page)
    assert match, f"{clause} is not marked"
    return match.group(1)


def test_coverage_page_without_runs(tmp_path):
    out = tmp_path / "spec.html"
    done = npuconf("spec", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    page = out.read_text(encoding="utf-8")
    assert "default-src 'none'" in page and not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert _sentence(page, "req-type-unknown-einval") == "covered"
    assert _sentence(page, "req-device-opaque") == "untestable"
    assert "requests.default_type_is_rejected_with_einval" in page or "allocation.batch_all_invalid" in page
    # every clause of the catalogue is marked, each with one anchor, in the text: none is left to an appendix
    anchors = re.findall(r'<span class="s st-\w+" data-clause="([a-z0-9-]+)" tabindex="0" id="s-\1"', page)
    assert len(anchors) == len(set(anchors)) == len(re.findall(r'<section class="detail"', page)) == 128
    assert 'id="unlocated"' not in page


def test_summary_tables_show_names_not_link_targets(tmp_path):
    """The checked-in text gave link targets where the reference's summary tables show names."""
    out = tmp_path / "spec.html"
    assert npuconf("spec", "--out", out).returncode == 0
    page = out.read_text(encoding="utf-8")
    tables = "".join(re.findall(r'<table class="doc">.*?</table>', page, re.S))
    assert "developer.android.com" not in tables
    for shown in ("ANpuBuffer_setPriority(ANpuBuffer *_Nonnull buf, int32_t newBufferPriority)",
                  "ANPUBUFFER_PRIORITY_MIN = 0, ANPUBUFFER_PRIORITY_DEFAULT = 500",
                  "ANpuManager_AllocRequest_free(ANpuManager_AllocRequest *_Nullable request)",
                  "ANpuManager_CookieDeleter _Nullable cookieDeleter"):
        assert shown in tables, shown


def test_the_text_reads_as_the_reference_shows_it(tmp_path):
    """Issue 40: 26 paragraphs showed a literal `<br />`, the "Details Parameters ..." lines ran on, and 7
    clauses whose quote crosses a paragraph, a cell or another clause's sentence sat in an appendix."""
    out = tmp_path / "spec.html"
    assert npuconf("spec", "--out", out).returncode == 0
    page = out.read_text(encoding="utf-8")
    assert "&lt;br" not in page and "<br />" not in page and "Details Parameters" not in page
    tables = re.findall(r'<table class="params">(.*?)</table>', page, re.S)
    assert len(tables) >= 20
    free = next(t for t in tables if ">buffersLen</" in t)  # ANpuBuffer_free's parameters
    assert "The list must not be modified during the execution of ANpuBuffer_free()." in free  # its indented note
    assert ">buffers</span></td>" in free and "Returns" in free
    # a sentence across two paragraphs is marked in both, with one anchor and one label
    pieces = re.findall(r'<span class="s st-\w+" data-clause="priority-request-range"[^>]*>(.*?)</span>', page)
    assert [re.sub("<[^>]+>", "", p) for p in pieces] == [
        "This is the relative priority of the buffer within the app.",
        "The value must be within the range [ANPUBUFFER_PRIORITY_MIN, ANPUBUFFER_PRIORITY_MAX], inclusive."
        "priority-request-range"]
    # a sentence holding another clause's sentence: both marked, the inner one nested
    nested = r'data-clause="priority-set-returns"[^>]*>[^<]*<span class="s st-\w+" data-clause="priority-set-range"'
    assert re.search(nested, page), "priority-set-range is not nested in priority-set-returns"
    for clause in ("alloc-error-no-free-null", "free-success-buffer-must-be-freed", "load-callback-cookie",
                   "load-length-nonnegative", "load-onload-invoked"):
        assert f'id="s-{clause}"' in page, clause


def _legend_matches_the_colours(browser: Browser) -> None:
    """Each legend chip's count is the number of clauses coloured with its state where a reader sees them:
    a visible piece whose own background is the chip's."""
    found = browser.evaluate("""(function () {
      var out = {};
      Array.prototype.forEach.call(document.querySelectorAll('.legend .chip'), function (chip) {
        var state = chip.getAttribute('data-state'), colour = getComputedStyle(chip).backgroundColor, seen = {};
        Array.prototype.forEach.call(document.querySelectorAll('#text .s.st-' + state), function (el) {
          if (el.getClientRects().length && getComputedStyle(el).backgroundColor === colour) {
            seen[el.getAttribute('data-clause')] = true;
          }
        });
        out[state] = [Number(chip.getAttribute('data-count')), Object.keys(seen).length];
      });
      return JSON.stringify(out);
    })()""")
    counts = json.loads(found)
    assert counts and all(legend == coloured for legend, coloured in counts.values()), counts
    shown = browser.evaluate(
        "(function () { var seen = {}; Array.prototype.forEach.call(document.querySelectorAll('#text .s'),"
        " function (el) { if (el.getClientRects().length) { seen[el.getAttribute('data-clause')] = true; } });"
        " return Object.keys(seen).length; })()")
    assert shown == sum(legend for legend, _ in counts.values()) == 128


@needs_chromium
def test_legend_counts_are_what_is_coloured(tmp_path):
    out = tmp_path / "spec.html"
    assert npuconf("spec", "--out", out).returncode == 0
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(out.as_uri())
        assert browser.evaluate("document.body.getAttribute('data-ready')") == "1"
        _legend_matches_the_colours(browser)
        # a piece nested in another clause's sentence answers for its own clause when clicked
        browser.click("#s-priority-set-range")
        assert browser.evaluate("document.body.getAttribute('data-shown')") == "priority-set-range"
        assert browser.console == []


@needs_chromium
def test_clicking_a_failing_sentence_shows_the_twin_failure_and_its_replay(vnpu, twin, skeleton, tmp_path):
    """The three runs together; the sentence is clicked with real mouse events (tests/cdp.py), so the page's
    own listener shows the panel."""
    out = tmp_path / "spec.html"
    done = npuconf("spec", vnpu, twin, skeleton, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    page = out.read_text(encoding="utf-8")
    assert _sentence(page, "req-type-unknown-einval") == "fail"
    assert _sentence(page, "req-free-null-noop") == "fail"  # the twin's crash: died in req_free_null
    assert _sentence(page, "free-mapping-valid-after-free") == "nx"  # the skeleton allocates no buffer to map
    with Browser(tmp_path / "profile", 1400, 1000) as browser:
        browser.open(out.as_uri())
        assert browser.evaluate("document.body.getAttribute('data-ready')") == "1"
        assert browser.evaluate("document.getElementById('d-req-type-unknown-einval').hidden") is True
        browser.click("#s-req-type-unknown-einval")
        assert browser.evaluate("document.body.getAttribute('data-shown')") == "req-type-unknown-einval"
        assert browser.evaluate("document.getElementById('d-req-type-unknown-einval').hidden") is False
        assert browser.evaluate("document.querySelectorAll('section.detail:not([hidden])').length") == 1
        devices = browser.evaluate(
            "Array.prototype.map.call(document.querySelectorAll('#d-req-type-unknown-einval div.device'),"
            " function (d) { return d.innerText; })"
        )
        _legend_matches_the_colours(browser)
        assert browser.console == []
    # the vnpu, the twin and the skeleton: each device's answer, and the twin's failures with their replay lines
    answers = [re.search(r": (PASS|FAIL|not demonstrated) —", d).group(1) for d in devices]
    assert answers == ["PASS", "FAIL", "PASS"], devices  # the skeleton's refusals are EINVAL: exercised
    assert "FAIL allocation.batch_all_invalid" in devices[1]
    assert "npuconf run --target local --personality aosp-2026 --scenario allocation.batch_all_invalid" in devices[1]
