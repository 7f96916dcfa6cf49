"""The options of an `npuconf run` command line that reproduce a recorded configuration: target, impl,
cross, personality, policy, capacity, profile, scenarios, waivers, timeout multiplier, adb servers and
serial. Options at their default are left out; the target never is (`run` and `fuzz` default to
different targets). One function, so that the replay lines of `run` and of `fuzz` cannot drift apart;
each option is read with its type and flag from reports/plan_options.py."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Final

from .plan_options import OPTION, read_plan_options

# The options a replay line repeats, in the order it gives them (the profile after `capacity`).
BEFORE_PROFILE: Final = ("impl", "cross", "personality", "policy", "capacity")
AFTER_PROFILE: Final = ("scenarios", "waivers", "timeout_multiplier")


def replay_options(target: str, options: Mapping[str, object], profile: str | None = None,
                   serials: Sequence[str] = ()) -> list[str]:
    """`--target ... --impl ...` for ``target`` and ``options`` (keys as in a run plan's options:
    impl, cross, personality, policy, capacity, scenarios, waivers, timeout_multiplier, adb_servers);
    ``serials``: the adb devices to name (adb only). A malformed option is left out, as if not given."""
    typed = read_plan_options(options)
    parts: list[str] = []
    if target:
        parts += ["--target", target]

    def given(keys: Sequence[str]) -> None:
        for key in keys:
            value = getattr(typed, key)
            if value is not None and value != OPTION[key].default:
                parts.extend([OPTION[key].flag, str(value)])

    given(BEFORE_PROFILE)
    if profile and profile != OPTION["profile"].default:
        parts += [OPTION["profile"].flag, profile]
    given(AFTER_PROFILE)
    if target == "adb":
        for server in typed.adb_servers:
            parts += [OPTION["adb_servers"].flag, server]
        for serial in serials:
            parts += [OPTION["serials"].flag, serial]
    return parts


def run_command(options: Sequence[str], scenario_id: str | None = None) -> str:
    """`npuconf run OPTIONS [--scenario ID]`, quoted for a POSIX shell. The id is matched exactly: `-k`
    matches substrings, and one scenario id may be part of another."""
    parts = ["npuconf", "run", *options, *(["--scenario", scenario_id] if scenario_id else [])]
    return " ".join(shlex.quote(p) for p in parts)
