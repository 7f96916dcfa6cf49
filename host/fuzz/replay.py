"""The `npuconf run` commands that replay a fuzz run's scenarios on its recorded configuration
(session.configuration); reports.recorded.run_options builds the options, as for `npuconf run`'s own replay lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.recorded.run_options import replay_options, run_command


def replay(config: dict[str, Any], scenarios: Path, scenario_id: str | None = None,
           serials: Sequence[str] = ()) -> str:
    """`npuconf run` of the scenarios under ``scenarios`` (only ``scenario_id`` if given) on the recorded
    configuration; ``serials``: the adb devices that found them."""
    options = replay_options(config["target"], {**config, "scenarios": str(scenarios.absolute())},
                             config.get("profile"), serials)
    return run_command(options, scenario_id)
