"""Building the probe and libvnpu with CMake: where the sources and the host build live."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import ProbeBuildError, UsageError
from ..suite import BUILD_ROOT, REPO_ROOT

PROBE_SOURCE: Final = REPO_ROOT / "ndk_probe"
DEFAULT_BUILD_DIR: Final = BUILD_ROOT / "probe"
PROBE_NAME: Final = "npuconf-probe"
VNPU_NAME: Final = "libvnpu.so"


@dataclass(frozen=True, slots=True)
class ProbeBuild:
    directory: Path

    @property
    def probe(self) -> Path:
        return self.directory / PROBE_NAME

    @property
    def vnpu(self) -> Path:
        return self.directory / VNPU_NAME

    def exists(self) -> bool:
        return self.probe.is_file() and self.vnpu.is_file()


def build_probe(
    build_dir: Path = DEFAULT_BUILD_DIR, cmake_args: Sequence[str] = (), log: Callable[[str], None] | None = None
) -> ProbeBuild:
    """Configure and build the probe and libvnpu with CMake (host build unless cmake_args say otherwise).

    Without `log` (a run building what it needs) one line on stderr says that the build happens."""
    if not (PROBE_SOURCE / "CMakeLists.txt").is_file():
        raise UsageError(f"{PROBE_SOURCE}: no probe sources (CMakeLists.txt) there; this npuconf install is incomplete")
    if log is None:
        print(f"npuconf: no probe build in {build_dir}: building it now (cmake, a C compiler)", file=sys.stderr)
    configure = [
        "cmake",
        "-S",
        str(PROBE_SOURCE),
        "-B",
        str(build_dir),
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        *cmake_args,
    ]
    build = ["cmake", "--build", str(build_dir), "--parallel", str(os.cpu_count() or 2)]
    for command in (configure, build):
        if log:
            log("$ " + shlex.join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
        except FileNotFoundError:
            raise UsageError(f"{command[0]}: not found; building the probe needs CMake and a C compiler") from None
        if done.returncode != 0:
            raise ProbeBuildError(shlex.join(command), done.stdout + done.stderr)
    return ProbeBuild(build_dir)


