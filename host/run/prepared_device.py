"""A prepared device: probe ready, pairs discovered; runs scenarios one batch at a time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from reference_model.caps import DeviceCaps
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reports.floor.limits import limit
from reports.floor.user_cache import read_entry, write_entry

from .. import KIT_VERSION
from ..probe import Pairs, ScenarioTrace, api_missing_line, compile_program, compile_scenario
from ..targets import Device, Target
from .decision import (
    Decision,
    Judging,
    NotRun,
    WhatHappened,
    after_running,
    before_running,
    device_facts,
    device_fingerprint,
)
from .discovery import DISCOVERY_ID, discovery_scenario, parse_discovery, probed_pairs
from .judging import Outcome

DISCOVERY_LIMIT_S = 30.0
DISCOVERY_CACHE: Final = "discovery"


ABIS_32 = frozenset({"armeabi-v7a", "armeabi", "x86", "arm", "armhf", "armv7l", "i386", "i686"})


def pointer_bits(info: Mapping[str, object]) -> int | None:
    """32 or 64 from the device's ABI (None: unknown): a 64-bit raw cookie needs 64."""
    abis = info.get("abis")
    abi = info.get("abi") or (abis[0] if isinstance(abis, list) and abis else None)
    return (32 if abi in ABIS_32 else 64) if isinstance(abi, str) and abi else None


def caps_from_info(info: Mapping[str, object]) -> DeviceCaps:
    """The judge's view of a device, rebuilt from its stored info (the one rule for run and rejudge)."""
    pairs_value = info.get("supported_pairs")
    pairs: frozenset[tuple[int, int]] | None = None
    if isinstance(pairs_value, list):
        found: set[tuple[int, int]] = set()
        for pair in pairs_value:
            if (
                isinstance(pair, list | tuple)
                and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
            ):
                found.add((int(pair[0]), int(pair[1])))
        pairs = frozenset(found)
    control = info.get("vnpu_control") is True
    declared = info.get("capacity_declared") is True  # `--capacity` or the device's debug.npuconf.capacity
    capacity = info.get("capacity") if control or declared else None
    policy = info.get("policy") if control or declared else None
    personality = info.get("personality")
    return DeviceCaps(
        pointer_bits=pointer_bits(info),
        supported_pairs=pairs,
        capacity_bytes=capacity if isinstance(capacity, int) and not isinstance(capacity, bool) else None,
        policy=policy if isinstance(policy, str) else None,
        personality=personality if isinstance(personality, str) else None,
        vnpu_control=control,
    )


def prepare_device(target: Target) -> Device:
    """Prepare the target and discover its supported pairs and vnpu control.

    A target that can name everything its answer depends on (`discovery_key`: the local target, by its
    probe, library and profile) gets the discovery trace an earlier run recorded for that key from the
    user cache instead of running it again; the trace is parsed as if it had just been recorded."""
    info = target.prepare()
    program = compile_program([compile_scenario(discovery_scenario(), Pairs(None, None))])
    key_of = getattr(target, "discovery_key", None)
    key = key_of(program) if key_of is not None else None
    traces: list[ScenarioTrace] = []
    cached = read_entry(DISCOVERY_CACHE, key) if key is not None else None
    lines = _cached_lines(cached)
    if lines is not None:
        traces.append(ScenarioTrace(DISCOVERY_ID, lines, 0.0))
    else:
        target.run_batch(
            program,
            [DISCOVERY_ID],
            [DISCOVERY_LIMIT_S * float(getattr(target, "timeout_multiplier", 1.0))],
            traces.append,
        )
    found = parse_discovery(traces[0]) if traces else None
    if key is not None and lines is None and traces and found is not None and found.problem is None:
        write_entry(DISCOVERY_CACHE, key, json.dumps(list(traces[0].lines)).encode())
    notes: tuple[str, ...] = ()
    failed: str | None = None
    if found is None or found.problem:
        failed = f"pair discovery failed: {found.problem if found else 'the probe wrote no discovery trace'}"
        notes = (failed,)
    pairs = found.supported_pairs if found else None
    info = info | {
        "supported_pairs": sorted([list(p) for p in pairs]) if pairs is not None else None,
        "vnpu_control": bool(found and found.vnpu_control),
        "kit_version": KIT_VERSION,
        "notes": list(notes),
        # The raw discovery trace: `verify` derives the pairs and the failure from it again.
        "discovery_trace": list(traces[0].lines) if traces else [],
        "discovery_failed": failed,
        # The claim (reports/claim.py) reads it: clauses only a 64-bit pointer can exercise are not
        # asked of a 32-bit device.
        "pointer_bits": pointer_bits(info),
    }
    return Device(target.serial, info, caps_from_info(info), notes, failed)


def _cached_lines(data: bytes | None) -> tuple[str, ...] | None:
    """A cached discovery trace: a JSON list of at most limit trace_lines strings, else None."""
    if data is None:
        return None
    try:
        lines = json.loads(data)
    except ValueError:
        return None
    if not isinstance(lines, list) or len(lines) > limit("trace_lines") or not all(isinstance(x, str) for x in lines):
        return None
    return tuple(lines)


@dataclass
class PreparedDevice:
    target: Target
    device: Device
    catalogue: Mapping[str, str]
    profile: str

    @classmethod
    def open(cls, target: Target, catalogue: Mapping[str, str], profile: str) -> PreparedDevice:
        return cls(target, prepare_device(target), catalogue, profile)

    @property
    def pairs(self) -> Pairs:
        return Pairs.from_caps(self.device.caps, probed_pairs())

    def run(self, scenario: Scenario, timeout_multiplier: float = 1.0) -> Outcome:
        """Run one scenario in its own batch and decide its verdict (the pytest path)."""
        facts = device_facts(self.device)
        compiled = before_running(scenario, facts)
        if isinstance(compiled, Decision):
            return compiled.outcome
        traces: list[ScenarioTrace] = []
        limit = (scenario.timeout_ms / 1000.0 + 2.0) * timeout_multiplier
        outcome = self.target.run_batch(compile_program([compiled]), [scenario.id], [limit], traces.append)
        lines = traces[0].recorded_lines() if traces else ()
        if outcome.api_missing is not None:
            lines = (api_missing_line(outcome.api_missing),)
        unreached = NotRun(Verdict.NOT_EXECUTED, outcome.error or "the probe stopped before the scenario ran")
        happened = WhatHappened(scenario, facts, device_fingerprint(self.device), lines, unreached)
        return after_running(happened, Judging(self.catalogue, self.profile)).outcome

    def info(self) -> dict[str, Any]:
        return self.device.info
