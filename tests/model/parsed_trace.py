"""A whole trace at once, for the model's tests: the events `reference_model.trace.read_events` yields, in a
list, or the TraceError that ends them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reference_model.trace import ApiMissing, End, Event, TraceError, read_events


@dataclass(frozen=True, slots=True)
class Trace:
    events: tuple[Event, ...]
    complete: bool  # an `end` event was seen


def parse_trace(lines: Sequence[str]) -> Trace | TraceError:
    """Parse and check the envelope: begin first, call/ret paired, nothing after exit, exit present."""
    events: list[Event] = []
    for item in read_events(lines):
        if isinstance(item, TraceError):
            return item
        events.append(item)
    if isinstance(events[0], ApiMissing):
        return Trace(tuple(events), False)
    return Trace(tuple(events), any(isinstance(ev, End) for ev in events))
