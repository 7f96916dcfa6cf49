"""Where the kit's own files live in this checkout."""

from __future__ import annotations

from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
SCENARIO_ROOT: Final = REPO_ROOT / "conformance" / "scenarios"
CATALOGUE_PATH: Final = REPO_ROOT / "conformance" / "clauses.yaml"
