"""Getting a device ready: what it is (getprop, features, ABIs), which probe build runs there, the probe
(and on virtual devices libvnpu and its profile) installed by hash-checked push, and its op table checked."""

from __future__ import annotations

import concurrent.futures
import hashlib
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floor.safe_io import UnsafeOutput, checked_name
from reports.recorded.run_options import npuconf_command

from ...errors import InfraError, UsageError
from ...probe import PROBE_NAME, VNPU_NAME, check_listed_op_table, current_build
from ..virtual_device import NPU_FEATURE, VIRTUAL_PROP
from ..vnpu_profile import CAPACITY_PROP, VnpuProfile, declared_capacity
from .transport import DeviceTransport

DEVICE_DIR: Final = "/data/local/tmp/npuconf"
RUN_DIR: Final = f"{DEVICE_DIR}/run"
PROFILE_NAME: Final = "vnpu-profile.conf"


@dataclass(frozen=True, slots=True)
class Deployed:
    """A device ready to run batches: its info record, the build pushed to it, whether it is virtual, and
    the SHA-256 of each file the kit installed there (the probe; libvnpu and its profile on a virtual device)."""

    info: dict[str, Any]
    build_dir: Path
    virtual: bool
    installed: dict[str, str]


def deploy(
    transport: DeviceTransport,
    profile: VnpuProfile,
    build_root: Path,
    host_build: Path | None,
    launched_virtual: bool = False,
) -> Deployed:
    """Read the device, choose and install its probe build, check the op table; the device info record.

    The three reads (properties, features, what is installed) are independent: they go out at once, each
    on its own adb connection, and installing ends with the op-table listing in the same shell. On a
    virtual device the kit launched itself (`launched_virtual`) the build is known before the device is
    read (the host's), so the files are pushed meanwhile, whatever the device holds, and the device must
    then say it is virtual."""
    ahead = _files(_virtual_build(build_root, host_build), profile) if launched_virtual else None
    digests = _digests(ahead) if ahead is not None else {}
    with concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=f"deploy-{transport.serial}") as pool:
        reads = ["getprop", "pm list features"] + ([] if ahead is not None else [_LIST_INSTALLED])
        asked = [pool.submit(transport.shell, command) for command in reads]
        pushed = pool.submit(_push, transport, ahead, digests, "") if ahead is not None else None
        getprop, listed_features, *installed = (future.result() for future in asked)
        moves = pushed.result() if pushed is not None else None
    props = parse_getprop(getprop.stdout)
    if not props:
        raise InfraError(f"{transport.serial}: `getprop` printed no properties; is it an Android device?")
    features = listed_features.stdout
    virtual = props.get(VIRTUAL_PROP) == "1"
    if ahead is not None and not virtual:
        raise InfraError(f"{transport.serial}: launched as a virtual device, but `getprop` lacks {VIRTUAL_PROP}=1")
    abis = [a for a in props.get("ro.product.cpu.abilist", props.get("ro.product.cpu.abi", "")).split(",") if a]
    try:
        abis = [checked_name(a, "ABI") for a in abis]
    except UnsafeOutput as exc:
        raise InfraError(f"{transport.serial}: ro.product.cpu.abilist: {exc}") from None
    build_dir, abi = _choose_build(transport.serial, abis, virtual, build_root, host_build)
    if moves is None:  # read first: only what the device lacks is pushed
        files = _files(build_dir, profile if virtual else None)
        digests = _digests(files)
        moves = _push(transport, files, digests, installed[0].stdout)
    marker = f"npuconf-installed-{secrets.token_hex(8)}"
    listing = f"{shlex.quote(f'{DEVICE_DIR}/{PROBE_NAME}')} --list"
    listed = transport.shell(" && ".join([*moves, f"echo {marker}", listing]) if moves else listing)
    lines = listed.stdout.splitlines()
    if moves:
        if marker not in lines:
            problem = listed.output.strip()
            raise InfraError(f"{transport.serial}: could not install the probe in {DEVICE_DIR}: {problem}")
        lines = lines[lines.index(marker) + 1 :]
    probe = f"{transport.serial}:{DEVICE_DIR}/{PROBE_NAME}"
    check_listed_op_table(probe, lines, listed.returncode)
    sdk_text = props.get("ro.build.version.sdk", "")
    info: dict[str, Any] = {
        "serial": transport.serial,
        "adb_serial": transport.adb_serial,
        "adb_server": str(transport.server),
        "fingerprint": props.get("ro.build.fingerprint", ""),
        "sdk": int(sdk_text) if sdk_text.isdigit() else sdk_text,
        "abis": abis,
        "abi": abi,
        "npu_feature": f"feature:{NPU_FEATURE}" in features.splitlines(),
        "model": props.get("ro.product.model", ""),
        "manufacturer": props.get("ro.product.manufacturer", ""),
        "probe_version": digests[PROBE_NAME][:12],
        "virtual": virtual,
    }
    if virtual:
        info |= {
            "personality": profile.personality,
            "policy": profile.policy,
            "capacity": profile.enforced_capacity(),
            # One build of the virtual device behaves as its personality and policy say: both are part of
            # what a fingerprint names (waivers and merged columns match on it).
            "fingerprint": f"{info['fingerprint']}#vnpu:{profile.personality}/{profile.policy}/{profile.capacity}",
        }
    else:
        declared = profile.declared_capacity
        prop = props.get(CAPACITY_PROP, "")
        info |= declared_capacity(declared if declared is not None else int(prop) if prop.isdigit() else None)
    return Deployed(info, build_dir, virtual, digests)


def parse_getprop(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for match in re.finditer(r"^\[([^\]]*)\]: \[(.*)\]$", text, flags=re.MULTILINE):
        props[match.group(1)] = match.group(2)
    return props


def _choose_build(
    serial: str, abis: Sequence[str], virtual: bool, build_root: Path, host_build: Path | None
) -> tuple[Path, str]:
    if virtual:
        return _virtual_build(build_root, host_build), abis[0] if abis else "host"
    for abi in abis:
        build = build_root / f"probe-android-{abi}"
        if (build / PROBE_NAME).is_file():
            return build, abi
    wanted = abis[0] if abis else "arm64-v8a"
    raise UsageError(
        f"{serial}: no probe build for ABI {', '.join(abis) or '(none reported)'}; "
        f"run `{npuconf_command('probe', 'build', '--ndk')} PATH --abi {wanted}`"
    )


def _virtual_build(build_root: Path, host_build: Path | None) -> Path:
    """A virtual device runs the host build (the probe and libvnpu), made first when missing or stale."""
    return current_build(host_build or build_root / "probe").directory


# What the device holds of the files the kit installs (whichever build and target): their SHA-256.
_LIST_INSTALLED: Final = (
    f"mkdir -p {shlex.quote(RUN_DIR)} && sha256sum "
    + " ".join(shlex.quote(f"{DEVICE_DIR}/{name}") for name in (PROBE_NAME, VNPU_NAME, PROFILE_NAME))
    + " 2>/dev/null; true"
)


def _files(build_dir: Path, profile: VnpuProfile | None) -> dict[str, bytes]:
    """What the kit installs on a device: the probe; on a virtual device (`profile`) libvnpu and its profile."""
    files: dict[str, bytes] = {PROBE_NAME: (build_dir / PROBE_NAME).read_bytes()}
    if profile is not None:
        files[VNPU_NAME] = (build_dir / VNPU_NAME).read_bytes()
        files[PROFILE_NAME] = profile.render().encode()
    return files


def _digests(files: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def _push(transport: DeviceTransport, files: dict[str, bytes], digests: dict[str, str], installed: str) -> list[str]:
    """Push what differs (by SHA-256, `installed` is the device's `sha256sum` listing) from what the device
    holds, each to a temporary name, in one sync session; the shell commands that move them into place
    (atomic renames)."""
    have: dict[str, str] = {}
    for line in installed.splitlines():
        digest, _, path = line.partition("  ")
        have[path.strip().rsplit("/", 1)[-1]] = digest.strip()
    moves: list[str] = []
    pushed: dict[str, bytes] = {}
    for name, data in files.items():
        if have.get(name) == digests[name]:
            continue
        temporary = f"{RUN_DIR}/.{name}.{secrets.token_hex(4)}"
        pushed[temporary] = data
        moves.append(f"mv -f {shlex.quote(temporary)} {shlex.quote(f'{DEVICE_DIR}/{name}')}")
    if pushed:
        transport.push_all(pushed)  # one sync session for all of them
    return moves
