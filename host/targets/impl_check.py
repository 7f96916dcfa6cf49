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
from ..probe import run_contained

API_FUNCTIONS: Final = tuple(sorted({spec.api for spec in OPS.values() if spec.api and spec.api.startswith("ANpu")}))
CHECK_LIMIT_S: Final = 30.0

ANSWER_MARK: Final = "npuconf-impl-check:"
ANSWER_LIMIT: Final = 64 * 1024  # the answer line is short; anything past this is the library's own output

# The answer goes to a copy of stdout taken before the library loads; the library's own output (its
# constructors may print anything, in any encoding) goes to /dev/null instead.
_CHILD: Final = """
import ctypes, json, os, sys
answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
def say(obj):
    answer.write("\\n%s%s\\n" % (sys.argv[1], json.dumps(obj, ensure_ascii=True)))
    answer.flush()
try:
    lib = ctypes.CDLL(sys.argv[2])
except OSError as exc:
    say({"error": str(exc)})
    raise SystemExit(0)
say({"found": [n for n in sys.argv[3:] if hasattr(lib, n)]})
"""


def _answer(stdout: bytes) -> dict[str, object] | None:
    """The child's last answer line, if it wrote one; the bytes around it may be anything."""
    text = stdout[:ANSWER_LIMIT].decode("utf-8", errors="replace")
    for line in reversed(text.splitlines()):
        if line.startswith(ANSWER_MARK):
            try:
                parsed = json.loads(line[len(ANSWER_MARK) :])
            except (ValueError, RecursionError):  # not JSON, or past the int-string digit limit
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def check_impl(path: Path) -> tuple[str, ...]:
    """The API functions `path` exports; UsageError when it cannot be loaded or exports none of them."""
    if not path.is_file():
        raise UsageError(f"--impl {path}: no such file; expected a shared library exporting the 18 functions")
    try:
        returncode, stdout = run_contained(
            [sys.executable, "-I", "-c", _CHILD, ANSWER_MARK, str(path), *API_FUNCTIONS], timeout_s=CHECK_LIMIT_S
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"--impl {path}: loading it did not finish in {CHECK_LIMIT_S:.0f} s") from None
    answer = _answer(stdout)
    if answer is None:
        why = f"exit status {returncode}" if returncode >= 0 else f"signal {-returncode}"
        raise UsageError(f"--impl {path}: loading it killed the process that tried ({why})")
    if "error" in answer:
        # dlerror() text can hold undecodable bytes of a file name: shown replaced, never raised on
        error = str(answer["error"]).encode("utf-8", errors="replace").decode("utf-8")
        raise UsageError(f"--impl {path}: cannot be loaded as a shared library: {error}")
    listed = answer.get("found")
    found = tuple(str(name) for name in listed) if isinstance(listed, list) else ()
    if not found:
        raise UsageError(
            f"--impl {path}: exports none of the {len(API_FUNCTIONS)} functions of the NPU buffer API "
            f"(e.g. {API_FUNCTIONS[0]}); is it the right library?"
        )
    return found
