"""The options of `npuconf run`, `npuconf fuzz` and the pytest layer, made from the one table of
reports/recorded/plan_options.py (`PlanOptions`): their arguments, their defaults filled in after parsing, the typed
options a command line gives, and what `--resume` checks against its plan.

The parsers leave the table's options at None, so a value the user typed (even one equal to the default)
stays distinguishable from one nobody gave; `apply_defaults` then fills in the defaults, the table's. The
pytest layer has no `--resume` and takes the defaults at parsing."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from floor.safe_io import console_text
from reports.recorded.plan_options import OPTION, OPTIONS, PYTEST, PlanOption, PlanOptions

from .errors import UsageError

# A value shown in a message is cut here: a plan is not trusted text and may hold anything.
_SHOWN_CHARS = 400
# The plan records the target as its own field, not as an option.
TARGET: Final = "target"
# `--impl` with `--resume` is compared as the library it resolves to (resume.py), not as text.
_CHECKED_APART: Final = frozenset({"impl"})
_TYPES: Final[dict[str, Callable[[str], object]]] = {"integer": int, "number": float}


def user_path(text: str) -> Path:
    """A path from the command line, made absolute against the current directory here and only here.

    Path.absolute() keeps `..` and symlinks as written, so the path still names what the user named;
    `./libX.so` stays a path (dlopen would search the library path for a bare `libX.so`)."""
    return Path(text).absolute()


def command_options(command: str) -> tuple[PlanOption, ...]:
    """The table's options a command line takes, in the table's order."""
    return tuple(o for o in OPTIONS if command in o.on)


def argument(option: PlanOption, command: str) -> dict[str, Any]:
    """The keyword arguments of `add_argument` (argparse, pytest's `addoption`) for one option."""
    pytest_layer = command == PYTEST
    spec: dict[str, Any] = {"help": option.help}
    if option.kind == "flag":
        spec.update(action="store_true", default=option.default if pytest_layer else None)
        return spec
    if option.kind == "texts":
        spec["action"] = "append"
    if option.path:
        spec["type"] = user_path
    elif option.kind in _TYPES:
        spec["type"] = _TYPES[option.kind]
    if option.choices:
        spec["choices"] = list(option.choices)
    if option.metavar and not (pytest_layer and ":" not in option.metavar):
        spec["metavar"] = option.metavar  # the pytest layer's own are NPU_<FLAG>, but HOST:PORT says more
    default = option.default if pytest_layer else None
    spec["default"] = list(default) if isinstance(default, tuple) else default
    if not pytest_layer:
        spec["dest"] = option.key
    return spec


def add_target_option(add: Callable[..., object], flag: str, choices: tuple[str, ...], help: str,
                      default: str | None = None) -> None:
    """`--target`: which kind of target the probe runs on."""
    add(flag, choices=list(choices), default=default, help=help)


def add_options(add: Callable[..., object], command: str, prefix: str = "--") -> None:
    """Every option of the table `command` takes, through `add` (a parser's `add_argument`, a pytest
    group's `addoption`); the pytest layer's flags are `--npu-<flag>`."""
    for option in command_options(command):
        flag = option.flag if prefix == "--" else prefix + option.flag.lstrip("-")
        add(flag, **argument(option, command))


def apply_defaults(args: argparse.Namespace, command: str) -> dict[str, object]:
    """Fill in the default of every option of `command` the user did not give (the target included: None
    stays None, `auto` for run); return those the user gave (key -> value as parsed)."""
    given: dict[str, object] = {}
    if getattr(args, TARGET, None) is not None:
        given[TARGET] = args.target
    for option in command_options(command):
        value = getattr(args, option.key)
        if value is None:
            setattr(args, option.key, list(option.default) if isinstance(option.default, tuple) else option.default)
        else:
            given[option.key] = value
    return given


def given_options(args: argparse.Namespace, command: str) -> PlanOptions:
    """The typed options a parsed command line gives (defaults filled in): paths as absolute text,
    repeatable options as tuples."""
    values: dict[str, object] = {}
    for option in command_options(command):
        value = getattr(args, option.key)
        if option.path and value is not None:
            value = str(Path(value).absolute())
        values[option.key] = tuple(value) if isinstance(value, list) else value
    return PlanOptions(**values)  # type: ignore[arg-type]  # typed by the parser


def check_resume_options(
    given: Mapping[str, object], options: PlanOptions, target: str, profile: str, shard: bool, plan_file: Path
) -> None:
    """A `run` option given with `--resume` must agree with the plan it resumes; the first that does not is
    a usage error naming both values and the file the plan lives in. The plan's own target, profile and
    shard stand for those options; an option an older plan lacks counts as the option's default."""
    own: dict[str, object] = {TARGET: target, "profile": profile, "shard": shard}
    for key, value in given.items():
        if key in _CHECKED_APART:
            continue
        wanted = _comparable(value)
        recorded = _comparable(own[key] if key in own else options.given(key))
        if wanted != recorded:
            flag = "--target" if key == TARGET else OPTION[key].flag
            typed = flag if wanted is True else f"{flag} {_shown(wanted)}"  # --shard takes no value
            raise UsageError(
                f"{typed} conflicts with the resumed run's {key.replace('_', ' ')} {_shown(recorded)} ({plan_file}); "
                "drop the option or start a new run"
            )


def _comparable(value: object) -> object:
    """Paths as absolute path text (the command line made them absolute), repeatable options as sorted
    text, numbers as numbers: what a plan records and what the parser gives compare equal when they mean
    the same."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return tuple(sorted(str(v) for v in value))
    if value is None or isinstance(value, bool | int | float | str):
        return value  # 1 == 1.0: -j 1 agrees with a plan's 1
    return str(value)


def _shown(value: object) -> str:
    if value is None or value == ():
        text = "none"
    elif isinstance(value, tuple):
        text = ", ".join(value)
    elif isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return console_text(text)
