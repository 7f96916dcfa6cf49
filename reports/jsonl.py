"""results.jsonl as raw JSON objects, for the tools that rewrite a run (rejudge, merge).

`load_results` gives the values reports need; a tool that writes a new results.jsonl keeps every
field of a record as it was, so it works on the raw objects and uses `ResultRecord.line` to find
the record `load_results` chose.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from .results import RESULTS_NAME, read_results_bytes
from .safe_io import atomic_output


def results_file(path: Path) -> Path:
    """`path` itself, or the results.jsonl inside it when it is a directory."""
    return path / RESULTS_NAME if path.is_dir() else path


def raw_objects(path: Path) -> dict[int, dict[str, object]]:
    """Line number (1-based) → JSON object, for every line that parses as an object.

    Lines that do not are left out; `load_results` describes them in `RunResults.problems`.
    """
    path = results_file(path)
    data = read_results_bytes(path)
    out: dict[int, dict[str, object]] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):  # not JSON, or past the int-string digit limit
            continue
        if isinstance(obj, dict):
            out[number] = obj
    return out


def first_of_kind(objects: Mapping[int, Mapping[str, object]], kind: str) -> dict[str, object] | None:
    """The first raw object of `kind` (the plan record `load_results` used, for kind "plan")."""
    for number in sorted(objects):
        if objects[number].get("kind") == kind:
            return dict(objects[number])
    return None


def dump_line(record: Mapping[str, object]) -> str:
    """Compact JSON; lone surrogates (which UTF-8 cannot hold) force `\\uXXXX` escapes for that line."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
    return line


def write_jsonl(path: Path, records: Iterable[Mapping[str, object]]) -> None:
    """Write one JSON object per line to `path`, replacing it atomically."""
    with atomic_output(path) as handle:
        for record in records:
            handle.write((dump_line(record) + "\n").encode("utf-8"))
