"""The replay command of a result: `npuconf run` with every option of the recorded run that changes
the outcome (reports.recorded.run_options) and `--scenario` naming exactly its scenario. In a merged run each
result is replayed with the configuration of the run it came from (the plan's `merged_from`)."""

from __future__ import annotations

from collections.abc import Mapping

from .plan_options import OPTION
from .results import ResultRecord, RunResults
from .run_options import replay_options, run_command


def _configuration(run: RunResults, device: str) -> tuple[str, Mapping[str, object], str | None]:
    """(target, options, profile) the result of `device` was run with."""
    plan = run.plan
    if plan is None:
        return "", {}, None
    for source in reversed(plan.merged_from or ()):  # newest input first: the one whose result won
        devices = source.get("devices")
        options = source.get("options")
        target = source.get("target")
        profile = source.get("profile")
        if (isinstance(devices, list) and device in devices and isinstance(options, dict)
                and isinstance(target, str)):
            return target, options, profile if isinstance(profile, str) else plan.profile
    return plan.target, plan.options, plan.profile


def replay_command(run: RunResults, record: ResultRecord) -> str:
    """The command that runs this one scenario again with every option that changes its outcome."""
    target, options, profile = _configuration(run, record.device)
    serials: list[str] = []
    if target == OPTION["serials"].target:  # a kind whose devices are named by their adb serial
        adb_serial = run.devices.get(record.device, {}).get("adb_serial")
        serials.append(adb_serial if isinstance(adb_serial, str) and adb_serial else record.device)
    return run_command(replay_options(target, options, profile, serials), record.scenario)
