"""Turning a `npuconf run` request into a plan, targets and reports; opening and closing the targets."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from floor.safe_io import output_dir
from reference_model.errors import KitError
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reports.answers.claim import Claim, claim_of
from reports.recorded.outputs import REPORT_FILES, RESULTS_FILE, present
from reports.recorded.results import RunResults, load_results
from reports.recorded.run_options import npuconf_command
from reports.renderers.run_reports import report_paths, write_run_reports

from ..errors import RunInterrupted, UsageError
from ..suite import (
    SCENARIO_ROOT,
    Catalogue,
    check_scenario_ids,
    check_waiver_ids,
    claim_basis,
    corpus_hash,
    expiry_notes,
    load_catalogue,
    load_corpus,
    load_waiver_file,
    model_hash,
    select,
    unmatched_devices_note,
)
from ..targets import Target, VnpuProfile
from ..targets.kinds import Opening, target_kind
from ..targets.virtual_device import reap_orphan_fleets
from .head_start import HeadStart, VirtualFleet, default_out_dir, missing_ancestors, remove_created
from .ownership import MARKER, claim, forget_if_finished, unclaim
from .plan import RunRequest, build_plan, new_run_id
from .record import duration_estimates, record_run
from .runner import ProgressFn, execute_run
from .target_choice import VIRTUAL_STATE_DIR, check_target_request, resolve_target


def _nothing_left() -> None:
    return None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run's answer, known once results.jsonl is complete; `finish` then writes the reports (named in
    `reports`) and records the run in the store, so the answer can be printed before they are."""

    out_dir: Path
    exit_code: int
    counts: Counter[Verdict]
    claim: Claim
    reports: dict[str, Path]
    finish: Callable[[], None] = field(default=_nothing_left)


def _nothing_chosen(clauses: Sequence[str], catalogue: Catalogue, scenarios: Sequence[Scenario]) -> str:
    """Why a selection is empty: a --clause no scenario can cite (not testable, with the catalogue's reason),
    or one no scenario of the corpus cites, is named; otherwise the filters together matched nothing."""
    cited = {c for s in scenarios for c in s.clauses}
    by_id = {c.id: c for c in catalogue.clauses}
    for clause in clauses:
        if clause in cited:
            continue
        entry = by_id[clause]
        if not entry.testable:
            return (f"--clause {clause}: no scenario cites it: the catalogue marks it not testable "
                    f"({entry.reason or 'no reason given'})")
        return f"--clause {clause}: no scenario of the corpus cites it (`npuconf clauses` shows its coverage)"
    return "no scenario matches -k/--clause/--scenario together; `npuconf clauses` lists clause IDs"


def start_run(request: RunRequest, progress: ProgressFn | None = None, ahead: HeadStart | None = None) -> RunOutcome:
    """Run a request to its answer; with `ahead`, in the directory and on the virtual devices `start_ahead`
    started for it (the caller abandons them if this raises)."""
    options = request.options
    catalogue = load_catalogue()
    scenario_root = request.scenario_root or SCENARIO_ROOT
    scenarios = load_corpus(scenario_root, known_clauses=catalogue.ids())
    unknown = [c for c in options.clauses if c not in catalogue.ids()]
    if unknown:
        raise UsageError(f"--clause {unknown[0]}: not a clause ID of conformance/clauses.yaml (see `npuconf clauses`)")
    check_scenario_ids(options.scenario_ids, scenarios, scenario_root)
    try:
        chosen = select(scenarios, options.keyword, options.clauses, options.scenario_ids)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not chosen:
        raise UsageError(_nothing_chosen(options.clauses, catalogue, scenarios))
    waiver_file = Path(options.waivers) if options.waivers else None
    waivers = load_waiver_file(waiver_file) if waiver_file else ()
    if waiver_file:
        check_waiver_ids(waivers, catalogue.ids(), (s.id for s in scenarios), waiver_file)
    as_of = dt.date.today()
    expired = expiry_notes(waivers, as_of)
    for note in expired:
        print(f"npuconf: {note}", file=sys.stderr)
    run_id = ahead.run_id if ahead is not None else new_run_id()
    out_dir = ahead.out_dir if ahead is not None else request.out or default_out_dir(run_id)
    if present(out_dir, (RESULTS_FILE,)) is not None:
        raise UsageError(f"--out {out_dir}: already holds {RESULTS_FILE}; choose a new directory")
    foreign = present(out_dir, REPORT_FILES)  # reports without results.jsonl are not this kit's run
    if foreign is not None:
        raise UsageError(f"--out {out_dir}: holds {foreign} but no results.jsonl (not a run directory); the run "
                         "would replace it: choose a new or empty directory")
    target_name = ahead.target_name if ahead is not None else resolve_target(request)
    check_target_request(request, target_name)  # before anything is created: a usage error creates nothing
    profile = request.vnpu_profile()
    created = ahead.created if ahead is not None else missing_ancestors(out_dir)
    output_dir(out_dir)
    token = claim(out_dir)
    plan = build_plan(
        run_id,
        out_dir,
        target_name,
        dataclasses.replace(options, waivers_expired=tuple(expired), waivers_as_of=as_of),
        chosen,
        catalogue,
        waivers,
        (corpus_hash(scenario_root), model_hash()),
        claim_basis(
            catalogue, scenarios if request.scenario_root is None else load_corpus(known_clauses=catalogue.ids())
        ),
    )
    estimates = duration_estimates(out_dir, request.store)
    stopping: list[threading.Thread] = []  # virtual devices being stopped while the answer is given
    try:
        fleet = ahead.fleet if ahead is not None else None
        if ahead is not None:
            ahead.taken = True  # open_targets stops its devices from here on
        with open_targets(request, target_name, out_dir, profile, stopping, fleet) as targets:
            execute_run(plan, targets, progress, estimates=estimates, prepare=fleet.prepared if fleet else None)
        run = load_results(out_dir / RESULTS_FILE)
    except KitError:
        _join(stopping)
        if not (out_dir / RESULTS_FILE).exists():  # a refusal (a bad --impl, no build): nothing ran
            _discard(created, out_dir, token)
        raise
    except KeyboardInterrupt:
        _join(stopping)
        raise interrupted(out_dir) from None
    except BaseException:
        _join(stopping)
        raise

    def finish() -> None:
        try:
            report_and_record(run, out_dir, request.store)
            forget_if_finished(out_dir, run)
        except KeyboardInterrupt:
            raise interrupted(out_dir) from None
        finally:
            _join(stopping)

    if waiver_file:
        fingerprints = {serial: str(info.get("fingerprint", "")) for serial, info in run.devices.items()}
        unmatched = unmatched_devices_note(waivers, fingerprints, waiver_file)
        if unmatched is not None:
            print(f"npuconf: note: {unmatched}", file=sys.stderr)
    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    paths = {"results": out_dir / RESULTS_FILE, **report_paths(out_dir)}
    answer = claim_of(run)
    return RunOutcome(out_dir, int(answer.exit_code), counts, answer, paths, finish)


def report_and_record(run: RunResults, out_dir: Path, store: str | None, record: bool = True) -> None:
    """Write the run's reports and, at the same time on another thread, record it in the store (whose
    commits wait on the disk); both are done when this returns."""
    recorder = threading.Thread(target=record_run, args=(out_dir, store), name="record-run") if record else None
    if recorder is not None:
        recorder.start()
    try:
        write_run_reports(run, out_dir)
    finally:
        if recorder is not None:
            recorder.join()


def _join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()


def _discard(created: list[Path], out_dir: Path, token: str) -> None:
    """Remove what a run that stopped before its plan created: its directory (and the parents it made,
    when left empty) or, in a directory that was already there, its marker; and its host registry entry."""
    unclaim(token)
    if not remove_created(created, out_dir):
        with contextlib.suppress(OSError):
            (out_dir / MARKER).unlink()


def interrupted(out_dir: Path) -> RunInterrupted:
    """What Ctrl-C left: the results kept and the exact `--resume` command, or that nothing was written."""
    results = out_dir / RESULTS_FILE
    run = load_results(results) if results.is_file() else None
    if run is None or run.plan is None:
        where = f"{out_dir} holds no results.jsonl" if out_dir.exists() else f"{out_dir} was not created"
        return RunInterrupted(f"interrupted during start-up: nothing was recorded ({where}); run again", 0)
    kept = sum(1 for r in run.results if r.recorded)
    total = len(run.results)
    return RunInterrupted(
        f"interrupted: {kept} of {total} results kept in {results}; "
        f"continue with: {npuconf_command('run', '--resume', str(out_dir.absolute()))}",
        kept,
    )


@contextlib.contextmanager
def open_targets(
    request: RunRequest,
    target_name: str,
    out_dir: Path,
    profile: VnpuProfile,
    stopping: list[threading.Thread] | None = None,
    fleet: VirtualFleet | None = None,
) -> Iterator[list[Target]]:
    """The run's targets; virtual devices (and their adb server) are started here, or were started ahead
    (`fleet`), and are stopped on exit: then and there, or with `stopping`, on a thread appended to it
    (the caller joins it, having given its answer meanwhile).

    First, fleets left running by a killed `npuconf` on this host are stopped.
    """
    check_target_request(request, target_name)
    reap_orphan_fleets()

    def launch() -> VirtualFleet:
        return fleet if fleet is not None else VirtualFleet(request, out_dir / VIRTUAL_STATE_DIR, profile)

    opening = Opening(request.options, out_dir, profile, request.build_dir, request.adb_servers_named, launch, stopping)
    with target_kind(target_name).open(opening) as targets:
        yield targets
