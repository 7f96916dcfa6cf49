"""Reading a waiver file given on the command line into the model's waiver values."""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from reference_model.waivers import InWords, Waiver, WaiverInvalid, described, parse_waivers
from reports.recorded.plan_options import read_plan_options

from ..errors import UsageError
from .safe_yaml import load_yaml_file


def load_waiver_file(path: Path) -> tuple[Waiver, ...]:
    try:
        data = load_yaml_file(path)
    except OSError as exc:
        raise UsageError(f"--waivers {path}: {exc.strerror}; expected a readable YAML waiver file") from None
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None
    return parse_waivers(data, str(path))


def _yaml_error(path: Path, exc: yaml.YAMLError) -> WaiverInvalid:
    """Where the YAML breaks (line and column when PyYAML knows them) and PyYAML's words for it."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return WaiverInvalid(
            str(path), None, f"line {mark.line + 1}, column {mark.column + 1}", InWords(f"a syntax error ({problem})"),
            "valid YAML",
        )  # fmt: skip
    return WaiverInvalid(str(path), None, "file", InWords(str(exc).splitlines()[0]), "valid YAML")


def check_waiver_ids(
    waivers: Sequence[Waiver], clause_ids: Iterable[str], scenario_ids: Iterable[str], path: Path
) -> None:
    """A waiver naming a clause this catalogue lacks, or a scenario pattern no scenario matches, is a
    usage error: a typo would otherwise waive nothing, silently."""
    clauses = frozenset(clause_ids)
    scenarios = tuple(scenario_ids)
    for index, waiver in enumerate(waivers):
        where = f"--waivers {path}: waivers[{index}]"
        if waiver.clause is not None and waiver.clause not in clauses:
            raise UsageError(f"{where}.clause {described(waiver.clause)}: not a clause ID of conformance/clauses.yaml"
                             f"{_did_you_mean(waiver.clause, clauses)}")
        if waiver.scenario is not None and not any(fnmatchcase(s, waiver.scenario) for s in scenarios):
            raise UsageError(f"{where}.scenario {described(waiver.scenario)}: matches no scenario ID of the corpus"
                             f"{_did_you_mean(waiver.scenario, scenarios)}")


def _did_you_mean(given: str, known: Iterable[str]) -> str:
    """`; did you mean 'req-type-unknown-einval'?` for the closest known IDs (a glob is compared as written)."""
    close = difflib.get_close_matches(given, sorted(known), n=2, cutoff=0.75)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def unmatched_devices_note(waivers: Sequence[Waiver], fingerprints: Mapping[str, str], path: Path | str) -> str | None:
    """One line when no entry of a waiver file matches the fingerprint of any device of the run (a file for
    another product, or a device glob with a typo): it then waives nothing, whatever failed."""
    if not waivers or not fingerprints:
        return None
    if any(fnmatchcase(fp, w.device) for w in waivers for fp in fingerprints.values()):
        return None
    shown = ", ".join(f"{serial} {fp!r}" for serial, fp in sorted(fingerprints.items())[:3])
    more = f" and {len(fingerprints) - 3} more" if len(fingerprints) > 3 else ""
    return (f"--waivers {path}: no entry's device glob matches a device of this run ({shown}{more}); "
            "it waives nothing here")


def waivers_as_of(options: Mapping[str, object], started: str) -> dt.date | None:
    """The day a recorded run applied its waivers on: its plan's `options.waivers_as_of`, or (runs recorded
    before that field) the UTC date it started. None when neither is a date: the plan is not trusted text."""
    recorded = read_plan_options(options).waivers_as_of
    if recorded is not None:
        return recorded
    if isinstance(started, str) and len(started) >= 10:
        try:
            return dt.date.fromisoformat(started[:10])
        except ValueError:
            return None
    return None


def expired_waivers(waivers: Sequence[Waiver], today: dt.date) -> tuple[Waiver, ...]:
    return tuple(w for w in waivers if today > w.expires)


def expiry_notes(waivers: Sequence[Waiver], today: dt.date) -> tuple[str, ...]:
    """One line per expired waiver: it is reported, and not applied."""
    return tuple(
        f"waiver for {'scenario ' + w.scenario if w.scenario else 'clause ' + str(w.clause)} on {w.device} "
        f"expired on {w.expires.isoformat()} and is not applied ({w.reason})"
        for w in expired_waivers(waivers, today)
    )
