"""`npuconf rejudge`: re-derive a run's verdicts from its stored raw traces with the current model.

No device is needed: each result record keeps the trace the probe wrote, the device record keeps
what the judge needs to know about the device, and the scenarios come from the corpus by id. The
rejudged run is written as a new results.jsonl (its plan names the profile used and the run it came
from) with its reports. `npuconf verify` uses the same code to check a bundle's verdicts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from floor.safe_io import output_dir
from reference_model.caps import DeviceCaps
from reference_model.profiles import PROFILES
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver
from reports.answers.claim import Claim, claim_of
from reports.recorded.outputs import REPORT_FILES, RESULTS_FILE, present
from reports.recorded.plan_options import OPTION
from reports.recorded.records import (
    EndRecord,
    LostRecord,
    Record,
    Records,
    ResultRecord,
    read_records,
    verdict_counts,
    write_records,
)
from reports.recorded.results import RunResults, load_results
from reports.renderers.run_reports import write_reports

from ..errors import UsageError
from ..probe import Pairs
from ..run import DeviceFacts, Judging, load_digests, now_iso, planned, save_digests
from ..suite import (
    SCENARIO_ROOT,
    check_waiver_ids,
    corpus_hash,
    expiry_notes,
    load_catalogue,
    load_corpus,
    load_waiver_file,
    model_hash,
    unmatched_devices_note,
)
from .recorded import decide_record, recorded_devices
from .run_dir import load_planned_run


@dataclass(frozen=True, slots=True)
class VerdictChange:
    device: str
    scenario: str
    before: Verdict
    after: Verdict
    discrepancy: str | None

    def line(self) -> str:
        tag = f"  [{self.discrepancy}]" if self.discrepancy else ""
        return f"{self.device}  {self.scenario}  {self.before} -> {self.after}{tag}"


@dataclass(frozen=True, slots=True)
class Rejudged:
    """A run's result records judged again (in memory); `records` are complete result records."""

    run: RunResults
    profile: str
    records: tuple[ResultRecord, ...]
    changes: tuple[VerdictChange, ...]
    judged: int
    missing_scenarios: tuple[tuple[str, str], ...]  # (device, scenario) whose scenario the corpus lacks
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RejudgeOutcome:
    rejudged: Rejudged
    out_dir: Path
    paths: dict[str, Path]
    exit_code: int
    claim: Claim


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise UsageError(f"--profile {profile}: unknown profile; expected one of {', '.join(sorted(PROFILES))}")
    return profile


def rejudge_run(
    run: RunResults,
    stored_records: Records,
    profile: str,
    corpus: Mapping[str, Scenario],
    catalogue: Mapping[str, str],
    waivers: Sequence[Waiver] | None = None,
    today: dt.date | None = None,
) -> Rejudged:
    """Decide every recorded result of `run` again (host.run.decide, as `verify` does), ERRORs included.

    `waivers` None keeps the waivers the run recorded (a result that still FAILs stays WAIVED with its
    stored waiver); a sequence (possibly empty) decides alone, as `npuconf run --waivers` would.
    """
    records: list[ResultRecord] = []
    by_line = stored_records.by_line()
    changes: list[VerdictChange] = []
    missing: list[tuple[str, str]] = []
    devices = recorded_devices(run)
    notes: list[str] = list(devices.problems)
    judging = Judging(catalogue, profile, waivers or (), today)
    judged = 0
    digests = load_digests()
    unknown = DeviceFacts(DeviceCaps(), Pairs(None, None))
    for serial in run.device_serials:
        if serial not in devices.facts and any(r.recorded and r.device == serial for r in run.results):
            notes.append(f"device {serial} has no device record; its traces are judged with unknown capabilities")
    for record in run.results:
        if not record.recorded or record.line is None:
            continue  # NOT_EXECUTED computed by the loader: nothing was stored
        stored = by_line.get(record.line)
        if not isinstance(stored, ResultRecord):  # pragma: no cover - load_results read this line, so it parses
            continue
        scenario = corpus.get(record.scenario)
        if scenario is None:
            missing.append((record.device, record.scenario))
            records.append(stored)
            continue
        info = run.devices.get(record.device, {})
        decision = decide_record(record, scenario, devices.facts.get(record.device, unknown), info, judging)
        outcome = decision.outcome
        judged += decision.judged
        verdict: Verdict = outcome.verdict
        waiver = outcome.waiver
        if waivers is None and verdict is Verdict.FAIL and record.verdict is Verdict.WAIVED:
            verdict, waiver = Verdict.WAIVED, stored.waiver  # the waiver as stored
        new = dataclasses.replace(
            stored,
            chapter=scenario.chapter,
            title=scenario.title,
            clauses=tuple(scenario.clauses),
            verdict=verdict,
            reason=outcome.reason,
            divergence=outcome.divergence,
            discrepancy=outcome.discrepancy,
            waiver=waiver,
            allocations_refused=verdict is Verdict.PASS and decision.allocations_refused,
            demonstrated=outcome.demonstrated if verdict.exercises else (),
        )
        records.append(new)
        if verdict is not record.verdict:
            changes.append(VerdictChange(record.device, record.scenario, record.verdict, verdict, outcome.discrepancy))
    save_digests(digests)
    return Rejudged(run, profile, tuple(records), tuple(changes), judged, tuple(missing), tuple(notes))


@dataclass(frozen=True, slots=True)
class WaiversApplied:
    """The waiver file a rejudge applied instead of the run's own, and the day it judged them on."""

    path: Path
    waivers: tuple[Waiver, ...]
    as_of: dt.date

    def options(self, recorded: Mapping[str, object]) -> dict[str, object]:
        """The plan's options with this file in place of the run's: what the rejudged run was judged with."""
        return {
            **recorded,
            "waivers": str(self.path.absolute()),
            "waivers_as_of": self.as_of.isoformat(),
            "waivers_expired": list(expiry_notes(self.waivers, self.as_of)),
        }


def rejudged_lines(
    rejudged: Rejudged, stored: Records, corpus: Mapping[str, Scenario], root: Path,
    waivers: WaiversApplied | None = None,
) -> list[Record]:
    """The new results.jsonl: plan (new profile, `rejudged_from`; the waiver file applied when one was given
    instead of the run's own), device records, results, end."""
    run = rejudged.run
    original = stored.plan
    if run.plan is None or original is None:
        raise UsageError(f"{run.path}: no plan record; rejudge needs the run's plan")
    plan = dataclasses.replace(
        original,
        options=waivers.options(original.options) if waivers is not None else original.options,
        run_id=f"{original.run_id}-rejudged-{rejudged.profile}",
        profile=rejudged.profile,
        model_hash=model_hash(),
        corpus_hash=corpus_hash(root),
        rejudged_from={
            "run_id": original.run_id,
            "profile": original.profile,
            "model_hash": original.model_hash,
            "corpus_hash": original.corpus_hash,
            "results": str(run.path),
            "rejudged": now_iso(),
        },
        scenarios=tuple(planned(corpus[s.id]) if s.id in corpus else s for s in original.scenarios),
    )
    lost = [LostRecord(device, run.groups.get(device), why) for device, why in run.lost.items()]
    lines: list[Record] = [plan, *stored.devices, *rejudged.records, *lost]
    if run.end is not None:  # a lost device stays lost: rejudging does not make the run whole
        lines.append(EndRecord(run.end.finished, verdict_counts(r.verdict for r in rejudged.records),
                               lost=dict(run.lost)))  # fmt: skip
    return lines


def load_waivers(path: Path | None) -> tuple[Waiver, ...] | None:
    if path is None:
        return None
    return load_waiver_file(path)


def corpus_by_id(root: Path = SCENARIO_ROOT) -> tuple[dict[str, Scenario], dict[str, str]]:
    catalogue = load_catalogue()
    scenarios = load_corpus(root, known_clauses=catalogue.ids())
    return {s.id: s for s in scenarios}, dict(catalogue.quotes())


def rejudge(
    run_dir: Path,
    profile: str | None = None,
    waivers_file: Path | None = None,
    out: Path | None = None,
    scenario_root: Path = SCENARIO_ROOT,
    today: dt.date | None = None,
) -> RejudgeOutcome:
    """Rejudge the run in `run_dir` and write results.jsonl and the reports into `out`."""
    path, run, plan = load_planned_run(run_dir, "rejudge")
    chosen = check_profile(profile or plan.profile or str(OPTION["profile"].default))
    out_dir = out if out is not None else path.parent / f"rejudge-{chosen}"
    if out_dir.resolve() == path.parent.resolve():
        raise UsageError(f"--out {out_dir}: is the run's own directory; rejudge never overwrites the original results")
    held = present(out_dir, (RESULTS_FILE, *REPORT_FILES))
    if held is not None:
        if out is not None:
            raise UsageError(f"--out {out_dir}: already holds {held}; choose a new directory")
        raise UsageError(f"{out_dir}: already holds {held} (an earlier rejudge); rejudge never replaces it: "
                         f"remove that directory, or write elsewhere with --out NEW")
    waivers = load_waivers(waivers_file)
    corpus, catalogue = corpus_by_id(scenario_root)
    applied: WaiversApplied | None = None
    if waivers is not None and waivers_file is not None:
        check_waiver_ids(waivers, catalogue, corpus, waivers_file)
        applied = WaiversApplied(waivers_file, waivers, today or dt.date.today())
    stored = read_records(path)
    rejudged = rejudge_run(run, stored, chosen, corpus, catalogue, waivers, applied.as_of if applied else today)
    if applied is not None:
        fingerprints = {serial: str(info.get("fingerprint", "")) for serial, info in run.devices.items()}
        note = unmatched_devices_note(applied.waivers, fingerprints, applied.path)
        if note is not None:
            rejudged = dataclasses.replace(rejudged, notes=(*rejudged.notes, note))
    lines = rejudged_lines(rejudged, stored, corpus, scenario_root, applied)
    output_dir(out_dir)
    results = out_dir / RESULTS_FILE
    write_records(results, lines)
    paths = {"results": results, **write_reports(results, out_dir)}
    new_run = load_results(results)
    claim = claim_of(new_run)
    return RejudgeOutcome(rejudged, out_dir, paths, int(claim.exit_code), claim)
