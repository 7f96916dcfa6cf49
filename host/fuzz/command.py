"""`npuconf fuzz`: the request from the command line, progress on stderr, the answer on stdout."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from floor.words import counted
from reports.recorded.plan_options import FUZZ, OPTION

from ..errors import RunInterrupted, UsageError
from ..options import apply_defaults
from ..run import RunRequest, check_target_options, new_run_id
from ..targets.kinds import DEFAULT_KIND
from .campaign import AFTER_FIRST_FIND_S, Budget, FuzzProgress, FuzzRequest, fuzz
from .coverage import render as render_coverage
from .progress import progress_line, start_line


class _Progress:
    """What the devices are doing (host/fuzz/progress.py) on stderr, at most every second."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, progress: FuzzProgress) -> None:
        now = time.monotonic()
        if now - self.last < 1.0:
            return
        self.last = now
        print(progress_line(progress, now), file=sys.stderr, flush=True)


def _after_find_s(given: str | None) -> float:
    """--until-found's SECONDS: AFTER_FIRST_FIND_S when not given; a number of seconds >= 0 (as 20 or 20s)."""
    if not given:
        return AFTER_FIRST_FIND_S
    try:
        seconds = float(given.removesuffix("s"))
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise UsageError(f"--until-found {given}: expected the seconds to fuzz past the first divergence, "
                         "0 to 3600 (as 20 or 20s)")
    return seconds


def fuzz_command(args: argparse.Namespace) -> int:
    if args.batch < 1:
        raise UsageError(f"--batch {args.batch}: expected a number of programs >= 1")
    apply_defaults(args, FUZZ)
    target = args.target or DEFAULT_KIND
    check_target_options(args.timeout_multiplier, args.devices, target, 1 if args.jobs is None else args.jobs)
    library_kind = OPTION["impl"].target
    if args.impl is not None and target != library_kind:
        raise UsageError(f"--impl is for --target {library_kind}, not --target {target}")
    request = FuzzRequest(
        run=RunRequest.from_args(args, target, FUZZ),
        seed=args.seed,
        budget=Budget.parse(args.budget),
        batch=args.batch,
        until_found=args.until_found is not None,
        after_find_s=_after_find_s(args.until_found),
        target_defaulted=args.target is None,
    )
    print(start_line(request), file=sys.stderr, flush=True)
    out_dir: Path = args.out or Path("out") / f"fuzz-{new_run_id()}"
    try:
        outcome = fuzz(request, out_dir, None if args.quiet else _Progress())
    except KeyboardInterrupt:
        raise RunInterrupted("interrupted: the fuzz run wrote no report", 0) from None
    s = outcome.summary
    ended = {"found": ", stopped at the first divergence (--until-found)"}.get(s.status, "")
    print(f"fuzz: {counted(s.programs, 'program')} on {counted(len(s.devices), 'device')} ({s.programs_per_s}/s), "
          f"seed {s.seed}: {counted(len(s.divergences), 'divergence')}{ended}")
    for d in s.devices:
        line = f"  {d.device}: {counted(d.programs, 'program')} in {d.fuzzing_s:.1f} s ({d.programs_per_s}/s), "
        line += counted(d.divergences, "divergence")
        if d.status in ("lost", "unprepared", "failed"):
            line += f"; {d.status.upper()}, its part ended: {d.detail}"
        print(line)
    for v in s.divergences:
        where = v.clause or v.verdict
        if v.shrunk:
            replays = f"replays: {v.replay_text()}"
            cut = ", cut short" if v.cut_short else ""
            shrunk = f"shrunk{cut} {v.steps_before} -> {v.steps_after} steps ({replays})"
        else:
            shrunk = f"NOT SHRUNK ({v.steps_before} steps as generated)"
        print(f"  {where} on {v.device}: {counted(v.count, 'program')}, first after {v.found_after_s:.1f} s; "
              f"{shrunk}: {v.scenario}")
    if args.coverage:
        for line in render_coverage(outcome.coverage):
            print(line)
    if s.replay:
        print(f"replay: {s.replay}")
    for name, path in outcome.paths.items():
        print(f"{name}: {path}")
    return outcome.exit_code
