"""`npuconf probe build`: the host build (optionally with sanitizers) or an NDK build for one ABI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from floor.cross_targets import CROSS_TARGETS

from ..errors import UsageError
from ..suite import BUILD_ROOT
from .build import build_probe


def qemu_prefix(cross: str) -> list[str]:
    """The command prefix that runs a cross-built probe on this host."""
    _, _, qemu, sysroot = CROSS_TARGETS[cross]
    return [qemu, "-L", sysroot]


def cross_build_dir(cross: str) -> Path:
    return BUILD_ROOT / f"probe-linux-{cross}"


def build_for(
    ndk: Path | None,
    abi: str | None,
    sanitize: str | None,
    build_dir: Path | None,
    log: Callable[[str], None] | None = None,
    cross: str | None = None,
) -> Path:
    if cross is not None:
        if ndk is not None or abi is not None or sanitize:
            raise UsageError("--cross is a plain Linux build: drop --ndk, --abi and --sanitize")
        compiler, processor, _, _ = CROSS_TARGETS[cross]
        directory = build_dir or cross_build_dir(cross)
        args = [f"-DCMAKE_C_COMPILER={compiler}", "-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={processor}"]
        return build_probe(directory, args, log).directory
    if ndk is not None or abi is not None:
        if ndk is None or abi is None:
            raise UsageError("--ndk and --abi go together: give the NDK root and one of the four ABIs")
        toolchain = ndk / "build" / "cmake" / "android.toolchain.cmake"
        if not toolchain.is_file():
            raise UsageError(f"--ndk {ndk}: no build/cmake/android.toolchain.cmake there; expected an NDK root")
        if sanitize:
            raise UsageError("--sanitize is for host builds; NDK sanitizer builds use the NDK's own options")
        directory = build_dir or BUILD_ROOT / f"probe-android-{abi}"
        args = [f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", f"-DANDROID_ABI={abi}", "-DANDROID_PLATFORM=android-37"]
        return build_probe(directory, args, log).directory
    suffix = {None: "", "address,undefined": "-asan", "thread": "-tsan"}[sanitize]
    directory = build_dir or BUILD_ROOT / f"probe{suffix}"
    args = [f"-DNPUCONF_SANITIZE={sanitize}"] if sanitize else []
    return build_probe(directory, args, log).directory


def probe_build_command(args: argparse.Namespace) -> int:
    """`npuconf probe build`: print the build directory (the build log goes to stderr)."""
    directory = build_for(
        args.ndk,
        args.abi,
        args.sanitize,
        args.build_dir,
        log=lambda line: print(line, file=sys.stderr),
        cross=args.cross,
    )
    print(directory)
    return 0
