"""dashboard.html: devices × clauses across builds, trends and regressions, from the results store.

One self-contained page (inline CSS, SVG and JS; no network), rendered like report.html (jinja2,
autoescape, StrictUndefined, text hygiene). Definitions:

- a device is a serial as one submitter (reports/store/runs.py: who imported) reported it; the same serial
  imported by two labs is two devices, so one lab's imports never change another's history;
- a device's history (builds, trend, regressions, the matrix) is made of full claims only: runs under
  published-37 of the released corpus with no filter (`runs.partial` is `[]`). Partial runs
  (filters, replays of single scenarios), other profiles (aosp-2026) and other corpora are listed
  apart, each with why; runs stored before schema 3 count as claims when their profile is
  published-37 and their answer is not "partial";
- a device's builds are the fingerprints its runs reported, numbered and ordered by first sight (the
  first run on each), so a build keeps its number in every render and a device that returns to an
  earlier build shows that build again, not a new one; the latest build is the one of its newest run,
  the previous build the one first seen before it (none when the latest is the device's first build);
- in a sharded run (`--shard`) each device ran part of its build's corpus: a device's answers in that run
  are its build's, the union of its shard group's results, as the run's claim takes them;
- a scenario's verdict on a build is the one of the newest run of that build that has it
  (NOT_EXECUTED only when no run of that build executed it);
- a clause's verdict on a build is the worst verdict (reference_model.verdicts.SEVERITY) among the scenarios
  citing it;
- between a device's previous and latest build (the build first seen before it, never a later one that
  the device left again): a clause **newly failing** (a regression) is FAIL or
  CRASH on the latest build and not on the previous one (PASS, WARN, not demonstrated: anything else); a
  clause **fixed** is FAIL or CRASH on the previous build and not on the latest; the **atlas changes**
  are the questions of the behaviour atlas (reports/answers/atlas.py) whose answer changed, each build's atlas
  being the one its newest run recorded in the store;
- the atlas section puts the latest build of every device side by side;
- a device's pass rate in a run is PASS over the results that are not NOT_APPLICABLE.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.jsonl import bounded_json
from floor.safe_io import output_dir, write_text
from reference_model.verdicts import SEVERITY, Verdict, worst

from ..answers.atlas import AtlasChange, DeviceAtlas, atlas_changes, side_by_side
from ..answers.claim import NORMATIVE_PROFILE
from ..answers.clause_answers import stored_answering
from ..store.runs import StoreEngine, describe_location, open_store, stored_atlas
from .atlas_view import SectionView, atlas_sections
from .html import environment

DASHBOARD_NAME: Final = "dashboard.html"


@dataclass(frozen=True, slots=True)
class _Row:
    run_id: str
    started: str
    submitter: str
    serial: str
    fingerprint: str
    scenario: str
    clauses: tuple[str, ...]
    verdict: Verdict
    group: str | None = None  # the shard group of a sharded run (its build)


@dataclass(frozen=True, slots=True)
class Build:
    fingerprint: str
    label: str  # "build 1", "build 2", ... in the order the device's runs first showed them
    first_seen: str
    last_seen: str
    runs: int
    run_ids: tuple[str, ...]  # oldest first
    scenario_verdicts: Mapping[str, Verdict]
    clause_scenarios: Mapping[str, tuple[str, ...]]
    clause_verdicts: Mapping[str, Verdict]


@dataclass(frozen=True, slots=True)
class Cell:
    verdict: str  # "" when no scenario cites the clause
    short: str
    tooltip: str
    regression: bool


@dataclass(frozen=True, slots=True)
class MatrixRow:
    clause: str
    cells: tuple[Cell, ...]
    regression: bool


@dataclass(frozen=True, slots=True)
class TrendPoint:
    x: float
    y: float
    tooltip: str


@dataclass(frozen=True, slots=True)
class BuildMark:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Trend:
    width: int
    height: int
    top: float
    bottom: float
    left: float
    right: float
    points: tuple[TrendPoint, ...]
    polyline: str
    marks: tuple[BuildMark, ...]


@dataclass(frozen=True, slots=True)
class Regression:
    submitter: str
    serial: str
    model: str
    clause: str
    previous: str
    latest: str
    verdict: str
    scenarios: str
    before: str = ""  # the clause's verdict on the previous build ("not demonstrated" when none)


@dataclass(frozen=True, slots=True)
class Device:
    submitter: str
    serial: str
    model: str
    builds: tuple[Build, ...]
    trend: Trend
    history: tuple[MatrixRow, ...]  # clause × this device's builds
    atlas: DeviceAtlas | None = None  # the latest build's (None: no run of it recorded one)
    atlas_changes: tuple[AtlasChange, ...] = ()  # since the previous build
    atlas_compared: bool = False  # both builds have an atlas in the store
    current: int = -1  # the index in `builds` of the latest build (the newest run's)

    @property
    def latest(self) -> Build | None:
        return self.builds[self.current] if self.builds else None

    @property
    def previous(self) -> Build | None:
        """The build first seen before the latest one: a device back on an older build has none before it."""
        index = self.current % len(self.builds) if self.builds else 0
        return self.builds[index - 1] if index > 0 else None

    @property
    def name(self) -> str:
        return f"{self.serial} ({self.submitter or 'unknown submitter'})"


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    started: str
    submitter: str
    profile: str
    target: str
    answer: str
    devices: str
    results: int
    apart: str  # why the run is not in the histories ("" for a full claim)


@dataclass(frozen=True, slots=True)
class Dashboard:
    devices: tuple[Device, ...]
    matrix: tuple[MatrixRow, ...]
    regressions: tuple[Regression, ...]  # newly failing on a device's latest build
    runs: tuple[RunRow, ...]  # full claims, newest first
    apart: tuple[RunRow, ...]  # partial runs, other profiles, replays: not in any history
    builds: int
    fixed: tuple[Regression, ...] = ()  # failing on the previous build, no longer on the latest
    atlas: tuple[SectionView, ...] = ()  # the latest builds side by side
    atlas_columns: tuple[str, ...] = ()
    without_atlas: tuple[str, ...] = ()  # devices whose latest build has no atlas in the store


_ORDER: Final = "coalesce(r.started_at, 0), r.started, r.run_id"


def _apart(profile: object, answer: object, partial: object) -> str:
    """Why a stored run is no full claim ("" when it is one); see the module docstring."""
    if isinstance(partial, str):
        reasons = bounded_json(partial)  # a store row is others' text: nesting and size bounded
        if reasons is None:
            reasons = ["unreadable partial reasons"]
        if isinstance(reasons, list):
            return "; ".join(str(r) for r in reasons)
        return "unreadable partial reasons"
    if profile != NORMATIVE_PROFILE:
        return f"profile {profile}"
    return "partial run" if answer == "partial" else ""


def _claim_run_ids(conn: StoreEngine) -> set[str]:
    return {
        str(r[0])
        for r in conn.query("SELECT run_id, profile, answer, partial FROM runs")
        if not _apart(r[1], r[2], r[3])
    }


def _rows(conn: StoreEngine) -> list[_Row]:
    claims = _claim_run_ids(conn)
    query = (
        "SELECT v.run_id, r.started, r.submitter, v.serial, v.fingerprint, v.scenario, v.clauses, v.verdict, "
        f"v.shard_group FROM verdicts v JOIN runs r ON r.run_id = v.run_id ORDER BY {_ORDER}"
    )
    out: list[_Row] = []
    answering = stored_answering(conn.query("SELECT run_id, serial, scenario, clause FROM verdict_clauses"))
    for row in conn.query(query):
        if row[0] not in claims:
            continue
        try:
            clauses = answering.get((str(row[0]), str(row[3]), str(row[5])), ())
            verdict = Verdict(row[7])
        except (ValueError, TypeError):
            continue
        group = str(row[8]) if row[8] else None
        out.append(_Row(row[0], row[1], row[2] or "", row[3], row[4], row[5], clauses, verdict, group))
    return _per_build(out)


def _per_build(rows: Sequence[_Row]) -> list[_Row]:
    """A sharded run's results stand for every device of their shard group: each device of a build ran part
    of its corpus, and the run answers for the build (the claim's rule). Other rows are kept as they are."""
    members: dict[tuple[str, str, str], dict[str, None]] = {}
    for row in rows:
        if row.group is not None:
            members.setdefault((row.run_id, row.submitter, row.group), {})[row.serial] = None
    out: list[_Row] = []
    for row in rows:
        if row.group is None:
            out.append(row)
            continue
        out.extend(dataclasses.replace(row, serial=serial) for serial in members[(row.run_id, row.submitter,
                                                                                   row.group)])
    return out


def _build(fingerprint: str, label: str, rows: Sequence[_Row]) -> Build:
    """Per-scenario verdicts of one build: newest run first; NOT_EXECUTED only as a last resort."""
    by_scenario: dict[str, _Row] = {}
    for row in rows:  # oldest first
        previous = by_scenario.get(row.scenario)
        if previous is None or row.verdict is not Verdict.NOT_EXECUTED or previous.verdict is Verdict.NOT_EXECUTED:
            by_scenario[row.scenario] = row
    clause_scenarios: dict[str, list[str]] = {}
    for row in by_scenario.values():
        for clause in row.clauses:
            clause_scenarios.setdefault(clause, []).append(row.scenario)
    clause_verdicts: dict[str, Verdict] = {}
    for clause, scenarios in clause_scenarios.items():
        found = worst(by_scenario[s].verdict for s in scenarios)
        if found is not None:
            clause_verdicts[clause] = found
    return Build(
        fingerprint=fingerprint,
        label=label,
        first_seen=min(r.started for r in rows),
        last_seen=max(r.started for r in rows),
        runs=len({r.run_id for r in rows}),
        run_ids=tuple(dict.fromkeys(r.run_id for r in rows)),
        scenario_verdicts={s: r.verdict for s, r in by_scenario.items()},
        clause_scenarios={c: tuple(sorted(s)) for c, s in clause_scenarios.items()},
        clause_verdicts=clause_verdicts,
    )


def _listed(build: Build, clause: str) -> str:
    return "; ".join(f"{s} {build.scenario_verdicts[s]}" for s in build.clause_scenarios.get(clause, ()))


def _failing(build: Build, clause: str) -> bool:
    verdict = build.clause_verdicts.get(clause)
    return verdict is not None and verdict.blocking


def is_regression(previous: Build | None, latest: Build | None, clause: str) -> bool:
    """Newly failing: FAIL or CRASH on the latest build, not on the previous one (see the module docstring)."""
    if previous is None or latest is None:
        return False
    return _failing(latest, clause) and not _failing(previous, clause)


def is_fixed(previous: Build | None, latest: Build | None, clause: str) -> bool:
    if previous is None or latest is None:
        return False
    return _failing(previous, clause) and not _failing(latest, clause)


def _build_atlas(conn: StoreEngine, build: Build | None, serial: str) -> DeviceAtlas | None:
    """The atlas of the newest run of the build that recorded one for the device."""
    for run_id in reversed(build.run_ids if build is not None else ()):
        found = stored_atlas(conn, run_id, serial)
        if found is not None:
            return found
    return None


def _cell(build: Build | None, previous: Build | None, clause: str, where: str) -> Cell:
    verdict = build.clause_verdicts.get(clause) if build else None
    if build is None or verdict is None:
        return Cell("", "", f"{clause} on {where}: no scenario", False)
    build_name = f"{build.label} ({build.fingerprint or 'unknown build'})"
    tooltip = f"{clause} on {where}, {build_name}: {verdict} ({_listed(build, clause)})"
    before = previous.clause_verdicts.get(clause) if previous else None
    if previous is not None:
        tooltip += f"; {previous.label}: {before or 'not demonstrated'}"
    regression = is_regression(previous, build, clause)
    if regression:
        tooltip = "REGRESSION: " + tooltip
    return Cell(str(verdict), verdict.label, tooltip, regression)


TREND_WIDTH: Final = 560
TREND_HEIGHT: Final = 170


def _trend(rows: Sequence[_Row], builds: Sequence[Build]) -> Trend:
    left, right, top, bottom = 44.0, TREND_WIDTH - 16.0, 14.0, TREND_HEIGHT - 34.0
    runs: dict[str, list[_Row]] = {}
    for row in rows:  # oldest first
        runs.setdefault(row.run_id, []).append(row)
    labels = {b.fingerprint: b.label for b in builds}
    ordered = list(runs.items())
    step = (right - left) / max(len(ordered) - 1, 1)
    points: list[TrendPoint] = []
    marks: list[BuildMark] = []
    last_build: str | None = None
    for index, (run_id, run_rows) in enumerate(ordered):
        x = left + index * step if len(ordered) > 1 else (left + right) / 2
        fingerprint = run_rows[0].fingerprint
        if fingerprint != last_build:
            marks.append(BuildMark(round(x, 2), labels.get(fingerprint, "?")))
            last_build = fingerprint
        applicable = [r for r in run_rows if r.verdict is not Verdict.NOT_APPLICABLE]
        if not applicable:
            continue
        passed = sum(1 for r in applicable if r.verdict is Verdict.PASS)
        rate = passed / len(applicable)
        points.append(
            TrendPoint(
                round(x, 2),
                round(bottom - rate * (bottom - top), 2),
                f"{run_id} ({run_rows[0].started}), {labels.get(fingerprint, '?')} {fingerprint or 'unknown build'}: "
                f"{passed}/{len(applicable)} pass ({100 * rate:.0f}%)",
            )
        )
    polyline = " ".join(f"{p.x},{p.y}" for p in points)
    return Trend(TREND_WIDTH, TREND_HEIGHT, top, bottom, left, right, tuple(points), polyline, tuple(marks))


def build_dashboard(conn: StoreEngine) -> Dashboard:
    rows = _rows(conn)
    by_device: dict[tuple[str, str], list[_Row]] = {}
    for row in rows:
        by_device.setdefault((row.submitter, row.serial), []).append(row)
    models = {
        (str(r[0] or ""), str(r[1])): r[2] or ""
        for r in conn.query(  # newest last wins
            "SELECT submitter, serial, model FROM devices ORDER BY coalesce(last_seen_at, 0), last_seen"
        )
    }
    devices: list[Device] = []
    for key in sorted(by_device, key=lambda k: (k[1], k[0])):
        submitter, serial = key
        device_rows = by_device[key]
        by_build: dict[str, list[_Row]] = {}
        for row in device_rows:
            by_build.setdefault(row.fingerprint, []).append(row)
        # by_build keeps the order of the rows, which come in timestamp order: the first run on each build
        builds = tuple(_build(f, f"build {i}", rows_of) for i, (f, rows_of) in enumerate(by_build.items(), start=1))
        current = list(by_build).index(device_rows[-1].fingerprint)
        latest = builds[current]
        previous = builds[current - 1] if current > 0 else None
        clauses = sorted({c for b in builds for c in b.clause_verdicts})
        where = f"{serial} ({submitter or 'unknown submitter'})"
        history = tuple(
            MatrixRow(
                clause,
                tuple(_cell(b, builds[i - 1] if i else None, clause, where) for i, b in enumerate(builds)),
                is_regression(previous, latest, clause),
            )
            for clause in clauses
        )
        model = models.get(key, "")
        latest_atlas = _build_atlas(conn, latest, serial)
        previous_atlas = _build_atlas(conn, previous, serial)
        compared = latest_atlas is not None and previous_atlas is not None
        changes = atlas_changes(previous_atlas, latest_atlas) if latest_atlas and previous_atlas else ()
        devices.append(Device(submitter, serial, model, builds, _trend(device_rows, builds), history, latest_atlas,
                              changes, compared, current))

    clauses = sorted({c for d in devices if d.latest for c in d.latest.clause_verdicts})
    matrix: list[MatrixRow] = []
    regressions: list[Regression] = []
    fixed: list[Regression] = []
    for device in devices:
        now, before = device.latest, device.previous
        if now is None or before is None:
            continue
        for clause in sorted(set(now.clause_verdicts) | set(before.clause_verdicts)):
            if is_fixed(before, now, clause):
                answer = now.clause_verdicts.get(clause)
                fixed.append(Regression(
                    device.submitter, device.serial, device.model, clause, f"{before.label} {before.fingerprint}",
                    f"{now.label} {now.fingerprint}", str(answer) if answer else "not demonstrated",
                    _listed(now, clause), str(before.clause_verdicts[clause]),
                ))
    for clause in clauses:
        cells = tuple(_cell(d.latest, d.previous, clause, d.name) for d in devices)
        matrix.append(MatrixRow(clause, cells, any(c.regression for c in cells)))
        for device, cell in zip(devices, cells, strict=True):
            if cell.regression and device.latest is not None and device.previous is not None:
                regressions.append(
                    Regression(
                        submitter=device.submitter,
                        serial=device.serial,
                        model=device.model,
                        clause=clause,
                        previous=f"{device.previous.label} {device.previous.fingerprint}",
                        latest=f"{device.latest.label} {device.latest.fingerprint}",
                        verdict=cell.verdict,
                        scenarios=_listed(device.latest, clause),
                        before=str(device.previous.clause_verdicts.get(clause) or "not demonstrated"),
                    )
                )
    run_devices: dict[str, set[str]] = {}
    for run_id, serial in conn.query("SELECT DISTINCT run_id, serial FROM verdicts"):
        run_devices.setdefault(str(run_id), set()).add(str(serial))
    all_runs = tuple(
        RunRow(
            str(r[8] or r[0]),  # the plan's own id; r[0] is its key in the store, in its submitter's namespace
            str(r[1]),
            str(r[2] or ""),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            ",".join(sorted(run_devices.get(r[0], ()))),
            int(r[6]),
            _apart(r[3], r[5], r[7]),
        )
        for r in conn.query(
            "SELECT r.run_id, r.started, r.submitter, r.profile, r.target, r.answer, count(v.scenario), r.partial, "
            "r.plan_run_id FROM runs r LEFT JOIN verdicts v ON v.run_id = r.run_id "
            "GROUP BY r.run_id, r.started, r.submitter, r.profile, r.target, r.answer, r.partial, r.started_at, "
            "r.plan_run_id "
            "ORDER BY coalesce(r.started_at, 0) DESC, r.started DESC, r.run_id DESC"
        )
    )
    claims = tuple(r for r in all_runs if not r.apart)
    apart = tuple(r for r in all_runs if r.apart)
    fingerprints = {b.fingerprint for d in devices for b in d.builds}
    with_atlas = [(d.name, d.atlas) for d in devices if d.atlas is not None]
    side = side_by_side(with_atlas)
    return Dashboard(tuple(devices), tuple(matrix), tuple(regressions), claims, apart, len(fingerprints),
                     tuple(fixed), atlas_sections(side), side.columns,
                     tuple(d.name for d in devices if d.atlas is None))


def render_dashboard(dashboard: Dashboard, store: str | Path) -> str:
    template = environment().get_template("dashboard.html.j2")
    return template.render(
        d=dashboard,
        store=describe_location(store),
        generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        verdicts=[str(v) for v in SEVERITY],
    )


def write_dashboard(store: str | Path, out_dir: Path) -> Path:
    """Render the dashboard of the store at `store` (a path or URL) into `out_dir`/dashboard.html (atomically)."""
    with open_store(store, create=False) as conn:
        dashboard = build_dashboard(conn)
    path = output_dir(out_dir) / DASHBOARD_NAME
    return write_text(path, render_dashboard(dashboard, store))
