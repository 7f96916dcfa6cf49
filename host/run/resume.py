"""`npuconf run --resume DIR`: run what an interrupted run's plan has not run yet, into the same directory."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from reference_model.verdicts import Verdict
from reports import load_results, write_reports

from ..errors import UsageError
from ..suite import SCENARIO_ROOT, load_catalogue, load_corpus, load_waiver_file
from ..targets import DEFAULT_CAPACITY, VnpuProfile
from .plan import Resume, RunPlan, RunRequest
from .runner import ProgressFn, execute_run
from .session import RunOutcome, interrupted, open_targets


def resume_run(directory: Path, progress: ProgressFn | None = None) -> RunOutcome:
    """`npuconf run --resume DIR`: run the planned pairs with no result or NOT_EXECUTED, append, re-report."""
    results_path = directory / "results.jsonl"
    if not results_path.is_file():
        raise UsageError(f"--resume {directory}: no results.jsonl there; expected a run directory of `npuconf run`")
    previous = load_results(results_path)
    plan_record = previous.plan
    if plan_record is None:
        raise UsageError(f"--resume {directory}: results.jsonl has no plan record; it cannot be resumed")
    finished = {
        (r.device, r.scenario): r.verdict
        for r in previous.results
        if r.recorded and r.verdict is not Verdict.NOT_EXECUTED
    }
    todo = {
        device: tuple(s.id for s in plan_record.scenarios if (device, s.id) not in finished)
        for device in plan_record.devices
    }
    todo = {device: ids for device, ids in todo.items() if ids}
    if todo:
        options = dict(plan_record.options)
        request = _request_from_plan(plan_record.target, options, tuple(todo))
        catalogue = load_catalogue()
        scenario_root = request.scenarios or SCENARIO_ROOT
        corpus = {s.id: s for s in load_corpus(scenario_root, known_clauses=catalogue.ids())}
        planned = [s.id for s in plan_record.scenarios]
        gone = [i for i in planned if i not in corpus]
        if gone:
            raise UsageError(f"--resume {directory}: planned scenario {gone[0]} is no longer in {scenario_root}")
        plan = RunPlan(
            run_id=plan_record.run_id,
            out_dir=directory,
            scenarios=tuple(corpus[i] for i in planned),
            catalogue=dict(catalogue.quotes()),
            profile=plan_record.profile,
            target_name=plan_record.target,
            waivers=load_waiver_file(Path(str(options["waivers"]))) if options.get("waivers") else (),
            jobs=request.jobs,
            timeout_multiplier=request.timeout_multiplier,
            corpus_hash=plan_record.corpus_hash,
            model_hash=plan_record.model_hash,
            options=options,
        )
        profile = VnpuProfile(
            capacity=request.capacity if request.capacity is not None else DEFAULT_CAPACITY,
            policy=request.policy,
            personality=request.personality,
        )
        resume = Resume(
            todo=todo,
            described=frozenset(previous.devices),
            kept=tuple(finished.values()),
        )
        try:
            with open_targets(request, plan_record.target, directory, profile) as targets:
                chosen = [t for t in targets if t.serial in todo]
                missing = [device for device in todo if device not in {t.serial for t in chosen}]
                if missing:
                    raise UsageError(f"--resume {directory}: planned device {missing[0]} is not available now")
                execute_run(plan, chosen, progress, resume)
        except KeyboardInterrupt:
            raise interrupted(directory) from None
    reports = write_reports(results_path, directory)
    run = load_results(results_path)
    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    return RunOutcome(directory, int(run.claim.exit_code), counts, run.claim, {"results": results_path, **reports})


def _request_from_plan(target: str, options: dict[str, object], devices: tuple[str, ...]) -> RunRequest:
    def text(key: str) -> str | None:
        value = options.get(key)
        return value if isinstance(value, str) and value else None

    def number(key: str, default: float) -> float:
        value = options.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

    def strings(key: str) -> tuple[str, ...]:
        value = options.get(key)
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    impl, scenarios, capacity = text("impl"), text("scenarios"), options.get("capacity")
    return RunRequest(
        target=target,
        impl=Path(impl) if impl else None,
        personality=text("personality") or "published",
        policy=text("policy") or "budget",
        capacity=capacity if isinstance(capacity, int) else None,
        timeout_multiplier=number("timeout_multiplier", 1.0),
        jobs=int(number("jobs", 1)),
        scenarios=Path(scenarios) if scenarios else None,
        cross=text("cross"),
        # adb: only the devices left to run; virtual: the same names as before
        serials=tuple(d.split("@", 1)[0] for d in devices) if target == "adb" else (),
        adb_servers=strings("adb_servers") if target == "adb" else (),
        device_names=devices if target == "virtual" else (),
        devices=len(devices),
    )
