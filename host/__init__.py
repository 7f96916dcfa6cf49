"""The harness: everything between the scenario files and results.jsonl, plus the commands on recorded runs.

Rooms, lowest first (a room imports only from rooms below it; tests/host/test_layers.py checks it):
`suite` (the corpus, the clause catalogue, waiver files and content hashes of this checkout),
`probe` (building the probe, compiling scenarios into probe programs, what a probe run hands back),
`targets` (where the probe runs: local, adb devices, the embedded virtual devices),
`run` (a run from request to results.jsonl), `offline` (commands on recorded runs), `fuzz`
(model-based fuzzing on any target), and `cli.py`.
`errors.py` holds the harness's errors; `KIT_VERSION` is the version every record carries; `REPO_ROOT`
is the directory holding this package (host/suite/checkout.py says what lives there), here so that code
needing only it (a virtual device's launcher) does not load the suite.
"""

from pathlib import Path as _Path

KIT_VERSION = "0.1.0"
REPO_ROOT = _Path(__file__).resolve().parents[1]
