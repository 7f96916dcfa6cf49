"""The console script: Ctrl-C while the kit is still importing ends with one line and exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from host import entry
from reference_model.verdicts import RunExit

# Raises KeyboardInterrupt where a Ctrl-C would land: in the middle of importing the command line.
_INTERRUPTED_IMPORT = textwrap.dedent("""
    import sys
    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == "host.cli":
                raise KeyboardInterrupt
            return None
    sys.meta_path.insert(0, Interrupt())
    from host.entry import main
    sys.exit(main())
""")


def test_ctrl_c_during_imports_is_one_line_and_exit_incomplete():
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT], capture_output=True, text=True, timeout=60)
    assert done.returncode == int(RunExit.INCOMPLETE)
    assert done.stderr == "npuconf: interrupted before the command started: nothing was written\n"
    assert "Traceback" not in done.stdout


def test_entry_exit_code_is_the_kits():
    assert int(RunExit.INCOMPLETE) == entry._INCOMPLETE


def test_entry_runs_the_command_line():
    script = "import sys; from host.entry import main; sys.argv = ['npuconf', '--help']; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage: npuconf" in done.stdout
