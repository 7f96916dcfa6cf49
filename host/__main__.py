"""`python -m host`: the npuconf command line exactly as the console script runs it (Ctrl-C guarded)."""

import sys

from .entry import main

sys.exit(main())
