"""Waiver files: known FAILs turned into WAIVED for matching devices, until an expiry date.

Format (YAML, loaded by the host; this module validates the plain data)::

    waivers:
      - scenario: "cookies.*"          # a scenario id or glob ...
        device: "google/cf_x86_64/*"   # ... or `clause: <id>`; device: fingerprint glob
        reason: "b/123: deleter runs late on this build"
        expires: 2026-12-31
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .errors import ScenarioInvalid


class WaiverInvalid(ScenarioInvalid):
    """A waiver file does not follow the format; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Waiver:
    scenario: str | None
    clause: str | None
    device: str
    reason: str
    expires: dt.date
    source: str

    def matches(self, scenario_id: str, clauses: Iterable[str], fingerprint: str, today: dt.date) -> bool:
        if today > self.expires or not fnmatchcase(fingerprint, self.device):
            return False
        if self.scenario is not None:
            return fnmatchcase(scenario_id, self.scenario)
        return self.clause in set(clauses)


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
        raise WaiverInvalid(source, None, "waivers", type(data).__name__, "a mapping with a `waivers` list")
    extra = set(data) - {"waivers", "version"}
    if extra:
        raise WaiverInvalid(source, None, sorted(extra)[0], sorted(extra)[0], "only `waivers` (and `version`)")
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
            raise WaiverInvalid(source, None, where, dict(raw), "exactly one of `scenario` or `clause`")
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
    waivers: Sequence[Waiver], scenario_id: str, clauses: Iterable[str], fingerprint: str, today: dt.date
) -> Waiver | None:
    """The first unexpired waiver matching the scenario (id glob) or one of its clauses, on this device."""
    clause_list = tuple(clauses)
    for w in waivers:
        if w.matches(scenario_id, clause_list, fingerprint, today):
            return w
    return None
