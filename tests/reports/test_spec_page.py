"""`npuconf spec`: the published text with each sentence's clause and answer, opened in headless Chromium."""

from __future__ import annotations

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
    match = re.search(rf'<span class="s st-(\w+)" tabindex="0" data-clause="{clause}"', page)
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
    # every clause of the catalogue is marked once, in the text or in the list of those not located
    assert len(re.findall(r'<span class="s st-', page)) == len(re.findall(r'<section class="detail"', page))


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
        assert browser.console == []
    # the vnpu, the twin and the skeleton: each device's answer, and the twin's failures with their replay lines
    answers = [re.search(r": (PASS|FAIL|not exercised) —", d).group(1) for d in devices]
    assert answers == ["PASS", "FAIL", "PASS"], devices  # the skeleton's refusals are EINVAL: exercised
    assert "FAIL allocation.batch_all_invalid" in devices[1]
    assert "npuconf run --target local --personality aosp-2026 --scenario allocation.batch_all_invalid" in devices[1]
