"""The replay command of a result: `npuconf run` with every option of the recorded run that changes
the outcome (target, impl, cross, personality, policy, capacity, profile, scenarios, waivers, timeout
multiplier, adb server and serial) and `-k` naming the scenario."""

from __future__ import annotations

import shlex

from .results import ResultRecord, RunResults


def replay_command(run: RunResults, record: ResultRecord) -> str:
    """The command that runs this one scenario again with every option that changes its outcome."""
    parts = ["npuconf", "run"]
    plan = run.plan
    target = plan.target if plan else ""
    if target:
        parts += ["--target", target]
    options = plan.options if plan else {}

    def option(flag: str, key: str, default: object = None) -> None:
        value = options.get(key)
        if value is not None and value != "" and value != default:
            parts.extend([flag, str(value)])

    option("--impl", "impl")
    option("--cross", "cross")
    option("--personality", "personality", "published")
    option("--policy", "policy", "budget")
    option("--capacity", "capacity")
    if plan and plan.profile and plan.profile != "published-37":
        parts += ["--profile", plan.profile]
    option("--scenarios", "scenarios")
    option("--waivers", "waivers")
    option("--timeout-multiplier", "timeout_multiplier", 1.0)
    if target == "adb":
        servers = options.get("adb_servers")
        for server in servers if isinstance(servers, list) else []:
            parts += ["--adb-server", str(server)]
        adb_serial = run.devices.get(record.device, {}).get("adb_serial")
        parts += ["--serial", str(adb_serial) if isinstance(adb_serial, str) and adb_serial else record.device]
    parts += ["-k", record.scenario]
    return " ".join(shlex.quote(p) for p in parts)
