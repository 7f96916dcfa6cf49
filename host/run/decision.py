"""The one verdict decision: from what happened to a scenario on a device, its verdict.

`npuconf run`, the pytest layer, `npuconf rejudge` and `npuconf verify` all call `decide`. Its input,
`WhatHappened`, holds only what the trace and the device's discovery show, so the offline commands,
which rebuild it from a stored record, decide exactly as the run did:

1. the device could not be prepared, or its pair discovery failed and the scenario needs pairs → ERROR;
2. a requirement the device lacks, or a program that cannot be built for its pairs → NOT_APPLICABLE;
3. the scenario never ran (no trace): NOT_EXECUTED, or ERROR when the host or the device failed first;
4. the trace shows API functions missing from the implementation → NOT_APPLICABLE;
5. the host's marker ends the trace: `timeout` → TIMEOUT, `error` (the probe process failed, an
   unreadable line) → ERROR; no `exit` event at all → ERROR;
6. otherwise the model judges the trace (PASS, WARN, FAIL, CRASH, or ERROR for a malformed trace), a
   FAIL covered by a waiver becomes WAIVED, and a PASS whose allocations the device legally refused
   is marked so (the run tries it again, reports/answers/claim.py does not count it as exercising).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from reference_model.caps import DeviceCaps
from reference_model.scenario import Scenario
from reference_model.trace import Exit, missing_functions, read_line
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver

from ..probe import CompiledScenario, CompileError, Pairs, compile_scenario, exit_event_scenario
from ..targets import Device
from .discovery import probed_pairs
from .judging import Outcome, allocation_refused, judge_lines, not_run

# What the trace's last `exit` event says about how the scenario ended.
ENDED_BY_PROBE: Final = "probe"
ENDED_BY_HOST_TIMEOUT: Final = "host-timeout"
ENDED_BY_HOST_ERROR: Final = "host-error"
NEVER_ENDED: Final = "open"

MODEL_BASIS: Final = "the model judged the trace"
REASON_BYTES: Final = 2000  # a host marker's reason as shown (the marker may come from a bundle)


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """What the decision needs of the device, all of it re-derivable from its device record."""

    caps: DeviceCaps
    pairs: Pairs
    discovery_failed: str | None = None
    unavailable: str | None = None  # why the device could not be prepared at all


@dataclass(frozen=True, slots=True)
class Judging:
    """How traces are judged: the clause quotes, the profile, and the waivers as of a day."""

    catalogue: Mapping[str, str]
    profile: str
    waivers: Sequence[Waiver] = ()
    today: dt.date | None = None


@dataclass(frozen=True, slots=True)
class NotRun:
    """Why a scenario has no trace. The trace cannot show it, so offline it is taken as recorded, but
    only ever as one of the two verdicts that leave a run incomplete."""

    verdict: Verdict  # NOT_EXECUTED, or ERROR when the host or the device failed before it
    reason: str

    def __post_init__(self) -> None:
        if not self.verdict.traceless:
            raise ValueError(f"a scenario without a trace is NOT_EXECUTED or ERROR, not {self.verdict}")


@dataclass(frozen=True, slots=True)
class WhatHappened:
    scenario: Scenario
    device: DeviceFacts
    fingerprint: str  # the device build a waiver's `device:` is matched against
    lines: tuple[str, ...] = ()  # the trace as recorded, host markers included
    not_run: NotRun | None = None  # set when the scenario never ran (no trace)


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    basis: str  # the evidence the verdict rests on, in a few words (verify's messages)
    allocations_refused: bool = False  # a PASS that did not exercise what follows its allocations

    @property
    def verdict(self) -> Verdict:
        return self.outcome.verdict

    @property
    def judged(self) -> bool:
        """Whether the model judged a trace (step 6), not a rule before it."""
        return self.basis == MODEL_BASIS


# Requirements a scenario may have and still run when pair discovery failed: it then needs nothing that
# discovery finds (pairs, the vnpu control). Such scenarios keep judging what the device does get
# right or wrong (isSupported's own answers, requests, cookies); the rest are ERROR.
WITHOUT_DISCOVERY: Final = frozenset({"pointer-64"})


def needs_discovery(scenario: Scenario) -> bool:
    return not scenario.requires <= WITHOUT_DISCOVERY


def missing_capability(scenario: Scenario, caps: DeviceCaps, pairs: Pairs) -> str | None:
    """Why the device cannot exercise the scenario, or None when it can."""
    for need in sorted(scenario.requires):
        if need == "supported-pair" and pairs.supported is None:
            return "the device supports no (device number, buffer type) pair"
        if need == "unsupported-pair" and pairs.unsupported is None:
            return "no unsupported (device number, buffer type) pair was found to test with"
        if need == "vnpu-control" and not caps.vnpu_control:
            return "the implementation has no vnpu control entry point (real devices cannot be preempted on demand)"
        if need == "capacity" and caps.capacity_bytes is None:
            return "the device declares no capacity"
        if need == "pointer-64" and caps.pointer_bits == 32:
            return "the device's pointers are 32 bits wide: a 64-bit raw cookie does not fit in one"
        if need.startswith("policy-") and (caps.policy != need[7:] or caps.capacity_bytes is None):
            declared = f"policy {caps.policy}" if caps.policy and caps.capacity_bytes is not None else "no policy"
            return f"the scenario predicts the {need[7:]} allocation policy; the device declares {declared}"
    return None


def device_facts(device: Device) -> DeviceFacts:
    return DeviceFacts(device.caps, Pairs.from_caps(device.caps, probed_pairs()), device.discovery_failed)


def device_fingerprint(device: Device) -> str:
    return fingerprint_of(device.info, device.serial)


def fingerprint_of(info: Mapping[str, object], serial: str) -> str:
    """The build a waiver's `device:` is matched against: the fingerprint, else the serial."""
    found = info.get("fingerprint")
    return found if isinstance(found, str) and found else serial


def before_running(scenario: Scenario, device: DeviceFacts) -> Decision | CompiledScenario:
    """Steps 1-2: the scenario compiled for the device, or its verdict without running it."""
    if device.unavailable is not None:
        return Decision(not_run(Verdict.ERROR, device.unavailable), "the device could not be prepared")
    if device.discovery_failed is not None and needs_discovery(scenario):
        basis = "pair discovery failed on this device and the scenario needs its pairs"
        return Decision(not_run(Verdict.ERROR, device.discovery_failed), basis)
    missing = missing_capability(scenario, device.caps, device.pairs)
    if missing is not None:
        return Decision(not_run(Verdict.NOT_APPLICABLE, missing), f"requirements: {missing}")
    try:
        return compile_scenario(scenario, device.pairs)
    except CompileError as exc:
        return Decision(not_run(Verdict.NOT_APPLICABLE, str(exc)), f"requirements: {exc}")


def after_running(happened: WhatHappened, judging: Judging) -> Decision:
    """Steps 3-6, for a scenario that was compiled and handed to the device."""
    if not happened.lines:
        given = happened.not_run or NotRun(Verdict.NOT_EXECUTED, "the probe stopped before this scenario ran")
        return Decision(not_run(given.verdict, given.reason), "no trace: the scenario never ran")
    missing = missing_functions(happened.lines)
    if missing is not None:
        outcome = not_run(Verdict.NOT_APPLICABLE, "implementation lacks " + ", ".join(missing))
        return Decision(outcome, "the trace shows API functions missing from the implementation")
    end, reason = trace_end(happened.lines, happened.scenario.id)
    if end == ENDED_BY_HOST_TIMEOUT:
        outcome = not_run(Verdict.TIMEOUT, reason or "the host gave up waiting for the device")
        return Decision(outcome, "the host's timeout marker ends the trace")
    if end == ENDED_BY_HOST_ERROR:
        outcome = not_run(Verdict.ERROR, reason or "the probe process failed")
        return Decision(outcome, "the host's error marker ends the trace")
    if end == NEVER_ENDED:
        basis = "the trace never reaches the scenario's exit"
        return Decision(not_run(Verdict.ERROR, basis), basis)
    outcome = judge_lines(
        happened.scenario,
        happened.lines,
        happened.device.caps,
        judging.catalogue,
        judging.profile,
        judging.waivers,
        happened.fingerprint,
        judging.today,
    )
    refused = outcome.verdict is Verdict.PASS and allocation_refused(happened.lines, happened.device.caps)
    return Decision(outcome, MODEL_BASIS, refused)


def decide(happened: WhatHappened, judging: Judging) -> Decision:
    """The verdict of a scenario from what happened (steps 1-6 of the module docstring)."""
    before = before_running(happened.scenario, happened.device)
    if isinstance(before, Decision):
        return before
    return after_running(happened, judging)


def trace_end(lines: Sequence[str], scenario_id: str) -> tuple[str, str | None]:
    """How the trace ended (ENDED_BY_* or NEVER_ENDED) and, for a host marker, the host's reason."""
    for line in reversed(lines):
        if exit_event_scenario(line) != scenario_id:
            continue
        event = read_line(line)
        if not isinstance(event, Exit):
            return NEVER_ENDED, None
        if not event.host:
            return ENDED_BY_PROBE, None
        reason = event.reason[:REASON_BYTES] if event.reason else None
        return (ENDED_BY_HOST_TIMEOUT if event.status == "timeout" else ENDED_BY_HOST_ERROR), reason
    return NEVER_ENDED, None
