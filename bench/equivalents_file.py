"""Reading bench/mutation_equivalent.yaml: the raw entries of one section (`vnpu:` or `model:`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def entries_of(path: Path, section: str) -> list[dict[str, Any]]:
    """The entries listed under `section`; none when the file does not exist. A file that is not valid YAML
    stops the campaign with one line naming it."""
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise SystemExit(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    entries = data.get(section) or [] if isinstance(data, dict) else []
    return [e if isinstance(e, dict) else {} for e in entries]
