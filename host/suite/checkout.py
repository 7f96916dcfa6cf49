"""Where the kit's own files live: a checkout, or site-packages after a wheel install.

REPO_ROOT is the directory holding the `host` package. In a checkout that is the repository; a wheel
installs host/, reports/, floor/, reference_model/, conformance/ and ndk_probe/ side by side in site-packages,
so the same relative paths hold in both. Only builds differ: site-packages is no place to write them."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

from .. import REPO_ROOT as REPO_ROOT

SCENARIO_ROOT: Final = REPO_ROOT / "conformance" / "scenarios"
CATALOGUE_PATH: Final = REPO_ROOT / "conformance" / "clauses.yaml"
IS_CHECKOUT: Final = (REPO_ROOT / "pyproject.toml").is_file()


def build_root() -> Path:
    """Where probe builds go: build/ in a checkout; for an installed kit a per-installation directory
    under $XDG_CACHE_HOME/npuconf (default ~/.cache/npuconf), so two installs never share a CMake cache."""
    if IS_CHECKOUT:
        return REPO_ROOT / "build"
    cache = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(cache) if os.path.isabs(cache) else Path.home() / ".cache"  # the XDG spec ignores relative ones
    install = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]
    return base / "npuconf" / f"build-{install}"


BUILD_ROOT: Final = build_root()
