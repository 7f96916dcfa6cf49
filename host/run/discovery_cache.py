"""Discovery kept per device build: within a run, the devices of one build discover once; between runs,
the answer is kept in the per-user cache under everything it depends on. A kept answer is never used
blindly: the device confirms it first with one probe call (isSupported once over the whole grid, the
control probe), and discovers again when its answer differs.

A target names its build with `discovery_build()` (None: it cannot, and always discovers): the local
target by its probe's and library's digests and the vnpu profile, an adb device by its build fingerprint
and the probe (and, on the kit's virtual devices, the libvnpu and profile) it runs. The cache key adds
the target kind, the kit's discovery and confirmation programs and the model hash.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Final

from floor.limits import limit
from floor.user_cache import cache_key, read_entry, write_entry
from reference_model.scenario import Scenario

from ..probe import Pairs, ScenarioTrace, compile_program, compile_scenario
from ..suite import model_hash
from ..targets import Target
from .discovery import (
    CONFIRMATION_BATCHES,
    DISCOVERY_ID,
    Discovered,
    discovery_scenario,
    parse_discovery,
)

DISCOVERY_CACHE: Final = "discovery"
DISCOVERY_LIMIT_S: Final = 30.0

# What a device record says of its discovery (info `discovery_source`).
DISCOVERED: Final = "discovered on this device"
FROM_CACHE: Final = "kept from an earlier run (cache), confirmed on this device"


def from_device(serial: str) -> str:
    return f"found by {serial} (same build) in this run, confirmed on this device"


def rediscovered(why: str) -> str:
    return f"discovered on this device: {why}"


@dataclass(frozen=True, slots=True)
class Discovery:
    """A device's discovery: the trace it answered in this run (a full discovery or a confirmation, which
    parses to the same answer), what it found, and where the answer came from."""

    trace: ScenarioTrace | None  # None: the probe wrote no trace
    found: Discovered | None
    source: str
    serial: str = ""
    confirmed: bool = False  # an answer found before, confirmed by this device's one call

    @property
    def answered(self) -> bool:
        return self.found is not None and self.found.problem is None


class BuildDiscoveries:
    """The answers found in one run, by build key: the first device of a build discovers (or confirms the
    kept answer); the others run their confirmation meanwhile and compare it with that answer. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[str, tuple[threading.Event, list[Discovery]]] = {}

    def enter(self, key: str) -> bool:
        """Whether the calling device is the first of its build (it must then `publish`)."""
        with self._lock:
            if key in self._found:
                return False
            self._found[key] = (threading.Event(), [])
            return True

    def publish(self, key: str, discovery: Discovery | None) -> None:
        done, box = self._found[key]
        if discovery is not None:
            box.append(discovery)
        done.set()

    def wait(self, key: str) -> Discovery | None:
        """The answer of the build's first device (None: its discovery failed)."""
        done, box = self._found[key]
        done.wait()
        return box[0] if box else None


def discover(target: Target, builds: BuildDiscoveries | None = None) -> Discovery:
    """The device's supported pairs and control, from its own discovery or from a kept answer it confirmed."""
    program = _program(discovery_scenario())
    build = target.discovery_build()
    if build is None:
        return _discover(target, program, DISCOVERED)
    confirmation = _program(discovery_scenario(CONFIRMATION_BATCHES))
    key = cache_key(*build, program, confirmation, model_hash())
    first = builds.enter(key) if builds is not None else True
    # Only the build's first device in the run reads the cache; the others take what it found there or
    # discovered (which it may have kept meanwhile: that is not an earlier run's answer).
    kept = _kept(read_entry(DISCOVERY_CACHE, key)) if first else None
    result: Discovery | None = None
    try:
        if kept is None and first:
            result = _discover(target, program, DISCOVERED)
        else:
            # Confirmed first, then compared: meanwhile the build's first device finds its answer.
            confirmed = _discover(target, confirmation, "")
            reference = Discovery(None, kept, FROM_CACHE) if first or builds is None else builds.wait(key)
            result = _confirmed(target, program, confirmed, reference)
        if result.found is not None and result.found.whole_grid_at_once and not result.confirmed:
            assert result.trace is not None
            write_entry(DISCOVERY_CACHE, key, json.dumps(list(result.trace.lines)).encode())
        return result
    finally:
        if first and builds is not None:
            builds.publish(key, result if result is not None and result.answered else None)


def _confirmed(target: Target, program: str, confirmed: Discovery, reference: Discovery | None) -> Discovery:
    """The confirmation taken when it gives the reference's answer; else the device discovers again."""
    if reference is None or reference.found is None:  # the build's first device found no answer to confirm
        return _discover(target, program, DISCOVERED)
    if confirmed.found is not None and confirmed.found.same_answer(reference.found):
        source = FROM_CACHE if reference.source == FROM_CACHE else from_device(reference.serial)
        return Discovery(confirmed.trace, confirmed.found, source, target.serial, confirmed=True)
    if confirmed.found is None or confirmed.found.problem is not None:
        why = confirmed.found.problem if confirmed.found is not None else "the probe wrote no trace"
        return _discover(target, program, rediscovered(f"the confirmation gave no answer ({why})"))
    kept = "the kept answer" if reference.source == FROM_CACHE else f"the answer of {reference.serial}"
    return _discover(target, program, rediscovered(f"{kept} differed from this device's"))


def _discover(target: Target, program: str, source: str) -> Discovery:
    traces: list[ScenarioTrace] = []
    budget = DISCOVERY_LIMIT_S * target.timeout_multiplier
    target.run_batch(program, [DISCOVERY_ID], [budget], traces.append)
    trace = traces[0] if traces else None
    return Discovery(trace, parse_discovery(trace) if trace is not None else None, source, target.serial)


def _program(scenario: Scenario) -> str:
    return compile_program([compile_scenario(scenario, Pairs(None, None))])


def _kept(data: bytes | None) -> Discovered | None:
    """A kept discovery trace (a JSON list of at most limit trace_lines strings) parsed again as if just
    recorded; None unless its first call answered the whole grid (so one confirmation call can match it)."""
    if data is None:
        return None
    try:
        lines = json.loads(data)
    except ValueError:
        return None
    if not isinstance(lines, list) or len(lines) > limit("trace_lines") or not all(isinstance(x, str) for x in lines):
        return None
    found = parse_discovery(ScenarioTrace(DISCOVERY_ID, tuple(lines), 0.0))
    return found if found.problem is None and found.whole_grid_at_once else None
