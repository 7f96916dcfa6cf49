"""The clause catalogue (conformance/clauses.yaml): clause ID, chapter, quoted sentence, testability."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from reference_model.errors import ScenarioInvalid

from .checkout import CATALOGUE_PATH
from .safe_yaml import load_yaml_text, read_yaml_bytes

TESTABILITY: Final = frozenset({"device", "virtual-only", "death-test", "not-testable"})


@dataclass(frozen=True, slots=True)
class Clause:
    id: str
    chapter: str
    quote: str
    testability: str
    reason: str | None

    @property
    def testable(self) -> bool:
        return self.testability != "not-testable"


@dataclass(frozen=True, slots=True)
class Catalogue:
    clauses: tuple[Clause, ...]

    def ids(self) -> frozenset[str]:
        return frozenset(c.id for c in self.clauses)

    def quotes(self) -> Mapping[str, str]:
        return {c.id: c.quote for c in self.clauses}

    def get(self, clause_id: str) -> Clause | None:
        return next((c for c in self.clauses if c.id == clause_id), None)


def load_catalogue(path: Path = CATALOGUE_PATH) -> Catalogue:
    source = str(path)
    try:
        raw = read_yaml_bytes(path)
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioInvalid(
            source, None, "file", str(exc).splitlines()[0], "a readable YAML clause catalogue"
        ) from None
    return _parsed(raw, source)


@functools.lru_cache(maxsize=8)
def _parsed(raw: bytes, source: str) -> Catalogue:
    """The catalogue in these bytes, parsed once per process (a run reads it for its plan and its claim)."""
    try:
        data = load_yaml_text(raw.decode("utf-8", errors="replace"), source)
    except yaml.YAMLError as exc:
        raise ScenarioInvalid(
            source, None, "file", str(exc).splitlines()[0], "a readable YAML clause catalogue"
        ) from None
    if not isinstance(data, Mapping) or not isinstance(data.get("clauses"), list):
        raise ScenarioInvalid(source, None, "clauses", type(data).__name__, "a mapping with a `clauses` list")
    seen: set[str] = set()
    clauses: list[Clause] = []
    for i, raw in enumerate(data["clauses"]):
        where = f"clauses[{i}]"
        if not isinstance(raw, Mapping):
            raise ScenarioInvalid(source, None, where, raw, "a mapping with id, chapter, quote, testability")
        for key in ("id", "chapter", "quote", "testability"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise ScenarioInvalid(source, None, f"{where}.{key}", raw.get(key), "a non-empty string")
        if raw["id"] in seen:
            raise ScenarioInvalid(source, None, f"{where}.id", raw["id"], "an ID not used by an earlier clause")
        if raw["testability"] not in TESTABILITY:
            raise ScenarioInvalid(
                source, None, f"{where}.testability", raw["testability"], "one of " + ", ".join(sorted(TESTABILITY))
            )
        reason = raw.get("reason")
        if raw["testability"] == "not-testable" and not isinstance(reason, str):
            raise ScenarioInvalid(source, None, f"{where}.reason", reason, "a reason for a not-testable clause")
        seen.add(raw["id"])
        clauses.append(Clause(raw["id"], raw["chapter"], raw["quote"].strip(), raw["testability"], reason))
    return Catalogue(tuple(clauses))
