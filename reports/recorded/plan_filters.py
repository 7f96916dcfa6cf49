"""The selection a plan records (`-k`, `--scenario`, `--clause`, `--scenarios`: the options
reports/recorded/plan_options.py marks as a selection), as the run's filters. A selection of the wrong type is
never guessed at: it is named as malformed, and a run with a malformed filter is partial (never a
claim), whatever it would have selected."""

from __future__ import annotations

from dataclasses import dataclass

from .plan_options import OPTION, PlanOptions


@dataclass(frozen=True, slots=True)
class Filters:
    keyword: str | None = None
    scenario_ids: tuple[str, ...] = ()
    clauses: tuple[str, ...] = ()
    scenarios: str | None = None
    malformed: tuple[str, ...] = ()  # one sentence per selection option recorded with another type

    @property
    def narrowed(self) -> bool:
        """Whether the plan's scenarios may be fewer than the corpus it names (or nobody can tell)."""
        return bool(self.keyword or self.scenario_ids or self.clauses or self.scenarios or self.malformed)

    def flags(self) -> list[str]:
        """As the user typed them (the configuration's `filters`)."""
        out = [f"{OPTION['keyword'].flag} {self.keyword}"] if self.keyword else []
        out.extend(f"{OPTION['scenario_ids'].flag} {i}" for i in self.scenario_ids)
        out.extend(f"{OPTION['clauses'].flag} {c}" for c in self.clauses)
        if self.scenarios:
            out.append(f"{OPTION['scenarios'].flag} {self.scenarios}")
        return out

    def reasons(self) -> list[str]:
        """Why the filters make the run partial."""
        out = [f"filtered with {OPTION['keyword'].flag} {self.keyword}"] if self.keyword else []
        if self.scenario_ids:
            out.append("filtered with " + " ".join(f"{OPTION['scenario_ids'].flag} {i}" for i in self.scenario_ids))
        if self.clauses:
            out.append("filtered with " + " ".join(f"{OPTION['clauses'].flag} {c}" for c in self.clauses))
        if self.scenarios:
            out.append(f"scenarios from {self.scenarios}")
        out.extend(self.malformed)
        return out


def filters_of(options: PlanOptions) -> Filters:
    return Filters(
        keyword=options.keyword,
        scenario_ids=options.scenario_ids,
        clauses=options.clauses,
        scenarios=options.scenarios,
        malformed=tuple(p for (key, _), p in zip(options.malformed, options.problems, strict=True)
                        if OPTION[key].selection),
    )
