"""A prepared device: probe ready, pairs discovered; runs scenarios one batch at a time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reference_model.caps import DeviceCaps
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict

from .. import KIT_VERSION
from ..probe import Pairs, ScenarioTrace, api_missing_line, compile_program
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
from .discovery import probed_pairs
from .discovery_cache import BuildDiscoveries, discover
from .judging import Outcome

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


def prepare_device(target: Target, builds: BuildDiscoveries | None = None) -> Device:
    """Prepare the target and discover its supported pairs and vnpu control, or take an answer found
    before for its build (by another device of the run in `builds`, or in the user cache) once the device
    has confirmed it (host/run/discovery_cache.py)."""
    info = target.prepare()
    discovery = discover(target, builds)
    found, trace = discovery.found, discovery.trace
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
        # The raw trace this device answered (a discovery or the confirmation of a kept answer, which gives
        # the same pairs): `verify` derives the pairs and the failure from it again.
        "discovery_trace": list(trace.lines) if trace is not None else [],
        "discovery_failed": failed,
        "discovery_source": discovery.source,
        # The claim (reports/answers/claim.py) reads it: clauses only a 64-bit pointer can exercise are not
        # asked of a 32-bit device.
        "pointer_bits": pointer_bits(info),
    }
    return Device(target.serial, info, caps_from_info(info), notes, failed)


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
