"""What happened in a recorded run, rebuilt from its records for the one verdict decision.

`rejudge` and `verify` both decide a stored result again through host.run.decide; this module turns
results.jsonl into the decision's inputs the same way for both: each device's facts re-derived from
its raw discovery trace (never from the pairs it claims), and each result's trace as stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reference_model.caps import DeviceCaps
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reports.recorded.results import ResultRecord, RunResults

from ..probe import Pairs, ScenarioTrace
from ..run import (
    DISCOVERY_ID,
    Decision,
    DeviceFacts,
    Judging,
    NotRun,
    WhatHappened,
    caps_from_info,
    decide,
    fingerprint_of,
    parse_discovery,
    pointer_bits,
    probed_pairs,
)

NEVER_PREPARED = "device preparation failed (its device record holds nothing but its serial)"


@dataclass(frozen=True, slots=True)
class RecordedDevices:
    facts: dict[str, DeviceFacts]
    problems: tuple[str, ...]  # where a device record disagrees with its own evidence


def recorded_devices(run: RunResults) -> RecordedDevices:
    """Each device's pairs, vnpu control and discovery outcome derived again from its discovery trace."""
    facts: dict[str, DeviceFacts] = {}
    problems: list[str] = []
    for serial in run.device_serials:
        info = run.devices.get(serial)
        if info is None:
            if any(r.recorded and r.device == serial for r in run.results):
                problems.append(f"{serial}: results but no device record")
            continue
        if set(info) <= {"serial"}:
            # What `npuconf run` writes for a device it could not prepare: every scenario is ERROR.
            facts[serial] = DeviceFacts(DeviceCaps(), Pairs(None, None), unavailable=NEVER_PREPARED)
            continue
        lines = info.get("discovery_trace")
        failed_recorded = info.get("discovery_failed")
        caps = caps_from_info(info)
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            if info.get("supported_pairs") is not None or failed_recorded is None:
                problems.append(f"{serial}: no discovery trace; its pairs and capabilities cannot be re-derived")
            facts[serial] = DeviceFacts(caps, Pairs.from_caps(caps, probed_pairs()))
            continue
        found = parse_discovery(ScenarioTrace(DISCOVERY_ID, tuple(lines), 0.0))
        derived_pairs = sorted([list(p) for p in found.supported_pairs]) if found.supported_pairs is not None else None
        failed = f"pair discovery failed: {found.problem}" if found.problem else None
        if not lines:
            failed = "pair discovery failed: the probe wrote no discovery trace"
        if derived_pairs != info.get("supported_pairs"):
            problems.append(f"{serial}: recorded supported pairs differ from its discovery trace")
        if found.vnpu_control != (info.get("vnpu_control") is True):
            problems.append(f"{serial}: recorded vnpu control differs from its discovery trace")
        if (failed is None) != (failed_recorded is None):
            problems.append(f"{serial}: recorded discovery outcome differs from its discovery trace")
        if "pointer_bits" in info and info.get("pointer_bits") != pointer_bits(info):
            # The claim drops 64-bit-cookie clauses on a 32-bit device: the width must follow its ABI.
            problems.append(f"{serial}: recorded pointer width differs from its ABI")
        facts[serial] = DeviceFacts(caps, Pairs.from_caps(caps, probed_pairs()), failed)
    return RecordedDevices(facts, tuple(problems))


def what_happened(
    record: ResultRecord, scenario: Scenario, device: DeviceFacts, info: Mapping[str, object]
) -> WhatHappened:
    """The decision's input for a stored result: its trace as stored. Why a scenario has no trace cannot
    be derived; it is taken as recorded, but only as NOT_EXECUTED or ERROR (both leave the run incomplete)."""
    unreached = None
    if not record.trace:
        given = record.verdict if record.verdict.traceless else Verdict.NOT_EXECUTED
        unreached = NotRun(given, record.reason or "no trace recorded")
    return WhatHappened(scenario, device, fingerprint_of(info, record.device), record.trace, unreached)


def decide_record(
    record: ResultRecord, scenario: Scenario, device: DeviceFacts, info: Mapping[str, object], judging: Judging
) -> Decision:
    return decide(what_happened(record, scenario, device, info), judging)
