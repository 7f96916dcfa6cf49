"""A waiver file that does not follow docs/waivers.md: one line naming the file, the entry and the field,
with what was found in words (never a Python repr), exit 3."""

import pytest

from tests.conftest import npuconf

ENTRY_TAIL = '    device: "*"\n    reason: known\n    expires: 2030-01-01\n'

CASES = {
    "both": (
        "waivers:\n  - clause: free-returns\n    scenario: free.empty_list\n" + ENTRY_TAIL,
        "waivers[0]: expected exactly one of `scenario` or `clause`, "
        "found both (clause 'free-returns', scenario 'free.empty_list')",
    ),
    "neither": (
        "waivers:\n  - reason: known\n    device: x\n",
        "waivers[0]: expected exactly one of `scenario` or `clause`, found neither (fields: reason, device)",
    ),
    "entry_not_mapping": (
        "waivers:\n  - [1, 2]\n",
        "waivers[0]: expected a mapping with scenario or clause, device, reason, expires, found a list",
    ),
    "clause_list": (
        "waivers:\n  - clause: [a, b]\n" + ENTRY_TAIL,
        "waivers[0].clause: expected a non-empty string, found a list",
    ),
    "reason_mapping": (
        'waivers:\n  - clause: free-returns\n    device: "*"\n    reason: {a: 1}\n    expires: 2030-01-01\n',
        "waivers[0].reason: expected a non-empty reason, found a mapping",
    ),
    "device_number": (
        "waivers:\n  - clause: free-returns\n    device: 5\n    reason: known\n    expires: 2030-01-01\n",
        "waivers[0].device: expected a fingerprint glob, found 5",
    ),
    "no_expiry": (
        'waivers:\n  - clause: free-returns\n    device: "*"\n    reason: known\n',
        "waivers[0].expires: expected a date YYYY-MM-DD, found nothing",
    ),
    "expiry_list": (
        'waivers:\n  - clause: free-returns\n    device: "*"\n    reason: known\n    expires: [1]\n',
        "waivers[0].expires: expected a date YYYY-MM-DD, found a list",
    ),
    "impossible_date": (
        'waivers:\n  - clause: free-returns\n    device: "*"\n    reason: known\n    expires: 2030-13-01\n',
        "file: expected valid YAML, found a value that cannot be read (month must be in 1..12)",
    ),
    "syntax": (
        "waivers:\n  - clause: a\n   device: x: y\n",
        "line 3, column 4: expected valid YAML, found a syntax error (did not find expected '-' indicator)",
    ),
    "version_other": ("version: 2\nwaivers: []\n", "version: expected 1 (or no `version`), found 2"),
    "version_list": ("version: [1]\nwaivers: []\n", "version: expected 1 (or no `version`), found a list"),
    # keys of several types: named, not a TypeError from sorting them
    "mixed_top_keys": ("waivers: []\n1: a\nb: c\n", "1: expected only `waivers` (and `version`), found '1'"),
    "top_list": ("- a\n- b\n", "file: expected a mapping with a `waivers` list, found a list"),
    "waivers_mapping": (
        "waivers: {a: 1}\n",
        "file: expected a mapping with a `waivers` list, found a mapping without a `waivers` list",
    ),
}


def run_with_waivers(tmp_path, waivers):
    return npuconf(
        "run", "--target", "local", "-k", "free.empty_list", "--waivers", waivers, "--out", tmp_path / "o", "-q"
    )


def one_line_usage_error(done):
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "datetime" not in done.stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_waiver_error_names_file_entry_and_field_in_words(tmp_path, case):
    text, expected = CASES[case]
    path = tmp_path / "waivers.yaml"
    path.write_text(text)
    line = one_line_usage_error(run_with_waivers(tmp_path, path))
    assert line == f"npuconf: {path}: {expected}"
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_non_utf8_waiver_bytes_are_replaced_not_a_crash(tmp_path):
    path = tmp_path / "waivers.yaml"
    path.write_bytes(b'waivers:\n  - clause: "\xff\xfe"\n' + ENTRY_TAIL.encode())
    line = one_line_usage_error(run_with_waivers(tmp_path, path))
    assert f"--waivers {path}: waivers[0].clause '\ufffd\ufffd': not a clause ID" in line


@pytest.mark.parametrize(
    ("make", "problem"), [(lambda p: p.mkdir(), "Is a directory"), (lambda p: None, "No such file")]
)
def test_waiver_path_that_is_not_a_readable_file(tmp_path, make, problem):
    path = tmp_path / "waivers"
    make(path)
    line = one_line_usage_error(run_with_waivers(tmp_path, path))
    assert line.startswith(f"npuconf: --waivers {path}: {problem}") and "expected a readable YAML waiver file" in line


def test_version_1_and_a_valid_entry_are_accepted(tmp_path):
    path = tmp_path / "waivers.yaml"
    path.write_text("version: 1\nwaivers:\n  - clause: free-returns\n" + ENTRY_TAIL)
    done = run_with_waivers(tmp_path, path)
    assert done.returncode == 0, done.stderr
