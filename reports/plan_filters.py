"""The selection options a plan records (`-k`, `--scenario`, `--clause`, `--scenarios`), read with the
types this kit writes them in. A value of any other type is never guessed at: it is named as malformed,
and a run with a malformed filter is partial (never a claim), whatever it would have selected."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

# plan option key -> (the flag it records, its type: one text, or a list of texts)
FILTER_OPTIONS: Final[dict[str, tuple[str, Literal["text", "list"]]]] = {
    "keyword": ("-k", "text"),
    "scenario_ids": ("--scenario", "list"),
    "clauses": ("--clause", "list"),
    "scenarios": ("--scenarios", "text"),
}
_SHOWN: Final = 80


@dataclass(frozen=True, slots=True)
class Filters:
    keyword: str | None = None
    scenario_ids: tuple[str, ...] = ()
    clauses: tuple[str, ...] = ()
    scenarios: str | None = None
    malformed: tuple[str, ...] = ()  # one sentence per option recorded with another type

    @property
    def narrowed(self) -> bool:
        """Whether the plan's scenarios may be fewer than the corpus it names (or nobody can tell)."""
        return bool(self.keyword or self.scenario_ids or self.clauses or self.scenarios or self.malformed)

    def flags(self) -> list[str]:
        """As the user typed them (the configuration's `filters`)."""
        out = [f"-k {self.keyword}"] if self.keyword else []
        out.extend(f"--scenario {i}" for i in self.scenario_ids)
        out.extend(f"--clause {c}" for c in self.clauses)
        if self.scenarios:
            out.append(f"--scenarios {self.scenarios}")
        return out

    def reasons(self) -> list[str]:
        """Why the filters make the run partial."""
        out = [f"filtered with -k {self.keyword}"] if self.keyword else []
        if self.scenario_ids:
            out.append("filtered with " + " ".join(f"--scenario {i}" for i in self.scenario_ids))
        if self.clauses:
            out.append("filtered with " + " ".join(f"--clause {c}" for c in self.clauses))
        if self.scenarios:
            out.append(f"scenarios from {self.scenarios}")
        out.extend(self.malformed)
        return out


def plan_filters(options: Mapping[str, object]) -> Filters:
    values: dict[str, object] = {}
    malformed: list[str] = []
    for key, (flag, kind) in FILTER_OPTIONS.items():
        value = options.get(key)
        if value is None or value == "" or value == []:
            continue
        if kind == "text" and isinstance(value, str):
            values[key] = value
        elif kind == "list" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            values[key] = tuple(value)
        else:
            expected = "a text" if kind == "text" else "a list of texts"
            shown = repr(value)[:_SHOWN]
            malformed.append(f"plan option {key} ({flag}) is {shown}, not {expected}: its selection is unknown")
    return Filters(
        keyword=_text(values.get("keyword")),
        scenario_ids=_texts(values.get("scenario_ids")),
        clauses=_texts(values.get("clauses")),
        scenarios=_text(values.get("scenarios")),
        malformed=tuple(malformed),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, tuple) else ()
