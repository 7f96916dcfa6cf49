"""The fuzz command's stderr lines: the configuration and bounds at the start, then what every device
is doing (fuzzing, shrinking a group, confirming its replays) at most once a second."""

from __future__ import annotations

import time

from floor.words import counted

from .campaign import GROUP_SHRINK_S, GROUP_SHRINKS, OVERRUN_S, Activity, FuzzProgress, FuzzRequest


def start_line(request: FuzzRequest) -> str:
    """`fuzz: target local (default: local), seed 0, budget 30s for the whole command ...`."""
    target = request.run.target + (" (default: local)" if request.target_defaulted else "")
    budget = request.budget
    if budget.seconds is not None:
        bound = (f"budget {budget.text()} for the whole command, shrinking included (ends by about "
                 f"{budget.seconds + OVERRUN_S:g} s); a shrink at most {request.shrink_budget_s:g} s")
    else:
        bound = (f"budget {budget.text()}, shrinking not included: a shrink at most {request.shrink_budget_s:g} s, "
                 f"a group's at most {GROUP_SHRINKS} shrinks while under {GROUP_SHRINK_S:g} s")
    ending = ", until found" if request.until_found else ""
    return f"fuzz: target {target}, seed {request.seed}, {bound}{ending}"


def _left(deadline: float | None, now: float) -> str:
    return "" if deadline is None else f", {max(0.0, deadline - now):.0f} s left"


def activity_text(activity: Activity, now: float) -> str:
    where = f"{activity.clause} on {activity.device}"
    if activity.phase == "shrinking":
        return (f"shrinking group {activity.group} of {activity.groups} ({where}, {activity.candidates} "
                f"candidates tried{_left(activity.deadline, now)})")
    if activity.phase == "confirming":
        return (f"confirming replays ({activity.replay} of {activity.replays}) of group {activity.group} "
                f"({where}{_left(activity.deadline, now)})")
    return f"fuzzing on {activity.device}"


def progress_line(progress: FuzzProgress, now: float | None = None) -> str:
    """`fuzz: fuzzing, 1200 programs, 61.3/s, 1 divergence, 12 s left; shrinking group 1 of 1 (...)`: the rate is
    per second of fuzzing (shrinking time left out)."""
    now = time.monotonic() if now is None else now
    rate = progress.programs / progress.fuzzing_s if progress.fuzzing_s > 0 else 0.0
    fuzzing = "fuzzing, " if any(a.phase == "fuzzing" for a in progress.activities) else ""
    line = f"fuzz: {fuzzing}{counted(progress.programs, 'program')}, {rate:.1f}/s, "
    line += counted(progress.divergences, "divergence")
    if progress.left_s is not None:
        line += f", {max(0.0, progress.left_s):.0f} s left"
    busy = [activity_text(a, now) for a in progress.activities if a.phase != "fuzzing"]
    if busy:
        line += "; " + "; ".join(busy)
    return line
