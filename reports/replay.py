"""The replay command of a result: `npuconf run` with every option of the recorded run that changes
the outcome (reports.run_options) and `--scenario` naming exactly its scenario."""

from __future__ import annotations

from .results import ResultRecord, RunResults
from .run_options import replay_options, run_command


def replay_command(run: RunResults, record: ResultRecord) -> str:
    """The command that runs this one scenario again with every option that changes its outcome."""
    plan = run.plan
    target = plan.target if plan else ""
    serials: list[str] = []
    if target == "adb":
        adb_serial = run.devices.get(record.device, {}).get("adb_serial")
        serials.append(adb_serial if isinstance(adb_serial, str) and adb_serial else record.device)
    options = replay_options(target, plan.options if plan else {}, plan.profile if plan else None, serials)
    return run_command(options, record.scenario)
