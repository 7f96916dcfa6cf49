"""What a run is asked to do (the request), what it will do (the plan), and what a resume has left."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver
from reports.recorded.plan_options import OPTION, PlanOptions

from ..errors import UsageError
from ..options import given_options
from ..suite import Catalogue
from ..targets import DEFAULT_CAPACITY, VnpuProfile
from ..targets.kinds import DEFAULT_KIND
from .lanes import default_lanes

# The options of a request or plan that gives none: each reads as its default (PlanOptions.given).
_NONE_GIVEN: Final = PlanOptions()


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What a run will do: its scenarios and what it judges them with, on which target, with which options
    (recorded as they are in the plan record); built by `build_plan` only."""

    run_id: str
    out_dir: Path
    scenarios: tuple[Scenario, ...]
    catalogue: dict[str, str]
    target_name: str
    options: PlanOptions = _NONE_GIVEN
    waivers: tuple[Waiver, ...] = ()
    corpus_hash: str = ""
    model_hash: str = ""
    claim_basis: dict[str, Any] | None = None  # host/suite/basis.py

    @property
    def profile(self) -> str:
        return str(self.options.given("profile"))

    @property
    def jobs(self) -> int:
        return self.options.jobs if self.options.jobs is not None else 1

    @property
    def timeout_multiplier(self) -> float:
        return float(self.options.given("timeout_multiplier"))

    @property
    def shard(self) -> bool:
        """--shard: each build's devices share its scenarios (host/run/shard.py)."""
        return self.options.shard

    @property
    def waivers_as_of(self) -> dt.date | None:
        """The day waivers are judged against for the whole run, so a run crossing midnight, a resume and
        `npuconf verify` all apply the same waivers."""
        return self.options.waivers_as_of


def build_plan(
    run_id: str,
    out_dir: Path,
    target_name: str,
    options: PlanOptions,
    scenarios: Sequence[Scenario],
    catalogue: Catalogue,
    waivers: Sequence[Waiver] = (),
    hashes: tuple[str, str] = ("", ""),
    claim_basis: dict[str, Any] | None = None,
) -> RunPlan:
    """The one way a run's plan is made (`start_run`, `resume_run`): without `-j`, the target's default
    lanes; `hashes` are the corpus's and the model's."""
    if options.jobs is None:
        options = dataclasses.replace(options, jobs=default_lanes(target_name, int(options.given("devices"))))
    return RunPlan(
        run_id=run_id,
        out_dir=out_dir,
        scenarios=tuple(scenarios),
        catalogue=dict(catalogue.quotes()),
        target_name=target_name,
        options=options,
        waivers=tuple(waivers),
        corpus_hash=hashes[0],
        model_hash=hashes[1],
        claim_basis=claim_basis,
    )


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
    owner = OPTION["devices"].target  # the kind that starts devices
    if devices != 1 and target not in (None, owner):
        raise UsageError(f"--devices is for --target {owner}, not --target {target}")


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What `npuconf run` or `npuconf fuzz` is asked to do: the target, the options of the table
    (reports/recorded/plan_options.py; `given` for an option's default) and what the plan does not record."""

    target: str = DEFAULT_KIND  # a kind's name (host/targets/kinds/), or AUTO: adb devices if attached, else virtual
    options: PlanOptions = _NONE_GIVEN
    out: Path | None = None
    build_dir: Path | None = None
    store: str | None = None  # results store: a path or postgresql:// URL (default: npuconf.sqlite next to the run dir)
    # False: the options' `adb_servers` come from a plan this user did not write (a foreign --resume), so a
    # server of this host among them is used only while it is this user's, as the default server is
    adb_servers_named: bool = True
    device_names: tuple[str, ...] = ()  # virtual: names to give the devices (resume)

    @classmethod
    def from_args(cls, args: argparse.Namespace, target: str, command: str) -> RunRequest:
        """The request a parsed command line gives (`run` and `fuzz`), its defaults filled in."""
        return cls(target=target, options=given_options(args, command), out=args.out, build_dir=args.build_dir,
                   store=getattr(args, "store", None))

    @property
    def impl(self) -> Path | None:
        """--impl as a path (the options hold its absolute text)."""
        return Path(self.options.impl) if self.options.impl else None

    @property
    def scenario_root(self) -> Path | None:
        """--scenarios as a path."""
        return Path(self.options.scenarios) if self.options.scenarios else None

    def vnpu_profile(self) -> VnpuProfile:
        """The virtual NPU's profile the request asks for (`--capacity`, `--policy`, `--personality`)."""
        capacity = self.options.capacity
        return VnpuProfile(
            capacity=capacity if capacity is not None else DEFAULT_CAPACITY,
            policy=str(self.options.given("policy")),
            personality=str(self.options.given("personality")),
            declared_capacity=capacity,
        )
