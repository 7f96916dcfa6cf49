"""The README's quick start is exactly two commands, and CI runs the test one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README quick start has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_run_and_test():
    run, test = quick_start_commands()
    assert "npuconf run" in run
    assert "pytest" in test


def test_ci_runs_the_readme_test_command():
    _, test = quick_start_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci
