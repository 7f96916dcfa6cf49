"""`npuconf spec`: the published text with each sentence's clause and answer, opened in headless Chromium."""

from __future__ import annotations

import re

from tests.chromium import chromium, console_lines, needs_chromium
from tests.conftest import npuconf


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


@needs_chromium
def test_clicking_a_failing_sentence_shows_the_twin_failure_and_its_replay(twin, skeleton_corpus_run, tmp_path):
    out = tmp_path / "spec.html"
    skeleton = skeleton_corpus_run.path
    done = npuconf("spec", twin, skeleton, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    page = out.read_text(encoding="utf-8")
    assert _sentence(page, "req-type-unknown-einval") == "fail"
    assert _sentence(page, "req-free-null-noop") == "fail"  # the twin's crash: died in req_free_null
    assert _sentence(page, "map-maps-buffer") == "nx"  # the skeleton allocates no buffer to map
    dom, err = chromium(tmp_path, "--dump-dom", out.as_uri() + "#click=req-type-unknown-einval")
    assert console_lines(err) == []
    assert 'data-shown="req-type-unknown-einval"' in dom
    shown = re.search(r'<section class="detail" id="d-req-type-unknown-einval"[^>]*>(.*?)</section>', dom, re.S)
    assert shown and "hidden" not in dom[shown.start() : shown.start() + 120]
    assert "allocation.batch_all_invalid" in shown.group(1)
    assert "npuconf run" in shown.group(1) and "--scenario allocation.batch_all_invalid" in shown.group(1)
    assert len(re.findall(r'<div class="device">', shown.group(1))) == 2  # the twin and the skeleton
    others = re.findall(r'<section class="detail" id="d-([a-z0-9-]+)"[^>]*hidden', dom)
    assert "cookie-clear" in others
