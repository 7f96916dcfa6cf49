"""Waiver files: known FAILs turned into WAIVED for matching devices, until an expiry date.

Format (YAML, loaded by the host; this module validates the plain data)::

    waivers:
      - scenario: "cookies.*"          # a scenario id or glob ...
        device: "google/cf_x86_64/*"   # ... or `clause: <id>`; device: fingerprint glob
        reason: "b/123: deleter runs late on this build"
        expires: 2026-12-31

A `scenario:` waiver waives every FAIL of the scenarios its glob matches. A `clause:` waiver waives
exactly the FAILs whose failure names that clause (`failing_clauses`: the divergence's clause), never a
FAIL of another clause in a scenario that merely cites it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final

from .errors import ScenarioInvalid

# the only waiver file format so far; a file may say so with `version: 1`
WAIVER_FORMAT_VERSION: Final = 1


class WaiverInvalid(ScenarioInvalid):
    """A waiver file does not follow the format; the message names the file and the field.

    What was found is described in words (`a list`, `'text'`, `2026-01-01`), never as a Python repr."""

    def __init__(self, source: str, scenario: str | None, field: str, found: object, expected: str) -> None:
        super().__init__(source, scenario, field, found, expected)
        self.args = (f"{source}: {field}: expected {expected}, found {described(found)}",)


class InWords(str):
    """A finding already put in words, shown without quotes."""


def described(found: object) -> str:
    """A value from a waiver file in a few words for a one-line message (bounded, no reprs of containers)."""
    if isinstance(found, InWords):
        return str(found)
    if found is None:
        return "nothing"
    if isinstance(found, bool):
        return "true" if found else "false"
    if isinstance(found, int | float):
        return str(found)
    if isinstance(found, dt.date):
        return found.isoformat()
    if isinstance(found, str):
        return repr(found if len(found) <= 60 else found[:57] + "...")
    if isinstance(found, Mapping):
        return "a mapping"
    if isinstance(found, list | tuple):
        return "a list"
    return f"a {type(found).__name__}"


@dataclass(frozen=True, slots=True)
class Waiver:
    scenario: str | None
    clause: str | None
    device: str
    reason: str
    expires: dt.date
    source: str

    def matches(self, scenario_id: str, failing: Iterable[str], fingerprint: str, today: dt.date) -> bool:
        """Unexpired, on a matching device, and the scenario matches (`scenario:`) or the failure names
        the clause (`clause:`; `failing` is `failing_clauses` of the failure)."""
        if today > self.expires or not fnmatchcase(fingerprint, self.device):
            return False
        if self.scenario is not None:
            return fnmatchcase(scenario_id, self.scenario)
        return self.clause in set(failing)


def failing_clauses(divergence_clause: str | None, cited: Iterable[str]) -> tuple[str, ...]:
    """The clauses a failure names: its divergence's clause; without a divergence (a death where none was
    expected, a damaged record) every clause the scenario cites, so that no failure goes unnamed.
    The same rule gives a clause its FAIL/CRASH answer (reports/answers/clause_answers.py)."""
    return (divergence_clause,) if divergence_clause is not None else tuple(cited)


def _date(value: object, source: str, field: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise WaiverInvalid(source, None, field, value, "a date YYYY-MM-DD")


def parse_waivers(data: object, source: str) -> tuple[Waiver, ...]:
    """Validate a loaded waiver file; raise WaiverInvalid naming the file and the field."""
    if data is None:
        return ()
    if not isinstance(data, Mapping) or not isinstance(data.get("waivers"), list):
        found = "a mapping without a `waivers` list" if isinstance(data, Mapping) else described(data)
        raise WaiverInvalid(source, None, "file", InWords(found), "a mapping with a `waivers` list")
    extra = sorted(map(str, set(data) - {"waivers", "version"}))  # keys may be numbers as well as text
    if extra:
        raise WaiverInvalid(source, None, extra[0], extra[0], "only `waivers` (and `version`)")
    if "version" in data and (isinstance(data["version"], bool) or data["version"] != WAIVER_FORMAT_VERSION):
        raise WaiverInvalid(source, None, "version", data["version"], f"{WAIVER_FORMAT_VERSION} (or no `version`)")
    out: list[Waiver] = []
    for i, raw in enumerate(data["waivers"]):
        where = f"waivers[{i}]"
        if not isinstance(raw, Mapping):
            raise WaiverInvalid(source, None, where, raw, "a mapping with scenario or clause, device, reason, expires")
        unknown = set(raw) - {"scenario", "clause", "device", "reason", "expires"}
        if unknown:
            key = sorted(map(str, unknown))[0]
            raise WaiverInvalid(source, None, f"{where}.{key}", key, "one of scenario, clause, device, reason, expires")
        scenario, clause = raw.get("scenario"), raw.get("clause")
        if (scenario is None) == (clause is None):
            found = (
                f"both (clause {described(clause)}, scenario {described(scenario)})"
                if scenario is not None
                else f"neither (fields: {', '.join(map(str, raw)) or 'none'})"
            )
            raise WaiverInvalid(source, None, where, InWords(found), "exactly one of `scenario` or `clause`")
        for key, value in (("scenario", scenario), ("clause", clause)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise WaiverInvalid(source, None, f"{where}.{key}", value, "a non-empty string")
        device = raw.get("device")
        if not isinstance(device, str) or not device.strip():
            raise WaiverInvalid(source, None, f"{where}.device", device, "a fingerprint glob")
        reason = raw.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise WaiverInvalid(source, None, f"{where}.reason", reason, "a non-empty reason")
        if "expires" not in raw:
            raise WaiverInvalid(source, None, f"{where}.expires", None, "a date YYYY-MM-DD")
        expires = _date(raw["expires"], source, f"{where}.expires")
        out.append(Waiver(scenario, clause, device, reason.strip(), expires, source))
    return tuple(out)


def find_waiver(
    waivers: Sequence[Waiver], scenario_id: str, failing: Iterable[str], fingerprint: str, today: dt.date
) -> Waiver | None:
    """The first unexpired waiver on this device matching the scenario (id glob) or a clause the failure
    names (`failing`: `failing_clauses` of the failure, never merely the clauses the scenario cites)."""
    clause_list = tuple(failing)
    for w in waivers:
        if w.matches(scenario_id, clause_list, fingerprint, today):
            return w
    return None
