"""The options of an `npuconf run` command line that reproduce a recorded configuration: target, impl,
cross, personality, policy, capacity, profile, scenarios, waivers, timeout multiplier, adb servers and
serial. Options at their default are left out; the target never is (`run` and `fuzz` default to
different targets). One function, so that the replay lines of `run` and of `fuzz` cannot drift apart."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

DEFAULT_PROFILE = "published-37"


def replay_options(target: str, options: Mapping[str, object], profile: str | None = None,
                   serials: Sequence[str] = ()) -> list[str]:
    """`--target ... --impl ...` for ``target`` and ``options`` (keys as in a run plan's options:
    impl, cross, personality, policy, capacity, scenarios, waivers, timeout_multiplier, adb_servers);
    ``serials``: the adb devices to name (adb only)."""
    parts: list[str] = []
    if target:
        parts += ["--target", target]

    def option(flag: str, key: str, default: object = None) -> None:
        value = options.get(key)
        if value is not None and value != "" and value != default:
            parts.extend([flag, str(value)])

    option("--impl", "impl")
    option("--cross", "cross")
    option("--personality", "personality", "published")
    option("--policy", "policy", "budget")
    option("--capacity", "capacity")
    if profile and profile != DEFAULT_PROFILE:
        parts += ["--profile", profile]
    option("--scenarios", "scenarios")
    option("--waivers", "waivers")
    option("--timeout-multiplier", "timeout_multiplier", 1.0)
    if target == "adb":
        servers = options.get("adb_servers")
        for server in servers if isinstance(servers, (list, tuple)) else []:
            parts += ["--adb-server", str(server)]
        for serial in serials:
            parts += ["--serial", serial]
    return parts


def run_command(options: Sequence[str], scenario_id: str | None = None) -> str:
    """`npuconf run OPTIONS [--scenario ID]`, quoted for a POSIX shell. The id is matched exactly: `-k`
    matches substrings, and one scenario id may be part of another."""
    parts = ["npuconf", "run", *options, *(["--scenario", scenario_id] if scenario_id else [])]
    return " ".join(shlex.quote(p) for p in parts)
