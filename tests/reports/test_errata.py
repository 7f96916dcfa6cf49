"""`npuconf errata`: the draft for the spec's owners, on the vnpu run, the aosp-2026 twin run and a merged
run of both (the session's shared runs; the twin's device renamed, as a second host would have it)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from host.offline.errata import errata_source
from reference_model.readings import READING_TABLE
from tests.conftest import PRINTED_NPUCONF, npuconf

MODEL_DOC = Path(__file__).resolve().parents[2] / "docs" / "model.md"


@pytest.fixture(scope="module")
def merged(tmp_path_factory, vnpu, twin) -> Path:
    """The vnpu and the twin merged into one run: the twin's device is `local-aosp` (merge keeps one
    configuration per device column)."""
    base = tmp_path_factory.mktemp("errata-merge")
    renamed = base / "twin"
    renamed.mkdir()
    lines = []
    for line in (twin / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "plan":
            record["devices"] = ["local-aosp"]
        elif record.get("device") == "local":
            record["device"] = "local-aosp"
        lines.append(json.dumps(record))
    (renamed / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = npuconf("report", vnpu, renamed, "--merge", base / "merged")
    assert done.returncode == 0, done.stdout + done.stderr
    return base / "merged"


def _draft(run: Path | list[Path], out: Path) -> tuple[str, str]:
    runs = run if isinstance(run, list) else [run]
    done = npuconf("errata", *runs, "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("errata: ") and f"html: {out / 'errata.html'}" in done.stdout
    return (out / "errata.html").read_text(encoding="utf-8"), (out / "errata.md").read_text(encoding="utf-8")


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def _entries(page: str) -> list[tuple[str, str, str]]:
    return re.findall(r'<article class="entry" id="[^"]+" data-key="([^"]+)" data-kind="([^"]+)">(.*?)</article>',
                      page, re.S)


def _check_every_entry(page: str, markdown: str, devices: set[str], traces: dict[str, dict[str, list[str]]]) -> None:
    """Each entry quotes its sentences (the catalogue's words), says the reading and why, what every device did
    with trace lines that are the run's own, what AOSP does, and proposes a wording; the Markdown says the same."""
    quotes = errata_source().quotes
    entries = _entries(page)
    assert entries
    for key, _, body in entries:
        sentences = re.findall(r'<blockquote class="sentence">“(.*?)” <span class="mono muted">([a-z0-9-]+)</span>',
                               body, re.S)
        assert sentences, key
        for quote, clause in sentences:
            assert html.unescape(quote) == quotes[clause], (key, clause)
        for field in ("reading", "why", "aosp"):
            assert _text(re.search(rf'<dd class="{field}">(.*?)</dd>', body, re.S).group(1)), (key, field)
        assert _text(re.search(r'<blockquote class="proposed">(.*?)</blockquote>', body, re.S).group(1)), key
        shown = re.findall(r'<li class="device"><b class="mono">(.*?)</b>: <span class="summary">(.*?)</span>'
                           r'(.*?)</li>', body, re.S)
        assert {html.unescape(d) for d, _, _ in shown} == devices, (key, [d for d, _, _ in shown])
        for device, summary, rest in shown:
            assert _text(summary), (key, device)
            lines = re.search(r'<pre class="lines">(.*?)</pre>', rest, re.S)
            if lines is None:  # a late callback no trace showed this time: the summary says so
                assert "no trace of them shows the calls or callbacks it reads" in summary, (key, device)
                continue
            evidence = re.findall(r"^(\S+) line (\d+): (.*)$", html.unescape(lines.group(1)), re.M)
            assert evidence, (key, device)
            for scenario, number, text in evidence:  # the very line of the run's trace
                trace = traces[html.unescape(device)].get(scenario)
                if trace is not None:
                    assert trace[int(number) - 1] == text, (key, device, scenario, number)
    sections = re.split(r"^## ", markdown, flags=re.M)[1:]
    assert len([s for s in sections if not s.startswith("Readings that read no sentence")]) == len(entries)
    for section in sections:
        if section.startswith("Readings that read no sentence"):
            continue
        for part in ("**Sentence", "\n> ", "**Reading the kit applies**: ", "**Why**: ", "**What each device did**",
                     "**AOSP module**", "**Proposed wording**:"):
            assert part in section, (section.splitlines()[0], part)
        # each device either cites trace lines or says no trace showed what the reading reads (a late callback)
        did = section.split("**What each device did**:", 1)[1].split("**AOSP module**", 1)[0]
        blocks = re.split(r"^(?=- `)", did.strip(), flags=re.M)
        assert len([b for b in blocks if b]) == len(devices), (section[:60], did)
        for block in filter(None, blocks):
            assert (re.search(r"^  - `[^`]+` trace line \d+: ", block, re.M)
                    or "no trace of them shows the calls or callbacks it reads" in block.splitlines()[0]), block


def _traces(run: Path, label=lambda serial: serial) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "result":
            out.setdefault(label(record["device"]), {})[record["scenario"]] = record["trace"]
    return out


def _readings_of_the_model() -> set[str]:
    documented = set(re.findall(r"\*\*(R\d+)\b", MODEL_DOC.read_text(encoding="utf-8")))
    return documented | set(READING_TABLE)


def test_the_vnpu_and_the_twin_each_get_a_draft_with_every_reading(vnpu, twin, tmp_path):
    for run, label in ((vnpu, "vnpu"), (twin, "twin")):
        page, markdown = _draft(run, tmp_path / label)
        assert "default-src 'none'" in page
        _check_every_entry(page, markdown, {"local"}, _traces(run))
        keys = {key for key, kind, _ in _entries(page) if kind == "reading"}
        assert keys | {"R12"} == _readings_of_the_model(), keys  # R12 reads no sentence: named apart
        assert "R12" in page and "R12" in markdown
    twin_page = (tmp_path / "twin" / "errata.html").read_text(encoding="utf-8")
    # the twin needed R4 (priorities accepted out of range: AOSP D3): its entry says so and names D3
    r4 = next(body for key, _, body in _entries(twin_page) if key == "R4")
    assert "needed the reading (WARN) in 12 scenarios" in r4 and "D3" in r4, _text(r4)[:400]
    assert re.search(r'<tr><td><a href="#e-R4" class="mono">R4</a></td>.*?WARN on local', twin_page)


def test_a_merged_run_of_both_names_where_the_devices_differ(merged, vnpu, twin, tmp_path):
    page, markdown = _draft(merged, tmp_path / "merged")
    traces = {**_traces(vnpu), **_traces(twin, lambda serial: "local-aosp")}
    _check_every_entry(page, markdown, {"local", "local-aosp"}, traces)
    differ = [(key, body) for key, kind, body in _entries(page) if kind == "devices differ"]
    assert {"map-returns", "alloc-errornum-iff-buf"} <= {key for key, _ in differ}, [k for k, _ in differ]
    map_returns = next(body for key, body in differ if key == "map-returns")
    assert "ENOMEM" in map_returns and "ENOENT" in map_returns and "D1" in map_returns
    # the same draft from the two runs given side by side: one device column per run
    both, _ = _draft([vnpu, twin], tmp_path / "both")
    assert {key for key, kind, _ in _entries(both) if kind == "devices differ"} == {key for key, _ in differ}


def test_the_report_and_the_spec_page_link_the_draft(vnpu, twin, tmp_path):
    run = Path(vnpu.parent / "linked")
    if not run.exists():
        shutil.copytree(vnpu, run)
    assert npuconf("report", run).returncode == 0
    report = (run / "report.html").read_text(encoding="utf-8")
    assert '<a href="errata.html">errata.html</a>' in report
    assert f"<code>{PRINTED_NPUCONF} errata {run}</code>" in report
    assert npuconf("errata", run).returncode == 0  # as the report says: the link then leads to the draft
    assert (run / "errata.html").is_file() and (run / "errata.md").is_file()
    spec = tmp_path / "pages" / "spec.html"
    done = npuconf("spec", vnpu, twin, "--out", spec)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '<a href="errata.html">errata.html</a>' in spec.read_text(encoding="utf-8")
    assert (spec.parent / "errata.html").is_file() and (spec.parent / "errata.md").is_file()
    assert f"errata html: {spec.parent / 'errata.html'}" in done.stdout
