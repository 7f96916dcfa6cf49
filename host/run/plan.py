"""What a run is asked to do (the request), what it will do (the plan), and what a resume has left."""

from __future__ import annotations

import argparse
import datetime as dt
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver

from ..errors import UsageError
from ..targets import DEFAULT_CAPACITY, VnpuProfile


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


@dataclass
class RunPlan:
    run_id: str
    out_dir: Path
    scenarios: tuple[Scenario, ...]
    catalogue: dict[str, str]
    profile: str
    target_name: str
    waivers: tuple[Waiver, ...] = ()
    # The day waivers are judged against for the whole run (recorded as options.waivers_as_of), so a run
    # crossing midnight, a resume and `npuconf verify` all apply the same waivers.
    waivers_as_of: dt.date | None = None
    jobs: int = 1
    timeout_multiplier: float = 1.0
    corpus_hash: str = ""
    model_hash: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    shard: bool = False  # --shard: each build's devices share its scenarios (host/run/shard.py)
    claim_basis: dict[str, Any] | None = None  # host/suite/basis.py


@dataclass(frozen=True, slots=True)
class Resume:
    """`npuconf run --resume`: what is left to run per device, on top of the results already recorded."""

    todo: dict[str, tuple[str, ...]]  # device -> scenario ids still to run
    described: frozenset[str]  # devices results.jsonl already describes
    kept: tuple[Verdict, ...]  # verdicts of the results that stay


# Upper bounds for the numbers a run takes from its user or from a plan it resumes (a plan may come
# from someone else): beyond them a run only hangs or exhausts the host.
MAX_TIMEOUT_MULTIPLIER = 100.0
MAX_JOBS = 64
MAX_DEVICES = 64


def check_target_options(timeout_multiplier: float, devices: int, target: str | None, jobs: int = 1) -> None:
    """The options `npuconf run` and `npuconf fuzz` share, checked alike (``target`` None: not chosen yet,
    any target may still be virtual)."""
    if not 0 < timeout_multiplier <= MAX_TIMEOUT_MULTIPLIER:  # also refuses nan
        raise UsageError(
            f"--timeout-multiplier {timeout_multiplier}: expected a number above 0, at most {MAX_TIMEOUT_MULTIPLIER:g}"
        )
    if not 1 <= devices <= MAX_DEVICES:
        raise UsageError(f"--devices {devices}: expected a number of devices from 1 to {MAX_DEVICES}")
    if not 1 <= jobs <= MAX_JOBS:
        raise UsageError(f"-j {jobs}: expected a number of probe processes from 1 to {MAX_JOBS}")
    if devices != 1 and target not in (None, "virtual"):
        raise UsageError(f"--devices is for --target virtual, not --target {target}")


@dataclass(frozen=True, slots=True)
class RunRequest:
    target: str = "local"  # or "virtual", "adb", "auto" (adb devices if attached, else virtual)
    impl: Path | None = None
    profile: str = "published-37"
    personality: str = "published"
    policy: str = "budget"
    capacity: int | None = None
    waivers: Path | None = None
    keyword: str | None = None
    scenario_ids: tuple[str, ...] = ()  # --scenario: exact ids
    clauses: tuple[str, ...] = ()
    out: Path | None = None
    timeout_multiplier: float = 1.0
    jobs: int | None = None  # -j; None: lanes.default_lanes(target)
    build_dir: Path | None = None
    scenarios: Path | None = None
    cross: str | None = None
    devices: int = 1  # virtual
    serials: tuple[str, ...] = ()  # adb
    adb_servers: tuple[str, ...] = ()  # adb, HOST:PORT
    # False: `adb_servers` come from a plan this user did not write (a foreign --resume), so a server of this
    # host among them is used only while it is this user's, as the default server is
    adb_servers_named: bool = True
    device_names: tuple[str, ...] = ()  # virtual: names to give the devices (resume)
    store: str | None = None  # results store: a path or postgresql:// URL (default: npuconf.sqlite next to the run dir)
    shard: bool = False  # split each build's corpus across its devices

    @classmethod
    def from_args(cls, args: argparse.Namespace, target: str) -> RunRequest:
        """The request a command line gives (`run` and `fuzz`): every field its parser has, by the field's
        name or, for a repeatable option, the singular its flag has (`--serial` gives `serials`)."""
        values: dict[str, Any] = {"target": target}
        for name in cls.__dataclass_fields__:
            dest = _REPEATED.get(name, name)
            if name != "target" and hasattr(args, dest):
                value = getattr(args, dest)
                values[name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)

    def vnpu_profile(self) -> VnpuProfile:
        """The virtual NPU's profile the request asks for (`--capacity`, `--policy`, `--personality`)."""
        return VnpuProfile(
            capacity=self.capacity if self.capacity is not None else DEFAULT_CAPACITY,
            policy=self.policy,
            personality=self.personality,
            declared_capacity=self.capacity,
        )


# RunRequest fields given by a repeatable option: the option's argparse dest.
_REPEATED: Final = {"serials": "serial", "adb_servers": "adb_server", "clauses": "clause"}
