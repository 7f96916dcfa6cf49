"""Turning a `npuconf run` request into a plan, targets and reports."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from reference_model.errors import ScenarioInvalid
from reference_model.verdicts import Verdict
from reference_model.waivers import Waiver, parse_waivers
from reports import load_results, write_reports

from .build import cross_build_dir, qemu_prefix
from .catalogue import load_catalogue
from .corpus import SCENARIO_ROOT, corpus_hash, load_corpus, select
from .errors import UsageError
from .local import LocalTarget
from .probe import DEFAULT_BUILD_DIR, REPO_ROOT
from .runner import ProgressFn, RunPlan, execute_run, new_run_id
from .vnpu_profile import DEFAULT_CAPACITY, VnpuProfile


@dataclass(frozen=True, slots=True)
class RunRequest:
    target: str = "local"
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
    )
    target = LocalTarget(
        profile=profile,
        work_dir=out_dir,
        impl=request.impl,
        build_dir=request.build_dir or (cross_build_dir(request.cross) if request.cross else DEFAULT_BUILD_DIR),
        timeout_multiplier=request.timeout_multiplier,
        exec_prefix=tuple(qemu_prefix(request.cross)) if request.cross else (),
        serial=f"local-{request.cross}" if request.cross else "local",
    )
    plan = RunPlan(
        run_id=run_id,
        out_dir=out_dir,
        scenarios=chosen,
        catalogue=dict(catalogue.quotes()),
        profile=request.profile,
        target_name=request.target,
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
        },
    )
    exit_code = execute_run(plan, [target], progress)
    reports = write_reports(out_dir / "results.jsonl", out_dir)
    run = load_results(out_dir / "results.jsonl")
    counts: Counter[Verdict] = Counter(r.verdict for r in run.results)
    return RunOutcome(out_dir, exit_code, counts, run.answer, {"results": out_dir / "results.jsonl", **reports})
