"""One JSON object as one line of a JSON Lines file (results.jsonl through reports/records.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping


def dump_line(record: Mapping[str, object]) -> str:
    """Compact JSON; lone surrogates (which UTF-8 cannot hold) force `\\uXXXX` escapes for that line."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
    return line
