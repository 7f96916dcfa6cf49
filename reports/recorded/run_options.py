"""The options of an `npuconf run` command line that reproduce a recorded configuration: target, impl,
cross, personality, policy, capacity, profile, scenarios, waivers, timeout multiplier, adb servers and
serial. Options at their default are left out; the target never is (`run` and `fuzz` default to
different targets). One function, so that the replay lines of `run` and of `fuzz` cannot drift apart;
each option is read with its type and flag from reports/recorded/plan_options.py."""

from __future__ import annotations

import functools
import os
import shlex
import sys
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
    if target == OPTION["adb_servers"].target:  # the kind that reaches its devices through adb servers
        for server in typed.adb_servers:
            parts += [OPTION["adb_servers"].flag, server]
        for serial in serials:
            parts += [OPTION["serials"].flag, serial]
    return parts


@functools.cache
def npuconf_words() -> tuple[str, ...]:
    """The words that start this kit's command line from any directory and any shell, whatever is on PATH:
    the absolute path of the running `npuconf` script (README's `.venv/bin/npuconf`), else of the one beside
    the running interpreter (as pip installs it: `python -m host`, the pytest layer), else this interpreter's
    absolute path and `-m host`. docs/architecture.md, "Printed commands"."""
    started = sys.argv[0] if sys.argv else ""
    if os.path.basename(started) == "npuconf" and os.path.isfile(started):
        return (os.path.abspath(started),)
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "npuconf")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return (beside,)
    return (os.path.abspath(sys.executable), "-m", "host")


def npuconf_command(*args: str) -> str:
    """`/abs/path/npuconf ARGS...`, quoted for a POSIX shell: a command a user can paste as printed."""
    return " ".join(shlex.quote(p) for p in (*npuconf_words(), *args))


def run_command(options: Sequence[str], scenario_id: str | None = None) -> str:
    """`npuconf run OPTIONS [--scenario ID]` (npuconf as `npuconf_words` gives it), quoted for a POSIX shell.
    The id is matched exactly: `-k` matches substrings, and one scenario id may be part of another."""
    return npuconf_command("run", *options, *(["--scenario", scenario_id] if scenario_id else []))


def portable_command(command: object) -> object:
    """A printed command without the words that name where this kit is installed (`npuconf_words`: a path
    ending in `npuconf`, or an interpreter and `-m host`), which start with `npuconf` instead: what two
    machines printing the same replay or errata line agree on. Anything that is not such a command is
    returned as is."""
    if not isinstance(command, str):
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) > 1 and os.path.basename(words[0]) == "npuconf":
        rest = words[1:]
    elif len(words) > 3 and words[1:3] == ["-m", "host"]:
        rest = words[3:]
    else:
        return command
    return " ".join(shlex.quote(w) for w in ["npuconf", *rest])
