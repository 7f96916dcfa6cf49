"""The `npuconf` console script: imports the command line only inside a guard, so that Ctrl-C while the
kit is still loading (its imports take a noticeable fraction of a second) ends with one line, not a traceback.

Once the command has returned, every file it wrote is written and closed: the process then ends without
the interpreter's teardown (freeing a whole run's objects one by one takes about a tenth of a second),
after the exit handlers ran and the console streams were flushed."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading

# The same value as reference_model.verdicts.RunExit.INCOMPLETE, spelled here so nothing is imported unguarded.
_INCOMPLETE = 2


def main() -> int:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        print("npuconf: interrupted before the command started: nothing was written", file=sys.stderr)
        return _INCOMPLETE
    code = cli_main()
    if not any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        _exit_now(code)
    return code  # a thread the command left running is waited for, as the interpreter does


def _exit_now(code: int) -> None:
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
