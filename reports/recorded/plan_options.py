"""Every option a run plan records (`options` in results.jsonl's plan record), its meaning and its type: one
table, `PlanOptions`, whose fields are the option keys.

A plan is not trusted text: `read_plan_options` takes each value only when it has the type this kit writes
it in, and names every other one as malformed (a problem of the run in every reader: reports, verify,
resume). A malformed value is never guessed at: the option reads as absent, and a malformed selection
makes the run partial (reports/recorded/plan_filters.py). Absent means "the plan does not say"; what an option
nobody gave means for `npuconf run` is its `default` (the replay lines leave it out, `--resume` compares
with it). The claim's configuration, verify, the replay lines, merge and `--resume` all read options here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, get_type_hints

from floor.cross_targets import CROSS_TARGETS
from reference_model.caps import DEVICE_POLICIES
from reference_model.profiles import PERSONALITIES, PROFILES, PUBLISHED

_SHOWN: Final = 80
# What a malformed option means for the run: a selection (True) leaves its scenarios unknown.
_CONSEQUENCE: Final = {True: "its selection is unknown", False: "read as not given"}

# The command lines an option is given on: `npuconf run`, `npuconf fuzz`, the pytest layer (`--npu-<flag>`).
# The virtual NPU's personalities (docs/vnpu.md §5) and the allocation policies a device may declare, each
# first the default: reference_model/profiles.py and caps.py hold them.
ALLOCATION_POLICIES: Final = DEVICE_POLICIES
# `--cross`: the cross builds the kit knows (floor/cross_targets.py).
CROSS_TRIPLES: Final = tuple(CROSS_TARGETS)
RUN: Final = "run"
FUZZ: Final = "fuzz"
PYTEST: Final = "pytest"
EVERYWHERE: Final = (RUN, FUZZ, PYTEST)


def _option(flag: str, meaning: str, default: object = None, *, selection: bool = False, empty: object = None,
            written: bool = True, help: str | None = None, metavar: str | None = None,
            choices: tuple[str, ...] = (), path: bool = False, on: tuple[str, ...] = (RUN,),
            target: str | None = None) -> Any:
    """A PlanOptions field: `flag` the `npuconf run` flag that sets it ("" for none), `default` what the run
    command takes when nobody gives it, `selection` whether it narrows the scenarios (a partial run),
    `written` whether a run plan always records it (else only when set). For the command lines
    (host/options.py): `help`, `metavar`, `choices`, `path` (made absolute as typed), `on` the
    command lines that take it, `target` the target kind it belongs to (host/targets/kinds.py)."""
    return field(default=empty, metadata={"flag": flag, "meaning": meaning, "default": default,
                                          "selection": selection, "written": written, "help": help,
                                          "metavar": metavar, "choices": choices, "path": path,
                                          "on": on if flag else (), "target": target})  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """A plan's options, typed; the field order is the order a run plan records them in. It is also the
    table of `npuconf run`'s options and of those `npuconf fuzz` and the pytest layer share with it."""

    impl: str | None = _option(
        "--impl", "the library implementing the API (local target), absolute", path=True, on=EVERYWHERE,
        target="local", help="local target: a Linux library exporting the 18 functions")
    personality: str | None = _option(
        "--personality", "the vnpu personality", PERSONALITIES[0], choices=PERSONALITIES, on=EVERYWHERE,
        help="vnpu personality")
    policy: str | None = _option(
        "--policy", "the vnpu allocation policy", ALLOCATION_POLICIES[0], choices=ALLOCATION_POLICIES, on=(RUN, FUZZ),
        help="vnpu allocation policy (docs/vnpu.md §6)")
    keyword: str | None = _option(
        "-k", "scenarios whose id or title matches", selection=True,
        help="only scenarios whose id matches this expression")
    scenario_ids: tuple[str, ...] = _option(
        "--scenario", "exactly these scenario ids", (), selection=True, empty=(), metavar="ID",
        help="only the scenario with exactly this id (repeatable; with -k/--clause, all must match)")
    clauses: tuple[str, ...] = _option(
        "--clause", "scenarios citing these clause ids", (), selection=True, empty=(), metavar="CLAUSE",
        help="only scenarios citing this clause (repeatable)")
    timeout_multiplier: float | None = _option(
        "--timeout-multiplier", "every scenario's time budget times this", 1.0, on=EVERYWHERE,
        help="scale every timeout (slow devices)")
    jobs: int | None = _option("-j", "lanes (probe processes) per device", help="probe processes per device",
                               on=(RUN, FUZZ))
    cross: str | None = _option(
        "--cross", "the cross-built probe run under qemu (its triple)", choices=CROSS_TRIPLES, target="local",
        help="local target: run a cross build under qemu-user")
    scenarios: str | None = _option(
        "--scenarios", "the scenario directory run instead of the corpus, absolute", selection=True, path=True,
        help="scenario directory (default: conformance/scenarios)")
    waivers: str | None = _option(
        "--waivers", "the waiver file applied, absolute", path=True, help="waiver file (YAML)")
    waivers_expired: tuple[str, ...] = _option(
        "", "the waivers of that file that had expired, one line each", (), empty=())
    waivers_as_of: dt.date | None = _option("", "the day the run judged waivers on")  # noqa: RUF009
    devices: int | None = _option(
        "--devices", "virtual devices started", 1, on=EVERYWHERE, target="virtual",
        help="virtual target: number of virtual devices")
    serials: tuple[str, ...] = _option(
        "--serial", "the adb devices chosen", (), empty=(), metavar="SERIAL", on=EVERYWHERE, target="adb",
        help="adb target: only this device (repeatable; default: every one)")
    adb_servers: tuple[str, ...] = _option(
        "--adb-server", "the adb servers (HOST:PORT) whose devices joined", (), empty=(), metavar="HOST:PORT",
        on=EVERYWHERE, target="adb", help="adb target: an adb server, HOST:PORT or localfilesystem:SOCKET (repeatable)")
    capacity: int | None = _option(
        "--capacity", "the declared capacity in bytes", on=(RUN, FUZZ),
        help="capacity in bytes: the vnpu's, or declared for --impl and adb devices")
    profile: str | None = _option(
        "--profile", "the profile judged under", PUBLISHED.name, choices=tuple(PROFILES), on=EVERYWHERE,
        help="spec profile")
    shard: bool = _option(
        "--shard", "each build's devices share its scenarios", False, empty=False,
        help="devices of one build share its scenarios (each runs once per build) instead of each running all")
    merged: bool = _option(
        "", "the run is a merge of runs (npuconf report --merge)", False, empty=False, written=False)
    # (key, what is wrong: "plan option jobs (-j) is '8', not an integer") per option recorded with another type
    malformed: tuple[tuple[str, str], ...] = field(default=(), metadata={"flag": None})

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per malformed option, with what it means for the run (a problem of the run
        wherever it is read)."""
        return tuple(f"{text}: {_CONSEQUENCE[OPTION[key].selection]}" for key, text in self.malformed)

    def to_json(self) -> dict[str, object]:
        """The plan's `options` object."""
        out: dict[str, object] = {}
        for option in OPTIONS:
            value = getattr(self, option.key)
            if option.written or value != option.empty:
                out[option.key] = _written(value)
        return out

    def given(self, key: str) -> Any:
        """The option's value, or what the run command takes when the plan does not say (its default)."""
        value = getattr(self, key)
        return OPTION[key].default if value is None or value == OPTION[key].empty else value


@dataclass(frozen=True, slots=True)
class PlanOption:
    """One row of the table: a PlanOptions field and its metadata."""

    key: str
    flag: str
    meaning: str
    default: object
    selection: bool
    written: bool
    empty: object
    kind: str  # text, texts, number, integer, flag or date
    help: str | None
    metavar: str | None
    choices: tuple[str, ...]
    path: bool
    on: tuple[str, ...]  # the command lines that take it
    target: str | None  # the target kind it belongs to; None: every kind's


_KINDS: Final[dict[object, str]] = {
    str | None: "text",
    tuple[str, ...]: "texts",
    float | None: "number",
    int | None: "integer",
    bool: "flag",
    dt.date | None: "date",
}
_EXPECTED: Final = {
    "text": "a text",
    "texts": "a list of texts",
    "number": "a number",
    "integer": "an integer",
    "flag": "true or false",
    "date": "a date (YYYY-MM-DD)",
}


def _rows() -> tuple[PlanOption, ...]:
    hints = get_type_hints(PlanOptions, globalns={"dt": dt})
    return tuple(
        PlanOption(f.name, f.metadata["flag"], f.metadata["meaning"], f.metadata["default"], f.metadata["selection"],
                   f.metadata["written"], f.default, _KINDS[hints[f.name]], f.metadata["help"], f.metadata["metavar"],
                   f.metadata["choices"], f.metadata["path"], f.metadata["on"], f.metadata["target"])
        for f in dataclasses.fields(PlanOptions)
        if f.metadata.get("flag") is not None
    )  # fmt: skip


OPTIONS: Final[tuple[PlanOption, ...]] = _rows()
OPTION: Final[dict[str, PlanOption]] = {o.key: o for o in OPTIONS}


def _written(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _typed(kind: str, value: object) -> tuple[bool, object]:
    """(whether `value` has the kind's type, the typed value)."""
    if kind == "text":
        return isinstance(value, str), value
    if kind == "texts":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return ok, tuple(value) if ok and isinstance(value, list) else ()
    if kind == "number":  # NaN and infinities are numbers; their bounds are the run command's to check
        return isinstance(value, int | float) and not isinstance(value, bool), value
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "flag":
        return isinstance(value, bool), value
    if isinstance(value, str) and len(value) == 10:  # date
        try:
            return True, dt.date.fromisoformat(value)
        except ValueError:
            pass
    return False, None


def _shown(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value)[:_SHOWN]


def read_plan_options(options: Mapping[str, object]) -> PlanOptions:
    """The options a plan records, typed; keys this kit does not know are left out."""
    values: dict[str, object] = {}
    malformed: list[tuple[str, str]] = []
    for option in OPTIONS:
        value = options.get(option.key)
        if value is None or value == "" or value == []:
            continue
        ok, typed = _typed(option.kind, value)
        if ok:
            values[option.key] = typed
            continue
        named = f"{option.key} ({option.flag})" if option.flag else option.key
        malformed.append((option.key, f"plan option {named} is {_shown(value)}, not {_EXPECTED[option.kind]}"))
    return PlanOptions(**values, malformed=tuple(malformed))  # type: ignore[arg-type]  # typed by _typed

