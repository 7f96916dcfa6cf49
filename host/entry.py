"""The `npuconf` console script: imports the command line only inside a guard, so that Ctrl-C while the
kit is still loading (its imports take a noticeable fraction of a second) ends with one line, not a traceback."""

from __future__ import annotations

import sys

# The same value as reference_model.verdicts.RunExit.INCOMPLETE, spelled here so nothing is imported unguarded.
_INCOMPLETE = 2


def main() -> int:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        print("npuconf: interrupted before the command started: nothing was written", file=sys.stderr)
        return _INCOMPLETE
    return cli_main()
