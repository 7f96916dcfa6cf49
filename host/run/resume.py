"""`npuconf run --resume DIR`: run what an interrupted run's plan has not run yet, into the same directory."""

from __future__ import annotations

import dataclasses
import os
import stat
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from floor.safe_io import checked_name, console_text, output_dir, repair_torn_tail
from reference_model.verdicts import Verdict
from reports.answers.claim import claim_of
from reports.recorded.outputs import RESULTS_FILE
from reports.recorded.plan_options import PlanOptions, read_plan_options
from reports.recorded.results import load_results
from reports.renderers.run_reports import report_paths

from ..errors import UsageError
from ..options import check_resume_options
from ..suite import SCENARIO_ROOT, load_catalogue, load_corpus, load_waiver_file, waivers_as_of
from ..targets.kinds import target_kind
from .ownership import forget_if_finished, why_untrusted
from .plan import Resume, RunRequest, build_plan, check_target_options
from .record import duration_estimates
from .runner import ProgressFn, execute_run
from .start import RunOutcome, interrupted, open_targets, report_and_record


def resume_run(
    directory: Path,
    progress: ProgressFn | None = None,
    impl: Path | None = None,
    store: str | None = None,
    given: Mapping[str, object] | None = None,
    build_dir: Path | None = None,
    out: Path | None = None,
) -> RunOutcome:
    """`npuconf run --resume DIR`: run the planned pairs with no result, NOT_EXECUTED or a host-caused
    ERROR, append, re-report, and record the grown run in the results store (`store`, default: next to
    DIR). A last line torn by a full disk or a kill is cut first.

    `impl` is `--impl` given again on the command line: required when the plan names a library and
    this host did not create DIR (see ownership.py), and checked against the plan's in every case.
    `given` holds the other `run` options the user gave (options.py): each must agree with the
    plan. `build_dir` (--build-dir, a path of this host the plan does not record) is where the local
    probe build is taken from; `out` (--out) may only name DIR itself.
    A sharded run resumes sharded: every planned device is opened again and each build's devices share
    what the build has left (a scenario is left when no device of its build has a result for it)."""
    results_path = directory / RESULTS_FILE
    if not results_path.is_file():
        raise UsageError(f"--resume {directory}: no results.jsonl there; expected a run directory of `npuconf run`")
    output_dir(directory)
    _check_owner(directory)
    repair_torn_tail(results_path)
    previous = load_results(results_path)
    plan_record = previous.plan
    if plan_record is None:
        raise UsageError(f"--resume {directory}: results.jsonl has no plan record; it cannot be resumed")
    if out is not None and out != directory:
        raise UsageError(
            f"--out {out} conflicts with the resumed run's directory {directory}: a resume writes into DIR; "
            "drop the option or start a new run"
        )
    recorded = read_plan_options(plan_record.options)
    if recorded.malformed:
        problem = console_text(recorded.malformed[0][1])
        raise UsageError(f"--resume {directory}: {problem} ({results_path}); start a new run")
    own = (plan_record.target, plan_record.profile, plan_record.shard)
    check_resume_options(given or {}, recorded, *own, results_path)
    finished = {
        (r.device, r.scenario): r.verdict
        for r in previous.results
        if r.recorded and r.verdict is not Verdict.NOT_EXECUTED and r.origin != "host"
    }
    todo = {
        device: tuple(s.id for s in plan_record.scenarios if (device, s.id) not in finished)
        for device in plan_record.devices
    }
    todo = {device: ids for device, ids in todo.items() if ids}
    sharded = plan_record.shard
    if todo:
        library = _checked_impl(directory, recorded.impl, impl)
        wanted_devices = tuple(plan_record.devices) if sharded else tuple(todo)
        for device in wanted_devices:
            checked_name(device, "planned device")
        request = _request_from_plan(
            plan_record.target,
            dataclasses.replace(recorded, impl=library),
            wanted_devices,
            build_dir,
            own_plan=why_untrusted(directory) is None or "adb_servers" in (given or {}),
        )
        options = request.options
        jobs = options.jobs if options.jobs is not None else 1  # always set from the plan
        try:
            check_target_options(
                float(options.given("timeout_multiplier")), int(options.given("devices")), None, jobs
            )
        except UsageError as error:
            raise UsageError(f"--resume {directory}: the plan in results.jsonl asks {error}") from None
        catalogue = load_catalogue()
        scenario_root = request.scenario_root or SCENARIO_ROOT
        corpus = {s.id: s for s in load_corpus(scenario_root, known_clauses=catalogue.ids())}
        planned = [s.id for s in plan_record.scenarios]
        gone = [i for i in planned if i not in corpus]
        if gone:
            raise UsageError(f"--resume {directory}: planned scenario {gone[0]} is no longer in {scenario_root}")
        # The plan record's own profile and shard, and the day it judged waivers on, stand for its options'.
        plan_options = dataclasses.replace(
            options,
            profile=plan_record.profile,
            shard=sharded,
            waivers_as_of=waivers_as_of(plan_record.options, plan_record.started),
        )
        plan = build_plan(
            plan_record.run_id,
            directory,
            plan_record.target,
            plan_options,
            [corpus[i] for i in planned],
            catalogue,
            load_waiver_file(Path(recorded.waivers)) if recorded.waivers else (),
            (plan_record.corpus_hash, plan_record.model_hash),
        )
        profile = request.vnpu_profile()
        resume = Resume(
            todo=todo,
            described=frozenset(previous.devices),
            kept=tuple(finished.values()),
        )
        estimates = duration_estimates(directory, store)
        try:
            with open_targets(request, plan_record.target, directory, profile) as targets:
                chosen = [t for t in targets if t.serial in wanted_devices]
                missing = [device for device in todo if device not in {t.serial for t in chosen}]
                if missing:
                    raise UsageError(f"--resume {directory}: planned device {missing[0]} is not available now")
                execute_run(plan, chosen, progress, resume, estimates)
        except KeyboardInterrupt:
            raise interrupted(directory) from None
    run = load_results(results_path)

    def finish() -> None:
        try:
            report_and_record(run, directory, store, record=bool(todo))
            forget_if_finished(directory, run)
        except KeyboardInterrupt:
            raise interrupted(directory) from None

    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    paths = {"results": results_path, **report_paths(directory)}
    claim = claim_of(run)
    return RunOutcome(directory, int(claim.exit_code), counts, claim, paths, finish)


def _checked_impl(directory: Path, planned_path: str | None, given: Path | None) -> str | None:
    """The library a resume may load: never one named only by a plan this host did not write."""
    if given is not None:
        resolved = str(given.resolve())
        if planned_path is None:
            raise UsageError(f"--resume {directory}: the run used no --impl; run --resume without --impl")
        if resolved != planned_path:
            raise UsageError(
                f"--resume {directory}: --impl {given} is not the run's library {console_text(planned_path)!r}; "
                "pass the same library"
            )
        return resolved
    why = why_untrusted(directory) if planned_path is not None else None
    if why is not None:
        raise UsageError(
            f"--resume {directory}: this host did not create the run directory ({why}) and its plan names the "
            f"library {console_text(planned_path or '')!r}; pass --impl PATH to confirm the library to load"
        )
    return planned_path


def _check_owner(directory: Path) -> None:
    """A resumed directory is the user's own, and no one else may write in it: the kit appends to it and
    trusts what it holds (its results.jsonl is read again, its reports replaced)."""
    info = os.stat(directory)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        whose = (
            f"belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
            if info.st_uid != os.geteuid()
            else f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
        )
        raise UsageError(
            f"--resume {directory}: the run directory {whose}; a resume writes into it and trusts what it holds: "
            "copy it to a directory of your own and resume the copy"
        )


def _request_from_plan(
    target: str, options: PlanOptions, devices: tuple[str, ...], build_dir: Path | None, own_plan: bool
) -> RunRequest:
    """The request that opens a planned run's targets again, with the plan's options, as its kind
    re-creates them."""
    jobs = options.jobs if options.jobs is not None else 1
    resumed = target_kind(target).resumed(dataclasses.replace(options, jobs=jobs, devices=len(devices)), devices)
    return RunRequest(
        target=target,
        options=resumed.options,
        build_dir=build_dir,
        adb_servers_named=own_plan,  # a foreign plan's servers on this host are used only while this user's
        device_names=resumed.device_names,
    )
