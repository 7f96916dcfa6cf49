"""Which kind of target a run uses (`--target`, or `auto`), and the options that belong to other kinds;
the kinds themselves are host/targets/kinds/."""

from __future__ import annotations

from typing import Final

from ..targets.kinds import KIND_NAMES, resolve_kind, target_kind
from .plan import RunRequest

TARGETS: Final = KIND_NAMES
# The fleet of a run's virtual devices keeps its state here, in the run directory.
VIRTUAL_STATE_DIR: Final = "virtual-devices"


def resolve_target(request: RunRequest) -> str:
    """The target a request runs on; `auto` is attached adb devices if any on the default server, else virtual."""
    return resolve_kind(request.target, request.options).name


def check_target_request(request: RunRequest, target_name: str) -> None:
    """The options that belong to other kinds than `target_name`: usage errors."""
    target_kind(target_name).check(request.options)
