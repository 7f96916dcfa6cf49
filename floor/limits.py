"""The kit's bounds on what devices, run directories, bundles and user files may make it hold.

Every limit has a name, a default and an environment variable that changes it
(`NPUCONF_LIMIT_<NAME>` in capitals, e.g. `NPUCONF_LIMIT_TRACE_LINE_BYTES=4194304`). Past a limit the
kit says which one (`limit trace_line_bytes=1048576 ...`), never holds more: a scenario becomes
ERROR, a bundle or a YAML file is refused in one line. The table is in docs/hostile.md ("Limits").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

DEFAULTS: Final[dict[str, int]] = {
    # one trace line from the probe or the implementation (bytes, before the newline)
    "trace_line_bytes": 1 << 20,
    # the trace lines one scenario may leave (bytes in all, and lines)
    "trace_bytes": 16 << 20,
    "trace_lines": 200_000,
    # what the probe and the implementation print on stderr, kept per device (probe-stderr.log)
    "stderr_bytes": 16 << 20,
    # what one adb shell command (getprop, pm, logcat, ...) prints, kept per stream
    "shell_output_bytes": 4 << 20,
    # one member of a submission bundle, and all members together (uncompressed bytes); members
    "bundle_member_bytes": 256 << 20,
    "bundle_total_bytes": 512 << 20,
    "bundle_members": 64,
    # one results.jsonl (report, rejudge, merge, store import, bundle, --resume; the member of a bundle)
    "results_bytes": 32 << 20,
    # planned (device, scenario) pairs a results.jsonl may declare (84 devices of today's corpus), and the
    # result records it may hold: every report renders each, so both bound what one file makes the kit do
    "plan_entries": 32_768,
    "result_records": 40_000,
    # result records for pairs the plan does not name (only an edited results.jsonl has any)
    "unplanned_records": 1_000,
    # device records a results.jsonl may hold (described devices, planned or not)
    "device_records": 10_000,
    # the files one scenario's file_new steps make, in all (each is at most 64 MiB)
    "scenario_file_bytes": 64 << 20,
    # YAML from users (waivers, scenarios): nodes after alias expansion, and file size
    "yaml_nodes": 200_000,
    "yaml_bytes": 4 << 20,
    # device-side log collection after a failure (seconds)
    "logcat_seconds": 5,
}


def env_name(name: str) -> str:
    return f"NPUCONF_LIMIT_{name.upper()}"


def limit(name: str) -> int:
    """The value of limit `name`: its environment variable when set to a positive integer, else the default."""
    default = DEFAULTS[name]
    raw = os.environ.get(env_name(name))
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if value > 0 else default


def over(name: str, what: str) -> str:
    """The message for going past limit `name`: names the limit, its value and how to change it."""
    return f"{what}: over limit {name}={limit(name)} (set {env_name(name)} to change it)"


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """The bounds one probe batch reads under (taken once per batch)."""

    line_bytes: int
    scenario_bytes: int
    scenario_lines: int
    stderr_bytes: int

    @classmethod
    def current(cls) -> TraceLimits:
        return cls(limit("trace_line_bytes"), limit("trace_bytes"), limit("trace_lines"), limit("stderr_bytes"))
