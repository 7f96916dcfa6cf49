"""The catalogue against the published text, and every testable clause / rule is exercised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reference_model.rules import cited_clauses, rule_clauses

from . import test_policies, test_rules_alloc_map, test_rules_load_preempt, test_rules_requests_cookies  # noqa: F401
from .coverage import COVERED

ROOT = Path(__file__).resolve().parents[2]
SPEC_NAME = "shared/seeds/000_460defc37496a22d.txt"
# The published text sits beside the checkout (../shared); development machines keep it in /work/shared.
SPEC = next((p for p in (ROOT.parent / SPEC_NAME, Path("/work") / SPEC_NAME) if p.is_file()), ROOT.parent / SPEC_NAME)
CHAPTERS = {"requests", "cookies", "allocation", "support", "mapping", "free", "priority", "loading", "preemption",
            "crashes"}


def clauses() -> list[dict]:
    data = yaml.safe_load((ROOT / "conformance" / "clauses.yaml").read_text())
    assert data["version"] == 1
    return data["clauses"]


def normalise(text: str) -> str:
    text = re.sub(r"\[([^\]]*?)\]\(https?://[^)]*\)", r"\1", text)
    text = text.replace("**", "")
    text = re.sub(r"(?<!\\)\*(\w+)\*", r"\1", text)
    for a, b in (("\\[", "["), ("\\]", "]"), ("\\|", "|"), ("\\*", "*"), ("\\_", "_"), ("`", "")):
        text = text.replace(a, b)
    return re.sub(r"\s+", " ", text)


def test_catalogue_shape():
    seen = set()
    for c in clauses():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", c["id"]), c["id"]
        assert c["id"] not in seen
        seen.add(c["id"])
        assert c["chapter"] in CHAPTERS
        assert c["testability"] in {"device", "virtual-only", "death-test", "not-testable"}
        if c["testability"] == "not-testable":
            assert c.get("reason")


def test_quotes_are_published_sentences():
    if not SPEC.exists():
        pytest.skip(f"the published text is not at {SPEC}")
    spec = normalise(SPEC.read_text())
    missing = [c["id"] for c in clauses() if re.sub(r"\s+", " ", c["quote"]) not in spec]
    assert not missing


def test_every_testable_clause_is_cited_by_a_rule():
    cited = cited_clauses()
    uncited = [c["id"] for c in clauses() if c["testability"] != "not-testable" and c["id"] not in cited]
    assert not uncited
    known = {c["id"] for c in clauses()}
    assert not set(cited) - known


def test_every_rule_has_a_conforming_and_a_non_conforming_test():
    missing = [r for r in rule_clauses() if COVERED.get(r, set()) != {"good", "bad"}]
    assert not missing, missing


def test_rule_docstrings_quote_their_clause():
    import importlib

    for name in rule_clauses():
        module, fn = name.split(".")
        doc = getattr(importlib.import_module(f"reference_model.{module}"), fn).__doc__ or ""
        assert "Spec: " in doc, name
