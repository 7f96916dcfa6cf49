"""One JSON object as one line of a JSON Lines file (results.jsonl through reports/recorded/records.py); JSON text
from others decoded within bounds (`bounded_json`); JSON values made safe for any reader (`clean_json`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

from .safe_io import safe_text


def clean_json(value: object) -> object:
    """Strings made safe for any UTF-8 reader (lone surrogates and control characters escaped)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def dump_line(record: Mapping[str, object]) -> str:
    """Compact JSON; lone surrogates (which UTF-8 cannot hold) force `\\uXXXX` escapes for that line."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
    return line


# A JSON value read back from a store or a file others write is decoded only within these: deeper
# nesting would exhaust the decoder's recursion (a RecursionError, not a refusal), larger text memory.
JSON_DEPTH_MAX: Final = 64
STORED_JSON_MAX_BYTES: Final = 1 << 20
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET: Final = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """How deeply `text` nests arrays and objects (brackets inside strings do not count)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def bounded_json(text: object, max_bytes: int = STORED_JSON_MAX_BYTES) -> object | None:
    """The value of the JSON text `text`, or None when it is not text, is longer than `max_bytes`, nests
    deeper than JSON_DEPTH_MAX, holds an integer past Python's digit limit or is not JSON."""
    if not isinstance(text, str) or len(text) > max_bytes or json_depth(text) > JSON_DEPTH_MAX:
        return None
    try:
        value: object = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value
