"""Numbers read from outside: integers past Python's int-string limit and non-finite durations are a
record problem named in one line, never a traceback, and never reach junit.xml or a verified bundle."""

import json
import sys

import pytest

from tests.hostile.conftest import cli, text

DIGITS = sys.get_int_max_str_digits() + 700  # past the int-string conversion limit (4300 by default)


def _edit_result(run_dir, edit):
    """Rewrite the first result record's line of results.jsonl with `edit(line) -> line`."""
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "result")
    lines[index] = edit(lines[index])
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    return index + 1


def _long_integer_duration(line):
    head, _, tail = line.partition('"duration_ms":')
    number_end = next(i for i, c in enumerate(tail) if c in ",}")
    return head + '"duration_ms":' + "7" * DIGITS + tail[number_end:]


@pytest.mark.parametrize("command", ["report", "store import", "bundle"])
def test_integer_past_the_digit_limit_is_a_named_record_problem(run_copy, tmp_path, command):
    line = _edit_result(run_copy, _long_integer_duration)
    args = {
        "report": ["report", run_copy],
        "store import": ["store", "import", "--store", tmp_path / "s.sqlite", run_copy],
        "bundle": ["bundle", run_copy, "--out", tmp_path / "b.tar.gz"],
    }[command]
    done = cli(*args)
    output = text(done)
    assert done.returncode == 0 and "Traceback" not in output, output
    if command == "report":  # the line is skipped (its pair is NOT_EXECUTED) and named
        summary = json.loads((run_copy / "summary.json").read_text())
        assert any(f"line {line}: not readable JSON (an integer of more than" in p for p in summary["problems"])


def test_verify_rejects_a_bundle_holding_an_integer_past_the_digit_limit(run_copy, tmp_path):
    line = _edit_result(run_copy, _long_integer_duration)
    archive = tmp_path / "long.tar.gz"
    assert cli("bundle", run_copy, "--out", archive).returncode == 0
    done = cli("verify", archive)
    output = text(done)
    assert done.returncode == 1 and "Traceback" not in output, output
    assert f"bundle rejected: results: results.jsonl line {line}: not readable JSON" in output


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_duration_is_refused_and_never_reaches_junit(run_copy, tmp_path, value):
    _edit_result(run_copy, lambda line: line.replace('"duration_ms":', f'"duration_ms":{value},"was":', 1))
    done = cli("report", run_copy)
    assert done.returncode == 0 and "Traceback" not in text(done), text(done)
    junit = (run_copy / "junit.xml").read_text()
    assert "nan" not in junit.lower() and "inf" not in junit.lower()
    summary = json.loads((run_copy / "summary.json").read_text())
    assert any("'duration_ms' should be a finite number" in p for p in summary["problems"])
    archive = tmp_path / "nan.tar.gz"
    assert cli("bundle", run_copy, "--out", archive).returncode == 0
    verified = cli("verify", archive)
    assert verified.returncode == 1, text(verified)
    assert "'duration_ms' should be a finite number" in text(verified)


def test_the_record_reader_skips_a_line_past_the_digit_limit(run_copy):
    from reports.recorded.records import read_records

    line = _edit_result(run_copy, _long_integer_duration)
    records = read_records(run_copy)
    total = len((run_copy / "results.jsonl").read_text().splitlines())
    assert [n for n, _ in records.lines] == [n for n in range(1, total + 1) if n != line]
    assert any(f"line {line}: not readable JSON (an integer of more than" in p for p in records.problems)
