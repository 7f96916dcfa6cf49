"""junit.xml from a run's results (docs/reports.md has the verdict → JUnit table).

One `<testsuite>` per device, one `<testcase>` per scenario. JUnit elements are the CI-facing
projection; the verdict itself is always in the testcase property `verdict`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from floor.safe_io import atomic_output
from reference_model.verdicts import ANSWER_ORDER, Verdict

from ..answers.claim import claim_of
from ..answers.clause_answers import ClauseAnswers, answering_clauses, clause_answers
from ..answers.findings import trace_excerpt
from ..recorded.results import ResultRecord, RunResults, render_value, safe_text

if TYPE_CHECKING:  # junitparser is imported only where a junit.xml is built
    import junitparser
    from junitparser import xunit2


def _exit_text(record: ResultRecord) -> str:
    if not record.exit:
        return ""
    return "exit: " + ", ".join(f"{k}={render_value(v)}" for k, v in record.exit.items())


def _trace_block(record: ResultRecord) -> str:
    """The report's excerpt: numbered lines around the line the verdict rests on, that line marked `>>`."""
    excerpt = trace_excerpt(record)
    if not excerpt.lines:
        return "trace: (none recorded)"
    body = [f"{'>>' if line.marked else '  '} {line.number:5d}  {line.text}" for line in excerpt.lines]
    return "\n".join([f"{excerpt.note}:", *body])


def _system_out(record: ResultRecord) -> str:
    parts: list[str] = []
    if record.verdict is Verdict.WAIVED:
        parts.append(f"WAIVED: {record.waiver or record.reason or 'waived'}")
        if record.divergence is not None:
            parts.append(record.divergence.full_text())
    elif record.reason:
        parts.append(f"{record.verdict}: {record.reason}")
    if record.discrepancy:
        parts.append(f"AOSP discrepancy: {record.discrepancy}")
    exit_text = _exit_text(record)
    if exit_text:
        parts.append(exit_text)
    if record.recorded:
        parts.append(_trace_block(record))
    return "\n\n".join(parts)


def _result_element(record: ResultRecord) -> junitparser.Failure | junitparser.Error | junitparser.Skipped | None:
    import junitparser

    verdict = record.verdict
    if verdict.shown == "failure":
        if record.divergence is not None:
            failure = junitparser.Failure(safe_text(record.divergence.one_line()), str(verdict))
            failure.text = safe_text(record.divergence.full_text())
        else:
            failure = junitparser.Failure(safe_text(record.reason or "FAIL (no divergence recorded)"), str(verdict))
        return failure
    if verdict.shown == "error":
        error = junitparser.Error(safe_text(f"{verdict}: {record.reason or verdict.lower()}"), str(verdict))
        body = "\n".join(x for x in (record.reason, _exit_text(record)) if x)
        if body:
            error.text = safe_text(body)
        return error
    if verdict.shown == "skipped":
        return junitparser.Skipped(safe_text(f"{verdict}: {record.reason or verdict.lower()}"), str(verdict))
    return None  # shown as passed: PASS, WARN, WAIVED


def junit_seconds(duration_ms: float | None) -> float | None:
    """A duration in seconds rounded to the millisecond: `0.035`, never `0.035095999999999995`."""
    return None if duration_ms is None else round(duration_ms / 1000.0, 3)


def _testcase(record: ResultRecord, named: tuple[str, ...]) -> xunit2.TestCase:
    from junitparser import xunit2

    case = xunit2.TestCase(
        safe_text(record.scenario),
        safe_text(record.chapter),
        junit_seconds(record.duration_ms),
    )
    # Properties first: the JUnit schema puts <properties> before results and output.
    case.add_property("verdict", str(record.verdict))
    case.add_property("clauses", safe_text(",".join(record.clauses)))
    # The clauses whose answer this result takes part in (reports.answers.demonstration.answering_clauses): a FAIL's
    # only its divergence's; a PASS's or WARN's those it names and those its trace demonstrated.
    case.add_property("answers", safe_text(",".join(named)))
    case.add_property("discrepancy", safe_text(record.discrepancy or ""))
    case.add_property("waiver", safe_text(record.waiver or ""))
    if record.title:
        case.add_property("title", safe_text(record.title))
    element = _result_element(record)
    if element is not None:
        case.result = [element]
    if record.verdict is not Verdict.PASS:
        case.system_out = safe_text(_system_out(record))
    return case


def _suite_head(
    run: RunResults, serial: str, info: Mapping[str, object], answers: ClauseAnswers
) -> junitparser.TestSuite:
    """A device's suite with its properties and no test case yet."""
    import junitparser

    suite = junitparser.TestSuite(safe_text(serial))
    plan = run.plan
    if plan is not None:
        suite.timestamp = safe_text(plan.started)
        for name, value in (
            ("run_id", plan.run_id),
            ("kit_version", plan.kit_version),
            ("vocabulary", plan.vocabulary),
            ("profile", plan.profile),
            ("target", plan.target),
            ("corpus_hash", plan.corpus_hash),
            ("model_hash", plan.model_hash),
        ):
            suite.add_property(name, safe_text(value))
        claim = claim_of(run)
        suite.add_property("claim", claim.level.value)
        suite.add_property("claim_headline", safe_text(claim.headline))
        suite.add_property("exit_code", str(int(claim.exit_code)))
        for name, value in claim.configuration:
            suite.add_property(f"config.{name}", safe_text(value))
        if plan.shard:  # the device's build: its results count with those of the build's other devices
            suite.add_property("shard_group", safe_text(run.groups.get(serial, f"device:{serial}")))
    probe_version = info.get("probe_version")
    if probe_version is not None:  # the probe's version is per device; also under device.probe_version
        suite.add_property("probe_version", safe_text(render_value(probe_version)))
    for key, field_value in info.items():
        if key == "discovery_trace":
            continue  # raw evidence for `verify`; results.jsonl keeps it
        suite.add_property(safe_text(f"device.{key}"), safe_text(render_value(field_value)))
    for verdict in ANSWER_ORDER:
        clauses = [c for c, row in answers.by_clause.items() if (a := row.get(serial)) and a.verdict is verdict]
        suite.add_property(f"clauses.{verdict.lower()}", safe_text(",".join(clauses)))
    # this device's row of each clause (answers.not_demonstrated() walks every device's: once per device, it
    # made junit.xml, and verify rendering it again, grow with the square of the devices)
    missing = [
        c for c, row in answers.by_clause.items() if (a := row.get(serial)) and a.verdict is None and a.scenarios
    ]
    suite.add_property("clauses.not_demonstrated", safe_text(",".join(missing)))
    return suite


def _suite_text(run: RunResults, serial: str, answers: ClauseAnswers) -> tuple[str, junitparser.TestSuite]:
    """A device's suite as `pretty_xml` writes it (under the root), and the suite element without its test
    cases but with their statistics: each case is built, serialized and dropped in turn, so a device of
    many results never holds them all as elements (junitparser's take about 5 KB each)."""
    import junitparser

    suite = _suite_head(run, serial, run.devices.get(serial, {}), answers)
    cases: list[str] = []
    tests = errors = failures = skipped = 0
    seconds: float = 0
    for record in run.for_device(serial):
        case = _testcase(record, answering_clauses(run, record))
        tests += 1  # the statistics as TestSuite.update_statistics takes them, in its order
        if case.time is not None:
            seconds += case.time
        for entry in case.result:
            if isinstance(entry, junitparser.Failure):
                failures += 1
            elif isinstance(entry, junitparser.Error):
                errors += 1
            elif isinstance(entry, junitparser.Skipped):
                skipped += 1
        text: list[str] = []
        _pretty_element(case._elem, "\t\t", text)
        cases.append("".join(text))
    suite.tests, suite.errors, suite.failures, suite.skipped = tests, errors, failures, skipped
    suite.time = round(seconds, 3)
    head: list[str] = []
    _pretty_element(suite._elem, "\t", head)
    if head[-1] == "/>\n":  # no property and no case: as pretty_xml writes an empty suite
        if not cases:
            return "".join(head), suite
        head[-1] = ">\n"
        return "".join([*head, *cases, "\t</testsuite>\n"]), suite
    return "".join([*head[:-1], *cases, head[-1]]), suite


def junit_chunks(run: RunResults) -> Iterator[bytes]:
    """junit.xml for `run` in UTF-8 pieces, built one device's suite at a time: a suite's element tree is
    serialized and dropped before the next is built, so a run of many devices never holds every test case
    as elements at once, nor the whole file as one string."""
    import junitparser

    suites: list[str] = []
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    answers = clause_answers(run)  # once for every device's suite
    for serial in run.device_serials:
        text, suite = _suite_text(run, serial, answers)
        for name in totals:
            totals[name] += int(getattr(suite, name))
        seconds += float(suite.time)
        suites.append(text)
    xml = junitparser.JUnitXml(safe_text(f"npuconf {run.run_id}".strip()))
    for name, value in totals.items():  # in the order JUnitXml.update_statistics sets them
        setattr(xml, name, value)
    xml.time = round(seconds, 3)
    if not suites:
        yield pretty_xml(xml._elem)
        return
    head: list[str] = []
    _pretty_element(xml._elem, "", head)  # no children yet: `<testsuites .../>`, opened here instead
    for part in ('<?xml version="1.0" encoding="utf-8"?>\n', "".join(head[:-1]), ">\n", *suites):
        yield part.encode("utf-8", errors="xmlcharrefreplace")
    yield f"</{xml._elem.tag}>\n".encode()


def write_junit(run: RunResults, path: Path) -> None:
    """Write junit.xml (UTF-8, XML 1.0) for `run` to `path`, replacing it atomically."""
    with atomic_output(path) as handle:
        for piece in junit_chunks(run):
            handle.write(piece)


def pretty_xml(root: ET.Element) -> bytes:
    """`root` as junitparser's `write(pretty=True)` writes it (its element tree serialized, parsed by
    minidom and written with `toprettyxml`: tab indents, a text-only element on one line, `<tag/>`
    when empty), byte for byte, without the round trip through a DOM, which took most of a report's time."""
    out: list[str] = ['<?xml version="1.0" encoding="utf-8"?>\n']
    _pretty_element(root, "", out)
    return "".join(out).encode("utf-8", errors="xmlcharrefreplace")


def _dom_text(text: str) -> str:
    # An XML parser reads a carriage return in text as a line feed; minidom writes what it read.
    return _dom_escape(text.replace("\r\n", "\n").replace("\r", "\n"))


def _dom_escape(data: str) -> str:
    return data.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace(">", "&gt;")


def _pretty_element(element: ET.Element, indent: str, out: list[str]) -> None:
    out.append(f"{indent}<{element.tag}")
    for name, value in element.attrib.items():
        out.append(f' {name}="{_dom_escape(value)}"')
    children: list[ET.Element | str] = [element.text] if element.text else []
    for child in element:
        children.append(child)
        if child.tail:
            children.append(child.tail)
    if not children:
        out.append("/>\n")
        return
    if len(children) == 1 and isinstance(children[0], str):
        out.append(f">{_dom_text(children[0])}</{element.tag}>\n")
        return
    out.append(">\n")
    for node in children:
        if isinstance(node, str):
            out.append(f"{indent}\t{_dom_text(node)}\n")
        else:
            _pretty_element(node, indent + "\t", out)
    out.append(f"{indent}</{element.tag}>\n")
