"""junit.xml: one suite per device, one case per scenario, verdicts mapped, hostile text kept valid."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

from junitparser import Error, Failure, Skipped, xunit2
from synthetic_results import DIVERGENCE, ResultsBuilder, load, scenario

from reports.answers.clause_answers import answering_clauses, clause_answers
from reports.recorded.results import safe_text
from reports.renderers.junit import _suite_head, _testcase, pretty_xml, write_junit

HOSTILE = "<script>alert(1)</script>\x01\x1b[31mred\x00&amp;\ud800"


def build_junit(run):
    """junit.xml as one junitparser tree, every device's suite whole: what `write_junit` streams, suite by
    suite, must serialize to the same bytes."""
    import junitparser

    xml = junitparser.JUnitXml(safe_text(f"npuconf {run.run_id}".strip()))
    answers = clause_answers(run)
    for serial in run.device_serials:
        suite = _suite_head(run, serial, run.devices.get(serial, {}), answers)
        suite.add_testcases([_testcase(r, answering_clauses(run, r)) for r in run.for_device(serial)])
        xml.add_testsuite(suite)
    xml.update_statistics()
    return xml


def _junit(builder: ResultsBuilder, tmp_path: Path) -> xunit2.JUnitXml:
    path = tmp_path / "junit.xml"
    write_junit(load(builder.write()), path)
    return xunit2.JUnitXml.fromfile(str(path))


def _cases(xml: xunit2.JUnitXml) -> dict[tuple[str, str], xunit2.TestCase]:
    return {(suite.name, case.name): case for suite in xml for case in suite}


def _props(case: xunit2.TestCase) -> dict[str, str]:
    return {p.name: p.value for p in case.properties()}


def test_one_suite_per_device_one_case_per_scenario(mixed_run: ResultsBuilder, tmp_path: Path):
    xml = _junit(mixed_run, tmp_path)
    suites = list(xml)
    assert [s.name for s in suites] == ["emulator-5554", "vnpu-1"]
    for suite in suites:
        assert [c.name for c in suite] == [
            "alloc.basic",
            "alloc.enomem",
            "cookie.replace",
            "map.prot",
            "preempt.mapped",
            "load.async",
            "free.twice",
        ]
        assert suite.tests == 7
    case = _cases(xml)[("emulator-5554", "alloc.basic")]
    assert case.classname == "alloc"
    assert case.time == 0.013  # 12.5 ms, rounded to the millisecond
    assert _props(case) == {
        "verdict": "PASS",
        "clauses": "alloc-callback-once,alloc-supported-succeeds",
        "answers": "alloc-callback-once,alloc-supported-succeeds",  # a PASS answers the clauses it demonstrated
        "discrepancy": "",
        "waiver": "",
        "title": "title of alloc.basic",
    }
    assert case.is_passed and case.system_out is None


def test_suite_properties_carry_device_info_and_run_identity(mixed_run: ResultsBuilder, tmp_path: Path):
    xml = _junit(mixed_run, tmp_path)
    suite = next(s for s in xml if s.name == "vnpu-1")
    props = {p.name: p.value for p in suite.properties()}
    for key in ("run_id", "kit_version", "vocabulary", "profile", "corpus_hash", "model_hash"):
        assert props[key], key
    assert props["profile"] == "published-37"
    assert props["device.serial"] == "vnpu-1"
    assert props["device.personality"] == "aosp-2026"
    assert props["device.capacity"] == str(1 << 24)
    assert props["device.abis"] == '["x86_64"]'
    assert props["device.npu_feature"] == "true"


def test_verdict_mapping(mixed_run: ResultsBuilder, tmp_path: Path):
    cases = _cases(_junit(mixed_run, tmp_path))

    fail = cases[("emulator-5554", "alloc.enomem")]
    (result,) = fail.result
    assert isinstance(result, Failure) and result.type == "FAIL"
    assert result.message.startswith("alloc-supported-succeeds: step 4: observed ")
    assert "ENOMEM" in result.message and "allowed:" in result.message
    assert "An allocation for a supported pair succeeds" in result.text
    assert _props(fail)["discrepancy"] == "D4"
    assert '"ev":"cb"' in fail.system_out

    waived = cases[("vnpu-1", "alloc.enomem")]
    assert waived.result == []
    assert _props(waived)["verdict"] == "WAIVED"
    assert _props(waived)["waiver"].startswith("known AOSP bug b/123")
    assert waived.system_out.startswith("WAIVED: known AOSP bug b/123")

    for key, verdict in (
        (("emulator-5554", "cookie.replace"), "CRASH"),
        (("emulator-5554", "map.prot"), "TIMEOUT"),
        (("vnpu-1", "map.prot"), "ERROR"),
    ):
        (result,) = cases[key].result
        assert isinstance(result, Error), key
        assert result.type == verdict
        assert result.message.startswith(f"{verdict}: ")
        assert _props(cases[key])["verdict"] == verdict

    for key, verdict in (
        (("emulator-5554", "preempt.mapped"), "NOT_APPLICABLE"),
        (("vnpu-1", "free.twice"), "NOT_EXECUTED"),
    ):
        (result,) = cases[key].result
        assert isinstance(result, Skipped), key
        assert result.message.startswith(f"{verdict}: ")
    assert cases[("emulator-5554", "preempt.mapped")].result[0].message == "NOT_APPLICABLE: requires vnpu-control"


def test_statistics(mixed_run: ResultsBuilder, tmp_path: Path):
    path = tmp_path / "junit.xml"
    write_junit(load(mixed_run.write()), path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("14", "1", "3", "2")


def test_trace_excerpt_is_centred_on_the_line_named(mixed_run: ResultsBuilder, tmp_path: Path):
    cases = _cases(_junit(mixed_run, tmp_path))
    out = cases[("vnpu-1", "map.prot")].system_out  # 60 lines; the ERROR names trace line 3
    assert "trace lines 1-21 of 60, centred on line 3" in out
    assert out.count("xxxxxxxxxx") == 21
    assert ">>     3  xxxxxxxxxx" in out


def test_times_are_rounded_to_the_millisecond(builder: ResultsBuilder, tmp_path: Path):
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS", duration_ms=35.095999999999995)
    path = tmp_path / "junit.xml"
    write_junit(load(builder.write()), path)
    assert 'time="0.035"' in path.read_text(encoding="utf-8")


def test_hostile_device_text_yields_valid_xml(builder: ResultsBuilder, tmp_path: Path):
    builder.plan(["dev<1>"], [scenario("alloc.x"), scenario("alloc.y")])
    builder.device("dev<1>", model=HOSTILE, manufacturer="\x7f\x85ok")
    builder.result(
        "dev<1>",
        "alloc.x",
        "FAIL",
        divergence={**DIVERGENCE, "observed": HOSTILE, "quote": "</failure>]]>"},
        reason=HOSTILE,
        trace=[HOSTILE, '{"ev":"begin"}'],
    )
    builder.result("dev<1>", "alloc.y", "ERROR", reason=HOSTILE, trace=["\x02\x03"])
    path = tmp_path / "junit.xml"
    write_junit(load(builder.write()), path)

    root = ET.parse(path).getroot()  # the standard library parser accepts it
    assert root.find("testsuite").get("name") == "dev<1>"
    xml = xunit2.JUnitXml.fromfile(str(path))  # and so does junitparser
    (suite,) = list(xml)
    props = {p.name: p.value for p in suite.properties()}
    assert props["device.model"] == "<script>alert(1)</script>\\x01\\x1b[31mred\\x00&amp;\\ud800"
    assert props["device.manufacturer"] == "\x7f\x85ok"  # allowed in XML 1.0: kept as is
    case = next(iter(suite))
    (failure,) = case.result
    assert "<script>alert(1)</script>" in failure.message
    assert "</failure>]]>" in failure.text
    assert "<script>alert(1)</script>\\x01\\x1b[31m" in case.system_out
    raw = path.read_text(encoding="utf-8")
    assert "<script>" not in raw  # only ever as escaped text
    assert "&lt;script&gt;" in raw


def test_the_file_is_written_as_junitparser_pretty_prints_it(mixed_run: ResultsBuilder, tmp_path: Path):
    """reports/renderers/junit.py serializes the tree itself (the DOM round trip was most of a report's time):
    byte for byte what `JUnitXml.write(pretty=True)` writes, hostile text and line breaks included."""
    run = load(mixed_run.write())
    xml = build_junit(run)
    xml._elem.find("testsuite").set("name", safe_text(HOSTILE) + "\r\nline\ttab")
    case = xml._elem.find("testsuite/testcase")
    system_out = ET.SubElement(case, "system-out")
    system_out.text = "first\r\nsecond\rthird\n<&>\"'"
    ET.SubElement(case, "empty")
    mixed = ET.SubElement(case, "mixed")
    mixed.text = "before"
    ET.SubElement(mixed, "inner").tail = "after\r"
    expected = io.BytesIO()
    xml.write(expected, pretty=True)
    path = tmp_path / "junit.xml"
    path.write_bytes(pretty_xml(xml._elem))
    assert path.read_bytes() == expected.getvalue()
    write_junit(run, tmp_path / "written.xml")
    plain = io.BytesIO()
    build_junit(run).write(plain, pretty=True)
    assert (tmp_path / "written.xml").read_bytes() == plain.getvalue()
