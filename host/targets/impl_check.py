"""`--impl LIB`: is it a library the probe can load, and does it export the API? Checked before any
scenario runs (exit 3 otherwise), in a child interpreter so that the library's constructors never
run inside npuconf itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Final

from reference_model.vocabulary import OPS

from ..errors import UsageError

API_FUNCTIONS: Final = tuple(sorted({spec.api for spec in OPS.values() if spec.api and spec.api.startswith("ANpu")}))
CHECK_LIMIT_S: Final = 30.0

_CHILD: Final = """
import ctypes, json, sys
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as exc:
    print(json.dumps({"error": str(exc)}))
    raise SystemExit(0)
print(json.dumps({"found": [n for n in sys.argv[2:] if hasattr(lib, n)]}))
"""


def check_impl(path: Path) -> tuple[str, ...]:
    """The API functions `path` exports; UsageError when it cannot be loaded or exports none of them."""
    if not path.is_file():
        raise UsageError(f"--impl {path}: no such file; expected a shared library exporting the 18 functions")
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _CHILD, str(path), *API_FUNCTIONS],
            capture_output=True,
            text=True,
            timeout=CHECK_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"--impl {path}: loading it did not finish in {CHECK_LIMIT_S:.0f} s") from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        why = f"exit status {done.returncode}" if done.returncode >= 0 else f"signal {-done.returncode}"
        raise UsageError(f"--impl {path}: loading it killed the process that tried ({why})") from None
    if "error" in answer:
        raise UsageError(f"--impl {path}: cannot be loaded as a shared library: {answer['error']}")
    found = tuple(str(name) for name in answer.get("found", []))
    if not found:
        raise UsageError(
            f"--impl {path}: exports none of the {len(API_FUNCTIONS)} functions of the NPU buffer API "
            f"(e.g. {API_FUNCTIONS[0]}); is it the right library?"
        )
    return found
