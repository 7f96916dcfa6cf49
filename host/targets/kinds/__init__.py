"""The kinds of target, one module each (local.py, virtual.py, adb.py, each with its `KIND`), and the one
list of them: `--target` choices, the default, `auto`. A new kind is a module here and a line of `KINDS`."""

from __future__ import annotations

from typing import Final

from reports.recorded.plan_options import PlanOptions

from ...errors import UsageError
from . import adb, local, virtual
from .base import DEFAULT_LANES as DEFAULT_LANES
from .base import LaunchedDevices as LaunchedDevices
from .base import Opening as Opening
from .base import Resumed as Resumed
from .base import TargetKind as TargetKind
from .base import own_options as own_options
from .virtual import fleet_targets as fleet_targets

KINDS: Final[tuple[TargetKind, ...]] = (local.KIND, virtual.KIND, adb.KIND)
KIND_NAMES: Final = tuple(kind.name for kind in KINDS)
# `npuconf fuzz` and the pytest layer without --target; `npuconf run` without it is `AUTO`.
DEFAULT_KIND: Final = local.KIND.name
AUTO: Final = "auto"
_BY_NAME: Final = {kind.name: kind for kind in KINDS}


def target_kind(name: str) -> TargetKind:
    """The kind called `name`; another name is a usage error."""
    kind = _BY_NAME.get(name)
    if kind is None:
        raise UsageError(f"--target {name}: expected one of {', '.join(KIND_NAMES)}")
    return kind


def resolve_kind(target: str, options: PlanOptions) -> TargetKind:
    """The kind a run uses: `target`, or for `auto` the first kind its options choose, else attached adb
    devices if any on the default server, else the kit's virtual devices."""
    if target != AUTO:
        return target_kind(target)
    for kind in KINDS:
        if kind.chosen_by(options):
            return kind
    return adb.KIND if adb.devices_attached() else virtual.KIND
