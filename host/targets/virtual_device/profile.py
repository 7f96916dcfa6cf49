"""The device profile of a virtual device: system properties and `pm list features`, from JSON."""

from __future__ import annotations

import json
import platform
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

# The adb features the virtual device implements; the host uses the intersection with its own.
ADB_FEATURES: Final = ("shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir")
NPU_FEATURE: Final = "android.hardware.npu"
VIRTUAL_PROP: Final = "ro.npuconf.virtual"

# Linux machine name -> Android ABI list (primary first).
_ABIS: Final = {
    "x86_64": ("x86_64",),
    "amd64": ("x86_64",),
    "aarch64": ("arm64-v8a",),
    "arm64": ("arm64-v8a",),
    "armv7l": ("armeabi-v7a",),
    "i686": ("x86",),
}


def host_abis() -> tuple[str, ...]:
    machine = platform.machine().lower()
    return _ABIS.get(machine, (machine,))


class ProfileError(ValueError):
    """A device profile file that cannot be used."""


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    props: Mapping[str, str]
    system_features: tuple[str, ...] = (NPU_FEATURE,)
    adb_features: tuple[str, ...] = ADB_FEATURES
    extra: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def default(name: str = "virtual-1", sdk: int = 37) -> DeviceProfile:
        abis = host_abis()
        props = {
            "ro.serialno": name,
            "ro.build.version.sdk": str(sdk),
            "ro.build.version.release": "17",
            "ro.build.fingerprint": f"npuconf/vnpu_{abis[0]}/vnpu:17/NPUCONF.{sdk}/1:userdebug/test-keys",
            "ro.build.type": "userdebug",
            "ro.product.cpu.abi": abis[0],
            "ro.product.cpu.abilist": ",".join(abis),
            "ro.product.model": "vNPU",
            "ro.product.manufacturer": "npuconf",
            "ro.product.brand": "npuconf",
            "ro.product.name": "npuconf_vnpu",
            "ro.product.device": "vnpu",
            VIRTUAL_PROP: "1",
        }
        return DeviceProfile(props=props)

    def to_json(self) -> dict[str, Any]:
        return {
            "props": dict(self.props),
            "system_features": list(self.system_features),
            "adb_features": list(self.adb_features),
        }

    @staticmethod
    def from_json(data: Any, source: str = "profile") -> DeviceProfile:
        if not isinstance(data, dict) or not isinstance(data.get("props"), dict):
            raise ProfileError(f"{source}: expected an object with a 'props' object")
        props = {str(k): str(v) for k, v in data["props"].items()}
        system = data.get("system_features", [NPU_FEATURE])
        adb = data.get("adb_features", list(ADB_FEATURES))
        if not isinstance(system, list) or not isinstance(adb, list):
            raise ProfileError(f"{source}: 'system_features' and 'adb_features' must be lists of strings")
        return DeviceProfile(props, tuple(map(str, system)), tuple(map(str, adb)))

    @staticmethod
    def load(path: Path) -> DeviceProfile:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProfileError(f"{path}: {exc}") from None
        return DeviceProfile.from_json(data, str(path))

    # -- the commands answered in Python ------------------------------------------------------

    def getprop_output(self, key: str | None) -> str:
        if key is None:
            return "".join(f"[{k}]: [{v}]\n" for k, v in sorted(self.props.items()))
        return self.props.get(key, "") + "\n"

    def pm_features_output(self) -> str:
        return "".join(f"feature:{name}\n" for name in self.system_features)

    def builtin(self, command: str) -> tuple[str, int] | None:
        """(stdout, exit status) when the whole command is one the device answers itself, else None."""
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        # Only plain words: anything with shell syntax goes to the real shell (and its stubs).
        if not words or any(ch in command for ch in ";&|<>$`(){}\n"):
            return None
        if words[0] == "getprop" and len(words) <= 2:
            return self.getprop_output(words[1] if len(words) == 2 else None), 0
        if words[:3] == ["pm", "list", "features"] and len(words) == 3:
            return self.pm_features_output(), 0
        return None

    def stub_scripts(self) -> dict[str, str]:
        """`getprop` and `pm` for compound shell commands, generated from the same profile."""
        props = "".join(f"{k}={v}\n" for k, v in sorted(self.props.items()))
        features = "".join(f"feature:{name}\n" for name in self.system_features)
        getprop = (
            "#!/bin/sh\n# generated from the virtual device profile\n"
            "PROPS=\"$(dirname \"$0\")/props.txt\"\n"
            'if [ $# -eq 0 ]; then sed -e "s/^\\([^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/" "$PROPS"; exit 0; fi\n'
            'awk -v k="$1" \'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }\' "$PROPS"\n'
        )
        pm = (
            "#!/bin/sh\n# generated from the virtual device profile\n"
            'if [ "$1 $2" = "list features" ]; then cat "$(dirname "$0")/features.txt"; exit 0; fi\n'
            'echo "pm: only \'pm list features\' is available on the virtual device" >&2; exit 1\n'
        )
        return {"getprop": getprop, "pm": pm, "props.txt": props, "features.txt": features}
