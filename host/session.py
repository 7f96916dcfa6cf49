"""Turning a `npuconf run` request into a plan, targets and reports."""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from reference_model.errors import ScenarioInvalid
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver, parse_waivers
from reports import load_results, write_reports

from .adb_target import AdbServerAddress, AdbTarget, attached_devices, discover_targets
from .build import cross_build_dir, qemu_prefix
from .catalogue import load_catalogue
from .corpus import SCENARIO_ROOT, corpus_hash, load_corpus, select
from .errors import UsageError
from .local import LocalTarget
from .probe import DEFAULT_BUILD_DIR, REPO_ROOT
from .runner import ProgressFn, Resume, RunPlan, execute_run, new_run_id
from .target import Target
from .virtual_device.fleet import FleetSupervisor, start_fleet
from .vnpu_profile import DEFAULT_CAPACITY, VnpuProfile

TARGETS = ("local", "virtual", "adb")
VIRTUAL_STATE_DIR = "virtual-devices"


@dataclass(frozen=True, slots=True)
class RunRequest:
    target: str = "local"  # or "virtual", "adb", "auto" (adb devices if attached, else virtual)
    impl: Path | None = None
    profile: str = "published-37"
    personality: str = "published"
    policy: str = "budget"
    capacity: int | None = None
    waivers: Path | None = None
    keyword: str | None = None
    clauses: tuple[str, ...] = ()
    out: Path | None = None
    timeout_multiplier: float = 1.0
    jobs: int = 1
    build_dir: Path | None = None
    scenarios: Path | None = None
    cross: str | None = None
    devices: int = 1  # virtual
    serials: tuple[str, ...] = ()  # adb
    adb_servers: tuple[str, ...] = ()  # adb, HOST:PORT
    device_names: tuple[str, ...] = ()  # virtual: names to give the devices (resume)
    store: Path | None = None  # results store (default: npuconf.sqlite next to the run directory)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    out_dir: Path
    exit_code: int
    counts: Counter[Verdict]
    answer: str
    reports: dict[str, Path]


def model_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "reference_model").glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def load_waiver_file(path: Path) -> tuple[Waiver, ...]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--waivers {path}: {exc.strerror}; expected a readable YAML waiver file") from None
    except yaml.YAMLError as exc:
        raise ScenarioInvalid(str(path), None, "file", str(exc).splitlines()[0], "valid YAML") from None
    return parse_waivers(data, str(path))


def start_run(request: RunRequest, progress: ProgressFn | None = None) -> RunOutcome:
    catalogue = load_catalogue()
    scenario_root = request.scenarios or SCENARIO_ROOT
    scenarios = load_corpus(scenario_root, known_clauses=catalogue.ids())
    unknown = [c for c in request.clauses if c not in catalogue.ids()]
    if unknown:
        raise UsageError(f"--clause {unknown[0]}: not a clause ID of conformance/clauses.yaml (see `npuconf clauses`)")
    try:
        chosen = select(scenarios, request.keyword, request.clauses)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not chosen:
        raise UsageError("no scenario matches -k/--clause; `npuconf clauses` lists clause IDs")
    waivers = load_waiver_file(request.waivers) if request.waivers else ()
    run_id = new_run_id()
    out_dir = request.out or Path("out") / run_id
    if (out_dir / "results.jsonl").exists():
        raise UsageError(f"--out {out_dir}: already holds results.jsonl; choose a new directory")
    profile = VnpuProfile(
        capacity=request.capacity if request.capacity is not None else DEFAULT_CAPACITY,
        policy=request.policy,
        personality=request.personality,
        declared_capacity=request.capacity,
    )
    target_name = resolve_target(request)
    plan = RunPlan(
        run_id=run_id,
        out_dir=out_dir,
        scenarios=chosen,
        catalogue=dict(catalogue.quotes()),
        profile=request.profile,
        target_name=target_name,
        waivers=waivers,
        jobs=request.jobs,
        timeout_multiplier=request.timeout_multiplier,
        corpus_hash=corpus_hash(scenario_root),
        model_hash=model_hash(),
        options={
            "impl": str(request.impl) if request.impl else None,
            "personality": request.personality,
            "policy": request.policy,
            "keyword": request.keyword,
            "clauses": list(request.clauses),
            "timeout_multiplier": request.timeout_multiplier,
            "jobs": request.jobs,
            "cross": request.cross,
            "scenarios": str(request.scenarios.resolve()) if request.scenarios else None,
            "waivers": str(request.waivers.resolve()) if request.waivers else None,
            "devices": request.devices,
            "serials": list(request.serials),
            "adb_servers": list(request.adb_servers),
            "capacity": request.capacity,
            "profile": request.profile,
        },
    )
    with open_targets(request, target_name, out_dir, profile) as targets:
        exit_code = execute_run(plan, targets, progress)
    reports = write_reports(out_dir / "results.jsonl", out_dir)
    from .reports_cmd import record_run

    record_run(out_dir, request.store)
    run = load_results(out_dir / "results.jsonl")
    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    return RunOutcome(out_dir, exit_code, counts, run.answer, {"results": out_dir / "results.jsonl", **reports})


def resolve_target(request: RunRequest) -> str:
    """The target a request runs on; `auto` is attached adb devices if any on the default server, else virtual."""
    if request.target != "auto":
        return request.target
    if request.impl is not None or request.cross is not None:
        return "local"
    if request.adb_servers or request.serials:
        return "adb"
    return "adb" if attached_devices(AdbServerAddress.default()) else "virtual"


@contextlib.contextmanager
def open_targets(request: RunRequest, target_name: str, out_dir: Path, profile: VnpuProfile) -> Iterator[list[Target]]:
    """The run's targets; virtual devices (and their adb server) are started here and stopped on exit."""
    if target_name == "local":
        if request.serials or request.adb_servers:
            raise UsageError("--serial and --adb-server are for --target adb")
        yield [
            LocalTarget(
                profile=profile,
                work_dir=out_dir,
                impl=request.impl,
                build_dir=request.build_dir or (cross_build_dir(request.cross) if request.cross else DEFAULT_BUILD_DIR),
                timeout_multiplier=request.timeout_multiplier,
                exec_prefix=tuple(qemu_prefix(request.cross)) if request.cross else (),
                serial=f"local-{request.cross}" if request.cross else "local",
            )
        ]
        return
    if request.impl is not None or request.cross is not None:
        raise UsageError(f"--impl and --cross are for --target local, not --target {target_name}")
    if target_name == "virtual":
        if request.serials or request.adb_servers:
            raise UsageError("--serial and --adb-server select real devices: use them with --target adb")
        names = request.device_names or tuple(f"virtual-{i + 1}" for i in range(request.devices))
        supervisor = FleetSupervisor(start_fleet(len(names), out_dir / VIRTUAL_STATE_DIR, names=names))
        try:
            server = AdbServerAddress("127.0.0.1", supervisor.fleet.server.port)
            yield [
                AdbTarget(
                    server,
                    device.adb_serial,
                    serial=device.name,
                    profile=profile,
                    timeout_multiplier=request.timeout_multiplier,
                    host_build=request.build_dir,
                    restart_server=supervisor.restart_server,
                )
                for device in supervisor.fleet.devices
            ]
        finally:
            supervisor.stop()
        return
    if target_name != "adb":
        raise UsageError(f"--target {target_name}: expected one of {', '.join(TARGETS)}")
    servers = [AdbServerAddress.parse(text) for text in request.adb_servers] or [AdbServerAddress.default()]

    def make(server: AdbServerAddress, adb_serial: str, name: str) -> AdbTarget:
        return AdbTarget(
            server,
            adb_serial,
            serial=name,
            profile=profile,
            timeout_multiplier=request.timeout_multiplier,
            host_build=request.build_dir,
        )

    yield list(discover_targets(servers, request.serials, make))


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
    exit_code = int(previous.exit_code)
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
            declared_capacity=request.capacity,
        )
        resume = Resume(
            todo=todo,
            described=frozenset(previous.devices),
            kept=tuple(finished.values()),
        )
        with open_targets(request, plan_record.target, directory, profile) as targets:
            chosen = [t for t in targets if t.serial in todo]
            missing = [device for device in todo if device not in {t.serial for t in chosen}]
            if missing:
                raise UsageError(f"--resume {directory}: planned device {missing[0]} is not available now")
            execute_run(plan, chosen, progress, resume)
        exit_code = int(load_results(results_path).exit_code)
    reports = write_reports(results_path, directory)
    run = load_results(results_path)
    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    return RunOutcome(directory, exit_code, counts, run.answer, {"results": results_path, **reports})


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
