"""The local target: the host build of the probe against libvnpu or any library given by --impl."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floor.limits import limit, over
from floor.safe_io import append_bytes, output_dir, write_text
from floor.user_cache import cache_key, read_entry, write_entry
from reference_model.vocabulary import PROBE_LIST_LINES
from reports.recorded.run_options import npuconf_command

from ..errors import UsageError
from ..probe import DEFAULT_BUILD_DIR, BatchOutcome, ProbeBuild, ScenarioTrace, check_op_table, current_build, run_batch
from .impl_check import check_impl
from .vnpu_profile import VnpuProfile, declared_capacity

BUILD_CACHE: Final = "local-builds"

# Everything the probe and the implementation print on stderr, kept beside results.jsonl
# (sanitizer builds report here; CI fails on any report).
PROBE_STDERR_LOG = "probe-stderr.log"


@dataclass
class LocalTarget:
    profile: VnpuProfile
    work_dir: Path
    impl: Path | None = None
    build_dir: Path = DEFAULT_BUILD_DIR
    timeout_multiplier: float = 1.0
    settle_ms: int = 1000
    exec_prefix: tuple[str, ...] = ()  # e.g. qemu-aarch64 -L <sysroot> for a cross build
    serial: str = "local"

    def __post_init__(self) -> None:
        if self.impl is not None:
            if not self.exec_prefix:  # a cross build's library cannot be loaded on this host: the probe checks it
                check_impl(self.impl)
            elif not self.impl.is_file():
                raise UsageError(
                    f"--impl {self.impl}: no such file; expected a shared library exporting the 18 functions"
                )
            self.impl = self.impl.resolve()
            self.serial = f"local:{self.impl.name}"
        self._profile_path = self.work_dir / "vnpu-profile.conf"
        self._stderr_lock = threading.Lock()
        self._stderr_kept = 0  # bytes of probe-stderr.log written for this device (limit stderr_bytes)
        self._facts: dict[str, str] | None = None  # the probe's and the library's digests, once prepared

    @property
    def build(self) -> ProbeBuild:
        return ProbeBuild(self.build_dir)

    def command(self) -> list[str]:
        impl = self.impl if self.impl is not None else self.build.vnpu
        return [
            *self.exec_prefix,
            str(self.build.probe),
            "--impl",
            str(impl),
            "--timeout-multiplier",
            f"{self.timeout_multiplier:g}",
            "--settle-ms",
            str(self.settle_ms),
        ]

    def prepare(self) -> dict[str, Any]:
        self._build_if_needed()
        library = self.impl if self.impl is not None else self.build.vnpu
        facts = self._facts = self._build_facts(library)
        output_dir(self.work_dir)
        write_text(self._profile_path, self.profile.render())
        append_bytes(self.work_dir / PROBE_STDERR_LOG, b"")  # present even when nothing was printed
        info: dict[str, Any] = {
            "serial": self.serial,
            "sdk": 37,
            "abis": [self._abi()],
            "npu_feature": True,
            "manufacturer": "npuconf",
            "probe_version": facts["probe"],
        }
        if self.impl is None:
            info |= {
                "model": "vnpu",
                "fingerprint": f"npuconf/vnpu/{self.profile.personality}/{self.profile.policy}:{facts['library']}",
                "personality": self.profile.personality,
                "policy": self.profile.policy,
                "capacity": self.profile.enforced_capacity(),
            }
        else:
            info |= {"model": self.impl.name, "fingerprint": f"local/{self.impl.name}:{facts['library']}"}
            info |= declared_capacity(self.profile.declared_capacity)
        return info

    def _build_if_needed(self) -> None:
        """The host build is made (again) here when missing or stale; a cross build is the user's to make."""
        made_by = None
        if self.exec_prefix:
            arch = {"qemu-aarch64": "aarch64", "qemu-arm": "armhf"}.get(self.exec_prefix[0], "ARCH")
            made_by = npuconf_command("probe", "build", "--cross", arch)
        current_build(self.build_dir, made_by)

    def _build_facts(self, library: Path) -> dict[str, str]:
        """The probe's and the library's digests, the probe's op table checked against the vocabulary.

        Kept in the user cache under the files' identities (device, inode, size, modification and change
        times, which a rebuild or an edit changes) and the vocabulary: a rerun with the same build does
        not hash the binaries or start the probe to list its ops again."""
        key = cache_key(_identity(self.build.probe), _identity(library), *PROBE_LIST_LINES, *self.exec_prefix)
        cached = read_entry(BUILD_CACHE, key)
        if cached is not None:
            with contextlib.suppress(ValueError):
                facts = json.loads(cached)
                if isinstance(facts, dict) and all(isinstance(facts.get(k), str) for k in ("probe", "library")):
                    return {"probe": facts["probe"], "library": facts["library"]}
        check_op_table([*self.exec_prefix, str(self.build.probe)])
        facts = {"probe": _file_digest(self.build.probe), "library": _file_digest(library)}
        write_entry(BUILD_CACHE, key, json.dumps(facts).encode())
        return facts

    def failure_context(self, scenario_id: str) -> tuple[str, ...]:
        """No device log on the host: the probe's own stderr is kept in the run directory."""
        return ()

    def discovery_build(self) -> tuple[str, ...] | None:
        """Everything the discovery answer depends on (host/run/discovery_cache.py): the probe's and the
        library's digests, the profile the vnpu reads, how the probe is started and this class (a subclass
        may run batches otherwise). None before `prepare`. An `--impl` library may also answer from what
        the kit cannot see (its files, its environment): what the device confirms catches that."""
        if self._facts is None:
            return None
        return (
            f"{type(self).__module__}.{type(self).__qualname__}", "local", self._facts["probe"],
            self._facts["library"], self.profile.render(), f"{self.timeout_multiplier:g}", str(self.settle_ms),
            *self.exec_prefix,
        )  # fmt: skip

    def _abi(self) -> str:
        return self.exec_prefix[0].removeprefix("qemu-") if self.exec_prefix else platform.machine()

    def run_batch(
        self,
        program: str,
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
    ) -> BatchOutcome:
        env = dict(os.environ, NPUCONF_VNPU_PROFILE=str(self._profile_path))
        outcome = run_batch(self.command(), program, scenario_ids, limits_s, on_trace, env=env)
        if outcome.stderr:
            self._keep_stderr(outcome.stderr)
        return outcome

    def _keep_stderr(self, text: str) -> None:
        """Append to probe-stderr.log, whole, up to limit stderr_bytes for this device; then one note."""
        data = text.encode("utf-8", errors="replace")
        bound = limit("stderr_bytes")
        with self._stderr_lock:
            room = bound - self._stderr_kept
            if room <= 0:
                return
            if len(data) > room:
                note = f"\n[npuconf: more stderr not kept: {over('stderr_bytes', 'stderr of this device')}]\n"
                data = data[:room] + note.encode()
            self._stderr_kept += len(data)
            append_bytes(self.work_dir / PROBE_STDERR_LOG, data)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _identity(path: Path) -> str:
    """A file as it is now: which file (device, inode) and its state (size, mtime, ctime): a rebuild or an
    edit changes it (ctime cannot be set back by a user)."""
    info = path.resolve().stat()
    return f"{path.resolve()}:{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
