"""The `npuconf run` options the user actually gave, their defaults, and what `--resume` checks against its plan.

The `run` sub-parser leaves these options at None, so a value the user typed (even one equal to the
default) stays distinguishable from one nobody gave; `apply_run_defaults` then fills in the defaults
in this one place. Each option's flag, default and type are the plan option's (reports/plan_options.py);
adding an option the plan records is a field there and one line of RUN_OPTIONS."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reports.floor.safe_io import console_text
from reports.plan_options import OPTION, PlanOptions

from ..errors import UsageError

# A value shown in a message is cut here: a plan is not trusted text and may hold anything.
_SHOWN_CHARS = 400


# The plan records the target as its own field, not as an option.
TARGET = "target"


@dataclass(frozen=True, slots=True)
class RunOption:
    dest: str  # the argparse dest
    plan_key: str  # where the plan records it: options.<key> (reports/plan_options.py), or its own target

    @property
    def flag(self) -> str:
        """As the user types it."""
        return "--target" if self.plan_key == TARGET else OPTION[self.plan_key].flag

    @property
    def default(self) -> object:
        """What nobody giving the option means (target None: adb devices if attached, else virtual; jobs
        None: lanes.default_lanes(target))."""
        return None if self.plan_key == TARGET else OPTION[self.plan_key].default


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("target", TARGET),
    RunOption("devices", "devices"),
    RunOption("serial", "serials"),
    RunOption("adb_server", "adb_servers"),
    RunOption("profile", "profile"),
    RunOption("personality", "personality"),
    RunOption("policy", "policy"),
    RunOption("capacity", "capacity"),
    RunOption("waivers", "waivers"),
    RunOption("keyword", "keyword"),
    RunOption("scenario_ids", "scenario_ids"),
    RunOption("clause", "clauses"),
    RunOption("scenarios", "scenarios"),
    RunOption("timeout_multiplier", "timeout_multiplier"),
    RunOption("jobs", "jobs"),
    RunOption("cross", "cross"),
    RunOption("shard", "shard"),
)


def apply_run_defaults(args: argparse.Namespace) -> dict[str, object]:
    """Fill in the default of every RUN_OPTIONS option the user did not give; return those the user gave
    (dest -> value as parsed)."""
    given: dict[str, object] = {}
    for option in RUN_OPTIONS:
        value = getattr(args, option.dest)
        if value is None:
            setattr(args, option.dest, list(option.default) if isinstance(option.default, tuple) else option.default)
        else:
            given[option.dest] = value
    return given


def check_resume_options(
    given: Mapping[str, object], options: PlanOptions, target: str, profile: str, shard: bool, plan_file: Path
) -> None:
    """A `run` option given with `--resume` must agree with the plan it resumes; the first that does not is
    a usage error naming both values and the file the plan lives in. The plan's own target, profile and
    shard stand for those options; an option an older plan lacks counts as the option's default."""
    own: dict[str, object] = {TARGET: target, "profile": profile, "shard": shard}
    for option in RUN_OPTIONS:
        if option.dest not in given:
            continue
        wanted = _comparable(given[option.dest])
        planned = own[option.plan_key] if option.plan_key in own else options.given(option.plan_key)
        recorded = _comparable(planned)
        if wanted != recorded:
            typed = option.flag if wanted is True else f"{option.flag} {_shown(wanted)}"  # --shard takes no value
            raise UsageError(
                f"{typed} conflicts with the resumed run's "
                f"{option.plan_key.replace('_', ' ')} {_shown(recorded)} ({plan_file}); "
                "drop the option or start a new run"
            )


def _comparable(value: object) -> object:
    """Paths as absolute path text (the command line made them absolute), repeatable options as sorted
    text, numbers as numbers: what a plan records and what the parser gives compare equal when they mean
    the same."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return tuple(sorted(str(v) for v in value))
    if value is None or isinstance(value, bool | int | float | str):
        return value  # 1 == 1.0: -j 1 agrees with a plan's 1
    return str(value)


def _shown(value: object) -> str:
    if value is None or value == ():
        text = "none"
    elif isinstance(value, tuple):
        text = ", ".join(value)
    elif isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return console_text(text)
