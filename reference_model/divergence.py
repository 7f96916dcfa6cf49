"""The first divergence of a FAIL (docs/formats.md §6, `divergence`): one type from the judge to the reports.

The judge makes it; results.jsonl stores it (`to_json`); the reports read it back (reports/recorded/records.py)
as the same type, with `observed` and `allowed` as the record holds them (any JSON value).
"""

from __future__ import annotations

import json
from dataclasses import dataclass


def render_value(value: object) -> str:
    """One-line text for a JSON value: strings as they are, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first event the model could not accept: the step in flight (None: teardown), the event's line in
    the trace (1-based; None when a record does not say), what was observed, what was allowed, and the
    clause with its quoted sentence."""

    step: int | None
    event: int | None
    observed: object
    allowed: tuple[object, ...]
    clause: str
    quote: str
    message: str

    def to_json(self) -> dict[str, object]:
        return {
            "step": self.step,
            "event": self.event,
            "observed": self.observed,
            "allowed": list(self.allowed),
            "clause": self.clause,
            "quote": self.quote,
            "message": self.message,
        }

    def one_line(self) -> str:
        where = f"step {self.step}" if self.step is not None else "teardown"
        return f"{self.clause}: {where}: observed {render_value(self.observed)}; allowed: {self.allowed_text()}"

    def allowed_text(self) -> str:
        return " | ".join(render_value(a) for a in self.allowed) or "nothing"

    def full_text(self) -> str:
        lines = [self.one_line()]
        if self.message:
            lines.append(self.message)
        lines.append(f"step: {self.step if self.step is not None else '-'}")
        lines.append(f"trace event: {self.event if self.event is not None else '-'}")
        lines.append(f"observed: {render_value(self.observed)}")
        lines.append(f"allowed: {self.allowed_text()}")
        lines.append(f"clause: {self.clause}")
        if self.quote:
            lines.append(f"spec: \u201c{self.quote}\u201d")
        return "\n".join(lines)
