"""Run-start discovery: which (device number, buffer type) pairs the device supports, and whether
the vnpu control entry point is there. Scenarios adapt to the answer (`$pair.*`, `requires`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from reference_model.scenario import Scenario, parse_scenario
from reference_model.trace import Exit, Ret, read_line
from reference_model.vocabulary import Op

from ..probe import ScenarioTrace

DEVICE_NUMBERS: Final = (0, 1, 2, 3, 2**31 - 1)
BUFFER_TYPES: Final = (1, 2, 3, 4)
DISCOVERY_ID: Final = "npuconf.discovery"
GRID: Final = tuple((d, t) for d in DEVICE_NUMBERS for t in BUFFER_TYPES)
# isSupported may legally return -1 ("if there is an error, returns -1 with errno set"), e.g. E2BIG for a
# long list: the whole grid is asked first, then in smaller batches, down to one request per call. Each
# pair takes its answer from the first call covering it that returned 0.
FALLBACK_BATCHES: Final = (8, 4, 2, 1)


def _batches() -> tuple[tuple[int, ...], ...]:
    """The grid indices each isSupported call of the discovery program asks, in order."""
    calls = [tuple(range(len(GRID)))]
    for size in FALLBACK_BATCHES:
        calls += [tuple(range(lo, min(lo + size, len(GRID)))) for lo in range(0, len(GRID), size)]
    return tuple(calls)


BATCHES: Final = _batches()
# What confirms an answer kept from before on a device: the discovery's first call alone (the whole grid at
# once) and the control probe, one probe process with one isSupported call.
CONFIRMATION_BATCHES: Final = BATCHES[:1]


def discovery_scenario(batches: Sequence[tuple[int, ...]] = BATCHES) -> Scenario:
    """The discovery program: every pair of the grid as a request, isSupported over `batches`, the control
    probe. With CONFIRMATION_BATCHES it is the confirmation (host/run/discovery_cache.py)."""
    steps: list[dict[str, Any]] = []
    for i, (device, buffer_type) in enumerate(GRID):
        steps += [
            {"req_create": {"req": f"r{i}"}},
            {"req_set_device": {"req": f"r{i}", "device": device}},
            {"req_set_type": {"req": f"r{i}", "type": buffer_type}},
            {"req_set_size": {"req": f"r{i}", "size": 4096}},
        ]
    for batch in batches:
        steps.append({"is_supported": {"reqs": [f"r{i}" for i in batch]}})
    steps.append({"vnpu": {"command": "delay_ms=0"}})
    data = {"id": DISCOVERY_ID, "title": "Discover supported pairs", "clauses": ["discovery"], "steps": steps}
    return parse_scenario(data, "<discovery>", "support")


@dataclass(frozen=True, slots=True)
class Discovered:
    supported_pairs: frozenset[tuple[int, int]] | None
    vnpu_control: bool
    problem: str | None
    # The first isSupported call answered the whole grid: the confirmation's one call can give this answer.
    whole_grid_at_once: bool = False

    def same_answer(self, other: Discovered) -> bool:
        """Both found their pairs, and found the same pairs and the same control."""
        return (
            self.problem is None
            and other.problem is None
            and self.supported_pairs is not None
            and (self.supported_pairs, self.vnpu_control) == (other.supported_pairs, other.vnpu_control)
        )


def parse_discovery(trace: ScenarioTrace) -> Discovered:
    # Each line on its own: a malformed line is skipped here (the discovery answer is what it found).
    events = [read_line(line, number) for number, line in enumerate(trace.lines, 1)]
    pairs: frozenset[tuple[int, int]] | None = None
    control = False
    problem = trace.infra_error
    answers: dict[int, bool] = {}  # grid index -> its answer, from the first call covering it that returned 0
    refused: str | None = None
    calls = 0
    at_once = False
    control_asked = False  # the program's last step, the vnpu control probe, answered (on any device it does)
    for event in events:
        if not isinstance(event, Ret):
            continue
        if event.op == Op.IS_SUPPORTED:
            # A trace of an earlier kit asks the whole grid once; this kit's then asks the fallback batches.
            batch = BATCHES[calls] if calls < len(BATCHES) else ()
            calls += 1
            results = event.extra.get("results")
            if event.ret == 0 and isinstance(results, list) and len(results) == len(batch):
                at_once = at_once or (calls == 1 and len(batch) == len(GRID))
                for index, ok in zip(batch, results, strict=True):
                    answers.setdefault(index, ok is True)
            elif refused is None:
                refused = f"isSupported returned {event.ret} errno {event.errno} during discovery"
        elif event.op == Op.VNPU:
            control = event.ret == 0
            control_asked = True
    if calls and len(answers) == len(GRID):
        pairs = frozenset(p for i, p in enumerate(GRID) if answers[i])
    elif refused is not None:
        missing = len(GRID) - len(answers)
        problem = problem or (f"{refused} (no call answered {missing} of the {len(GRID)} probed pairs, "
                              "in batches down to one request)" if calls > 1 else refused)
    exits = [e for e in events if isinstance(e, Exit)]
    if pairs is None and problem is None:
        status = exits[-1].status if exits else None
        if status == "timeout" or trace.timed_out is not None:
            problem = "isSupported did not return within the discovery limit"
        else:
            problem = "discovery trace has no isSupported result"
    if problem is None and not control_asked:
        # The pairs were known from an earlier call, but the probe never reached the control probe (an
        # isSupported fallback call crashed or hung): whether the device has vnpu control is unknown, and
        # taking it for "no control" would make every scenario needing it NOT_APPLICABLE, silently.
        ended = _how_it_ended(exits[-1]) if exits else "with no exit event"
        problem = f"the discovery ended before its vnpu control probe ({ended}); vnpu control is unknown"
    return Discovered(pairs, control, problem, at_once and pairs is not None)


def _how_it_ended(exit_event: Exit) -> str:
    """The discovery probe's end as a phrase: `signal (SIGSEGV)`, `code, exit code 3`, `timeout`."""
    if exit_event.signal:
        return f"{exit_event.status} ({exit_event.signal})"
    if exit_event.code not in (None, 0):
        return f"{exit_event.status}, exit code {exit_event.code}"
    return exit_event.status


def probed_pairs() -> Sequence[tuple[int, int]]:
    return GRID
