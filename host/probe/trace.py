"""What a probe run hands back: one scenario's trace lines, a batch's outcome, and the markers in them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from reference_model.vocabulary import PROBE_LIST_LINES

from ..errors import StaleProbe


@dataclass(frozen=True, slots=True)
class ScenarioTrace:
    """The raw trace lines of one scenario, ending with the probe's `exit` event when it has one."""

    scenario_id: str
    lines: tuple[str, ...]
    duration_ms: float
    infra_error: str | None = None  # the probe process itself failed: verdict ERROR
    timed_out: str | None = None  # the host's watchdog gave up on the device: verdict TIMEOUT


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    completed: tuple[str, ...]
    api_missing: tuple[str, ...] | None
    error: str | None
    stderr: str = ""  # what the probe and the implementation printed (sanitizer reports land here)


def exit_event_scenario(line: str) -> str | None:
    """The scenario an `exit` event closes, or None when the line is anything else."""
    if '"exit"' not in line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and event.get("ev") == "exit":
        scenario = event.get("scenario")
        if isinstance(scenario, str):
            return scenario
    return None


def api_missing_symbols(line: str) -> tuple[str, ...] | None:
    if '"api_missing"' not in line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and event.get("ev") == "api_missing":
        return tuple(str(s) for s in event.get("symbols", ()))
    return None


def check_listed_op_table(probe: str, lines: Sequence[str], returncode: int) -> None:
    """Compare what `npuconf-probe --list` printed with the kit's vocabulary; StaleProbe on any difference."""
    got = tuple(line.rstrip("\r") for line in lines)
    if returncode == 0 and got == PROBE_LIST_LINES:
        return
    for probe_line, kit_line in zip(got + ("<missing>",) * len(PROBE_LIST_LINES), PROBE_LIST_LINES, strict=False):
        if probe_line != kit_line:
            raise StaleProbe(probe, probe_line, kit_line)
    raise StaleProbe(probe, got[len(PROBE_LIST_LINES)] if len(got) > len(PROBE_LIST_LINES) else "?", "<end of table>")
