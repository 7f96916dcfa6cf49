"""The records a run appends to results.jsonl, built from the run's own values (docs/formats.md §6).

The record types, the writer and the reader are reports/recorded/records.py; this module only fills them in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from reference_model.scenario import Scenario
from reference_model.vocabulary import VOCABULARY_HASH
from reports.recorded.records import RESULTS_SCHEMA, Plan, PlannedScenario, ResultRecord, ResumeRecord
from reports.recorded.records import ResultsWriter as ResultsWriter
from reports.store.identity import host_identity

from .. import KIT_VERSION
from .judging import Outcome
from .plan import RunPlan


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def planned(scenario: Scenario) -> PlannedScenario:
    """A scenario as the plan lists it."""
    return PlannedScenario(scenario.id, scenario.title, scenario.chapter, tuple(scenario.clauses))


def plan_record(plan: RunPlan, serials: Sequence[str]) -> Plan:
    return Plan(
        schema=RESULTS_SCHEMA,
        run_id=plan.run_id,
        started=now_iso(),
        kit_version=KIT_VERSION,
        vocabulary=VOCABULARY_HASH,
        profile=plan.profile,
        target=plan.target_name,
        devices=tuple(serials),
        scenarios=tuple(planned(s) for s in plan.scenarios),
        corpus_hash=plan.corpus_hash,
        model_hash=plan.model_hash,
        options=plan.options.to_json(),
        host=host_identity(),
        shard=plan.shard,
        claim_basis=plan.claim_basis,
    )


def resume_record(plan: RunPlan) -> ResumeRecord:
    """The first line a `--resume` appends: which host resumed the run, and when (the store's growth rule)."""
    return ResumeRecord(plan.run_id, host_identity(), now_iso())


def result_record(
    device: str,
    scenario: Scenario,
    outcome: Outcome,
    lines: Sequence[str] = (),
    slots: dict[str, str] | None = None,
    duration_ms: float = 0.0,
    *,
    attempts: int = 1,
    allocations_refused: bool = False,
    logcat: Sequence[str] = (),
    origin: str | None = None,
) -> ResultRecord:
    return ResultRecord(
        device=device,
        scenario=scenario.id,
        chapter=scenario.chapter,
        title=scenario.title,
        clauses=tuple(scenario.clauses),
        verdict=outcome.verdict,
        reason=outcome.reason,
        divergence=outcome.divergence,
        discrepancy=outcome.discrepancy,
        waiver=outcome.waiver,
        slots=slots or {},
        trace=tuple(lines),
        exit=None,
        duration_ms=round(duration_ms, 3),
        finished=now_iso(),
        line=None,
        origin=origin,
        allocations_refused=allocations_refused,
        attempts=attempts,
        logcat=tuple(logcat),
        demonstrated=outcome.demonstrated,
    )
