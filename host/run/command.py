"""`npuconf run`: the request from the command line, progress on stderr, the answer on stdout.

A new run on the kit's virtual devices starts them first thing (head_start.py): the corpus load and the
plan overlap the devices' start."""

from __future__ import annotations

import argparse
import sys

from reports.recorded.plan_options import RUN

from ..errors import RunInterrupted
from ..options import apply_defaults
from .answer import print_answer
from .head_start import start_ahead
from .plan import RunRequest, check_target_options
from .progress import Progress
from .resume import resume_run
from .start import start_run


def run_command(args: argparse.Namespace) -> int:
    given = apply_defaults(args, RUN)
    check_target_options(args.timeout_multiplier, args.devices, args.target, 1 if args.jobs is None else args.jobs)
    request = RunRequest.from_args(args, args.target or "auto", RUN)
    ahead = start_ahead(request) if args.resume is None else None
    try:
        progress = None if args.quiet else Progress(sys.stderr)
        try:
            if args.resume is not None:
                outcome = resume_run(
                    args.resume,
                    progress.update if progress else None,
                    impl=args.impl,
                    store=args.store,
                    given=given,
                    build_dir=args.build_dir,
                    out=args.out,
                )
            else:
                outcome = start_run(request, progress.update if progress else None, ahead)
        finally:
            if progress:
                progress.finish()
    except KeyboardInterrupt:
        # start_run and resume_run turn an interrupt after the output directory is claimed into
        # RunInterrupted; one that escapes them came before anything was written.
        if ahead is not None:
            ahead.abandon(discard=True)
        raise RunInterrupted("interrupted during start-up: nothing was written; run again", 0) from None
    except BaseException:
        if ahead is not None:  # what was started for the run stops; made for nothing (no results), it is removed
            ahead.abandon(discard=True)
        raise
    # The answer first: the reports and the store import follow, before the command returns.
    print_answer(outcome.claim, outcome.counts, outcome.reports)
    sys.stdout.flush()
    outcome.finish()
    return outcome.exit_code
