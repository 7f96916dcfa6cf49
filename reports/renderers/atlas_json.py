"""atlas.json: a run's behaviour atlas (reports/answers/atlas.py) as a file, schema in docs/reports.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from floor.jsonl import clean_json
from floor.safe_io import write_bytes

from ..answers.atlas import ASPECT_TITLES, Aspect, Atlas, run_atlas
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


def atlas_bytes(run: RunResults, atlas: Atlas | None = None) -> bytes:
    """atlas.json for `run`, as `write_atlas` writes it (and `verify` renders it again)."""
    text = json.dumps(clean_json(atlas_json(run, atlas)), ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", errors="replace")


def write_atlas(run: RunResults, path: Path, atlas: Atlas | None = None) -> None:
    """Write atlas.json for `run` to `path`, replacing it atomically."""
    write_bytes(path, atlas_bytes(run, atlas))
