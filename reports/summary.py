"""summary.json: the run's answer and counts for dashboards and scripts (schema in docs/reports.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

from reference_model.verdicts import BLOCKING_VERDICTS, Verdict

from .replay import replay_command
from .results import (
    RunResults,
    count_verdicts,
    counts_by_chapter,
    counts_by_device,
    safe_text,
    worst_by_clause,
)

SUMMARY_SCHEMA: Final = 1


def _counts(counts: dict[Verdict, int]) -> dict[str, int]:
    return {str(verdict): n for verdict, n in counts.items()}


def build_summary(run: RunResults) -> dict[str, object]:
    plan = run.plan
    claim = run.claim
    failures = [
        {
            "device": r.device,
            "scenario": r.scenario,
            "verdict": str(r.verdict),
            "clause": r.divergence.clause if r.divergence else None,
            "clauses": list(r.clauses),
            "discrepancy": r.discrepancy,
            "replay": replay_command(run, r),
        }
        for r in run.results
        if r.verdict in BLOCKING_VERDICTS
    ]
    return {
        "schema": SUMMARY_SCHEMA,
        "kind": "npuconf-summary",
        "run_id": run.run_id or None,
        "kit_version": plan.kit_version if plan else None,
        "profile": plan.profile if plan else None,
        "target": plan.target if plan else None,
        "started": plan.started if plan else None,
        "finished": run.end.finished if run.end else None,
        "answer": claim.level.value,
        "exit_code": int(claim.exit_code),
        "claim": claim.to_json(),
        "total": len(run.results),
        "counts": _counts(count_verdicts(run.results)),
        "devices": {serial: _counts(c) for serial, c in counts_by_device(run).items()},
        "chapters": {chapter: _counts(c) for chapter, c in counts_by_chapter(run).items()},
        "clauses": {clause: str(v) for clause, v in worst_by_clause(run).items()},
        "failures": failures,
        "problems": list(run.problems),
    }


def _clean(value: object) -> object:
    """Strings made safe for any UTF-8 reader (lone surrogates and control characters escaped)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_summary(run: RunResults, path: Path) -> None:
    """Write summary.json for `run` to `path`, replacing it atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(build_summary(run)), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
