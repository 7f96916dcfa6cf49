"""Appending records to results.jsonl as they finish (docs/formats.md §6)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from reference_model.scenario import Scenario
from reference_model.vocabulary import VOCABULARY_HASH

from .. import KIT_VERSION
from .judging import Outcome
from .plan import RunPlan

RESULTS_SCHEMA = 1


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class ResultsWriter:
    """Thread-safe appender: every record is one line, flushed before the call returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if self._file.closed:
                return  # a device thread finishing after an interrupted run closed the file
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def plan_record(plan: RunPlan, serials: Sequence[str]) -> dict[str, Any]:
    return {
        "kind": "plan",
        "schema": RESULTS_SCHEMA,
        "run_id": plan.run_id,
        "started": now_iso(),
        "kit_version": KIT_VERSION,
        "vocabulary": VOCABULARY_HASH,
        "profile": plan.profile,
        "target": plan.target_name,
        "devices": list(serials),
        "scenarios": [
            {"id": s.id, "title": s.title, "chapter": s.chapter, "clauses": list(s.clauses)} for s in plan.scenarios
        ],
        "corpus_hash": plan.corpus_hash,
        "model_hash": plan.model_hash,
        "options": plan.options,
        **({"claim_basis": plan.claim_basis} if plan.claim_basis is not None else {}),
    }


def result_record(
    device: str,
    scenario: Scenario,
    outcome: Outcome,
    lines: Sequence[str] = (),
    slots: dict[str, str] | None = None,
    duration_ms: float = 0.0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "result",
        "device": device,
        "scenario": scenario.id,
        "chapter": scenario.chapter,
        "title": scenario.title,
        "clauses": list(scenario.clauses),
        "verdict": outcome.verdict.value,
        "reason": outcome.reason,
        "divergence": outcome.divergence,
        "discrepancy": outcome.discrepancy,
        "waiver": outcome.waiver,
        "slots": slots or {},
        "trace": list(lines),
        "duration_ms": round(duration_ms, 3),
        "finished": now_iso(),
        **{key: value for key, value in (extra or {}).items() if value},
    }
