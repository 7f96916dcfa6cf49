"""Building the probe and libvnpu with CMake: where the sources and the host build live."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import write_text

from ..errors import ProbeBuildError, UsageError
from ..suite import BUILD_ROOT, REPO_ROOT

PROBE_SOURCE: Final = REPO_ROOT / "ndk_probe"
DEFAULT_BUILD_DIR: Final = BUILD_ROOT / "probe"
PROBE_NAME: Final = "npuconf-probe"
VNPU_NAME: Final = "libvnpu.so"
DIGEST_NAME: Final = "libnpuconf_digest.so"  # the judge's pattern digests (host/run/digests.py); host builds only
# Written into a build directory after each build that succeeded: a source changed after it makes the
# build stale (a checkout updated without building again).
BUILT_STAMP: Final = "npuconf-built"
# What a build is made of; tools/ (the generator) and vocabulary.yaml reach it only through gen/.
BUILD_INPUTS: Final = ("CMakeLists.txt", "src", "include", "gen")
BUILD_LOCK: Final = "npuconf-building.lock"


@dataclass(frozen=True, slots=True)
class ProbeBuild:
    directory: Path

    @property
    def probe(self) -> Path:
        return self.directory / PROBE_NAME

    @property
    def vnpu(self) -> Path:
        return self.directory / VNPU_NAME

    @property
    def digest(self) -> Path:
        return self.directory / DIGEST_NAME

    def exists(self) -> bool:
        return self.probe.is_file() and self.vnpu.is_file()

    def changed_source(self) -> Path | None:
        """The newest probe source changed since this build was made, or None (the build is current). The
        build's time is its stamp's, else (a build made by hand) its older binary's."""
        try:
            built = (self.directory / BUILT_STAMP).stat().st_mtime_ns
        except FileNotFoundError:
            try:
                built = min(self.probe.stat().st_mtime_ns, self.vnpu.stat().st_mtime_ns)
            except FileNotFoundError:
                return None  # no build: nothing to be stale
        newer: list[tuple[int, Path]] = []
        for name in BUILD_INPUTS:
            for path in _files_under(PROBE_SOURCE / name):
                try:
                    changed = path.stat().st_mtime_ns
                except FileNotFoundError:
                    continue  # removed meanwhile
                if changed > built:
                    newer.append((changed, path))
        return max(newer)[1] if newer else None  # the newest; of those changed together, the last path


def current_build(build_dir: Path, made_by: str | None = None) -> ProbeBuild:
    """The build in `build_dir`, made first when it is missing or older than a source of it. A build the kit
    does not make itself (a cross build, `made_by` the command that does) is refused instead, naming that
    command."""
    build = ProbeBuild(build_dir)
    changed = _stale(build)
    if changed is None:
        return build
    if made_by is not None:
        if isinstance(changed, Path):
            raise UsageError(f"the probe build in {build_dir} is older than {changed}; run `{made_by}` again")
        raise UsageError(f"{build_dir}: no cross build there; run `{made_by}` first")
    # Devices prepared side by side, and test processes, share the directory: one build at a time, and
    # one that waited looks again.
    build_dir.mkdir(parents=True, exist_ok=True)
    lock = os.open(build_dir / BUILD_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        changed = _stale(build)
        if changed is None:
            return build
        if not isinstance(changed, Path):
            return build_probe(build_dir)
        # Made again as it was configured (a sanitizer build stays one): CMake configures again by itself
        # when its lists changed.
        configured = (build_dir / "CMakeCache.txt").is_file()
        return build_probe(build_dir, why=f"the probe build in {build_dir} is older than {changed}",
                           configure=not configured)
    finally:
        os.close(lock)


def _stale(build: ProbeBuild) -> Path | bool | None:
    """What makes a build unusable as it is: the source changed since (a path), its absence (True), or None."""
    return build.changed_source() if build.exists() else True


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [Path(root) / name for root, _, names in os.walk(path) for name in names]


def build_probe(
    build_dir: Path = DEFAULT_BUILD_DIR,
    cmake_args: Sequence[str] = (),
    log: Callable[[str], None] | None = None,
    why: str = "",
    configure: bool = True,
) -> ProbeBuild:
    """Configure and build the probe and libvnpu with CMake (host build unless cmake_args say otherwise).

    Without `log` (a run building what it needs) one line on stderr says why the build happens: `why`, by
    default that there is none. Without `configure` the build directory keeps the configuration it has."""
    if not (PROBE_SOURCE / "CMakeLists.txt").is_file():
        raise UsageError(f"{PROBE_SOURCE}: no probe sources (CMakeLists.txt) there; this npuconf install is incomplete")
    if log is None:
        print(f"npuconf: {why or f'no probe build in {build_dir}'}: building it now (cmake, a C compiler)",
              file=sys.stderr)
    configure_command = [
        "cmake",
        "-S",
        str(PROBE_SOURCE),
        "-B",
        str(build_dir),
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        *cmake_args,
    ]
    build = ["cmake", "--build", str(build_dir), "--parallel", str(os.cpu_count() or 2)]
    started = time.time_ns()  # a source changed while the build ran is newer than its stamp
    for command in (configure_command, build) if configure else (build,):
        if log:
            log("$ " + shlex.join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
        except FileNotFoundError:
            raise UsageError(f"{command[0]}: not found; building the probe needs CMake and a C compiler") from None
        if done.returncode != 0:
            raise ProbeBuildError(shlex.join(command), done.stdout + done.stderr)
    os.utime(write_text(build_dir / BUILT_STAMP, ""), ns=(started, started))
    return ProbeBuild(build_dir)


