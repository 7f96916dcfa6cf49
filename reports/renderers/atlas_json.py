"""atlas.json: a run's behaviour atlas (reports/answers/atlas.py) as a file, schema in docs/reports.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from floor.jsonl import clean_json
from floor.safe_io import write_bytes

from ..answers.atlas import ASPECT_TITLES, Aspect, Atlas, device_atlas, run_atlas
from ..recorded.results import RunResults

ATLAS_SCHEMA: Final = 1


def atlas_json(run: RunResults, atlas: Atlas | None = None) -> dict[str, object]:
    """atlas.json (schema in docs/reports.md)."""
    atlas = atlas if atlas is not None else run_atlas(run)
    return {
        "schema": ATLAS_SCHEMA,
        "kind": "npuconf-atlas",
        "run_id": run.run_id or None,
        "devices": list(atlas.columns),
        "aspects": {str(a): ASPECT_TITLES[a] for a in Aspect},
        "entries": [
            {
                "aspect": str(row.aspect),
                "question": row.question,
                "differs": row.differs,
                "devices": {
                    column: cell.to_json() if cell is not None else None
                    for column, cell in zip(atlas.columns, row.cells, strict=True)
                },
            }
            for row in atlas.rows
        ],
    }


def atlas_agrees(run: RunResults, stored: object) -> bool:
    """Whether a stored atlas.json is this run's: its run id and devices, and each device's answers (its
    cells of every row) those its results give. Linear in the devices and the file, unlike building the
    side-by-side table again (every device a column of every row): `verify` uses it on untrusted bundles.
    The rows' order and `differs` are presentation, derived from the cells, and not compared."""
    if not isinstance(stored, dict) or stored.get("kind") != "npuconf-atlas" or stored.get("schema") != ATLAS_SCHEMA:
        return False
    serials = list(run.device_serials)
    entries = stored.get("entries")
    if stored.get("run_id") != (run.run_id or None) or stored.get("devices") != serials:
        return False
    if not isinstance(entries, list):
        return False
    found: dict[str, dict[tuple[object, object], object]] = {serial: {} for serial in serials}
    for row in entries:
        cells = row.get("devices") if isinstance(row, dict) else None
        if not isinstance(cells, dict):
            return False
        for serial, cell in cells.items():
            if cell is None:
                continue
            if serial not in found:
                return False
            found[serial][(row.get("aspect"), row.get("question"))] = cell
    for serial in serials:
        expected = {
            (str(entry.aspect), entry.question): json.loads(json.dumps(clean_json(entry.to_json()), ensure_ascii=False))
            for entry in device_atlas(run, serial).entries
        }
        if found[serial] != expected:
            return False
    return True


def atlas_bytes(run: RunResults, atlas: Atlas | None = None) -> bytes:
    """atlas.json for `run`, as `write_atlas` writes it (and `verify` renders it again)."""
    text = json.dumps(clean_json(atlas_json(run, atlas)), ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", errors="replace")


def write_atlas(run: RunResults, path: Path, atlas: Atlas | None = None) -> None:
    """Write atlas.json for `run` to `path`, replacing it atomically."""
    write_bytes(path, atlas_bytes(run, atlas))
