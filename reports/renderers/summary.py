"""summary.json: the run's answer and counts for dashboards and scripts (schema in docs/reports.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from floor.jsonl import clean_json
from floor.safe_io import atomic_output
from reference_model.verdicts import Verdict

from ..answers.claim import claim_of, problems_of
from ..answers.clause_answers import clause_answers
from ..answers.findings import coverage_gaps, finding_summary, findings, gap_summary
from ..recorded.results import (
    RunResults,
    count_verdicts,
    counts_by_chapter,
    counts_by_device,
)

SUMMARY_SCHEMA: Final = 2  # 2: "not_exercised" became "not_demonstrated" (with a why per clause)


def _counts(counts: dict[Verdict, int]) -> dict[str, int]:
    return {str(verdict): n for verdict, n in counts.items()}


def build_summary(run: RunResults) -> dict[str, object]:
    plan = run.plan
    claim = claim_of(run)
    # The report's failures, in its order (CRASH, FAIL, TIMEOUT, ERROR, WARN), with the same content.
    failures = [finding_summary(f) for f in findings(run)]
    return {
        "schema": SUMMARY_SCHEMA,
        "kind": "npuconf-summary",
        "run_id": run.run_id or None,
        "kit_version": plan.kit_version if plan else None,
        "profile": plan.profile if plan else None,
        "target": plan.target if plan else None,
        "started": plan.started if plan else None,
        "corpus_hash": plan.corpus_hash if plan else None,
        "model_hash": plan.model_hash if plan else None,
        "finished": run.end.finished if run.end else None,
        "answer": claim.level.value,
        "exit_code": int(claim.exit_code),
        "claim": claim.to_json(),
        "total": len(run.results),
        "counts": _counts(count_verdicts(run.results)),
        "devices": {serial: _counts(c) for serial, c in counts_by_device(run).items()},
        **({"groups": _groups(run)} if plan is not None and plan.shard else {}),
        "chapters": {chapter: _counts(c) for chapter, c in counts_by_chapter(run).items()},
        "clauses": clause_answers(run).to_json(),
        "failures": failures,
        "not_demonstrated": gap_summary(coverage_gaps(run)),
        "problems": list(problems_of(run)),
    }


def _groups(run: RunResults) -> dict[str, list[str]]:
    """A sharded run's builds: group (build fingerprint) -> its devices, as the claim counts them."""
    members: dict[str, list[str]] = {}
    for serial in run.device_serials:
        members.setdefault(run.groups.get(serial, f"device:{serial}"), []).append(serial)
    return members


def summary_chunks(run: RunResults) -> Iterator[bytes]:
    """summary.json for `run` in UTF-8 pieces of about 64 KiB (`json.dumps(..., indent=2)` and a newline):
    the indented encoder's output is never held as one string nor as its million small parts."""
    pending: list[str] = []
    size = 0
    for part in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(clean_json(build_summary(run))):
        pending.append(part)
        size += len(part)
        if size >= 1 << 16:
            yield "".join(pending).encode("utf-8", errors="replace")
            pending, size = [], 0
    pending.append("\n")
    yield "".join(pending).encode("utf-8", errors="replace")


def write_summary(run: RunResults, path: Path) -> None:
    """Write summary.json for `run` to `path`, replacing it atomically."""
    with atomic_output(path) as handle:
        for piece in summary_chunks(run):
            handle.write(piece)
