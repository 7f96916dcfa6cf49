"""docs/guide.md's numbers match the kit: guide §7's discrepancy range, guide §3's example FAIL from a real run."""

import json
import re

import pytest

from tests.conftest import ROOT, npuconf

GUIDE = ROOT / "docs" / "guide.md"
SCENARIO = "allocation.batch_of_64_distinct"


def section(number: int) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"\n## {number}. ")
    return text[start : text.index("\n## ", start + 1)]


def highest_discrepancy(text: str) -> int:
    return max(int(n) for n in re.findall(r"\bD(\d+)\b", text))


def test_guide_names_the_real_range_of_discrepancy_ids():
    (last,) = re.findall(r"the discrepancies D1 to D(\d+)", section(7))
    in_model = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "reference_model").rglob("*.py"))
    assert int(last) == highest_discrepancy(in_model)
    model_doc = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    profiles = model_doc[model_doc.index("## 5. Profiles") : model_doc.index("## 6. ")]
    assert int(last) == highest_discrepancy(profiles)


def example_rows() -> dict[str, str]:
    rows = re.findall(r"^\| ([a-zA-Z ]+) \| (.+) \|$", section(3), flags=re.M)
    return {key.strip(): value for key, value in rows}


@pytest.mark.slow
def test_guide_example_failure_is_what_a_run_gives_today(tmp_path, probe_build):
    run_dir = tmp_path / "run"
    npuconf("run", "--target", "local", "--personality", "aosp-2026", "--scenario", SCENARIO, "--out", run_dir, "-q")
    (failure,) = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["failures"]
    rows = example_rows()
    assert rows["heading"] == f"**{failure['verdict']}** `{failure['scenario']}` on `{failure['device']}`"
    assert rows["clause"].startswith(f"`{failure['clause']}`, quoted: \"{failure['quote']}\"")
    assert rows["observed"] == f"`{failure['observed']}`"
    assert rows["allowed"] == f"`{failure['allowed']}`"
    assert rows["why"] == failure["why"]
    assert rows["AOSP discrepancy"] == ", ".join(failure["discrepancies"])
    # the guide writes the checkout's path as /path/to/npuconf; the kit prints where it runs from
    assert rows["replay"] == f"`{failure['replay']}`".replace(str(ROOT), "/path/to/npuconf")
    excerpt = failure["excerpt"]
    prose = section(3)
    assert f"the whole\ntrace has {excerpt['total']} lines" in prose
    assert len(excerpt["lines"]) == 21 and "twenty-one numbered lines of the trace" in prose
    (step, line) = map(int, re.fullmatch(r"(\d+) \(trace line (\d+)\)", rows["step"]).groups())
    assert f"centred on line {line}, which is marked" in prose
    # The guide names both outcomes of one race: the callbacks arrive after alloc returns (its step and
    # line) or, on a loaded host, before (one step and two lines earlier, which it states too).
    if failure["step"] != step:
        assert (failure["step"], excerpt["focus"]) == (step - 1, line - 2)
        assert f"the step\nis {step - 1} and the line {line - 2}" in prose
    else:
        assert excerpt["focus"] == line
