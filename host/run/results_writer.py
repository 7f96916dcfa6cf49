"""Appending records to results.jsonl as they finish (docs/formats.md §6)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from reference_model.scenario import Scenario
from reference_model.vocabulary import VOCABULARY_HASH
from reports.jsonl import dump_line
from reports.safe_io import DISK_ERRNOS, OutputFailed, open_append
from reports.store_identity import host_identity

from .. import KIT_VERSION
from .judging import Outcome
from .plan import RunPlan

RESULTS_SCHEMA = 1


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class ResultsWriter:
    """Thread-safe appender: every record is one line, flushed before the call returns.

    The file is opened without following a symlink. A record that cannot be written (disk full) is
    not retried: the first failure is kept in `failed`, later records are dropped, and the run
    reports it (exit 2) once its threads are done; `--resume` repairs the torn last line.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open_append(path)
        self._lock = threading.Lock()
        self.failed: OutputFailed | None = None

    def write(self, record: dict[str, Any]) -> None:
        data = (dump_line(record) + "\n").encode("utf-8")
        with self._lock:
            if self.failed is not None or self._file.closed:
                return  # a full disk stopped the writer, or a device thread finished after an interrupt
            try:
                self._file.write(data)
                self._file.flush()
            except OSError as exc:
                if exc.errno not in DISK_ERRNOS:
                    raise
                self.failed = OutputFailed(self.path, exc)

    def close(self) -> None:
        with self._lock:
            try:
                self._file.close()
            except OSError as exc:
                if exc.errno not in DISK_ERRNOS:
                    raise
                self.failed = self.failed or OutputFailed(self.path, exc)

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
        "host": host_identity(),
        **({"shard": True} if plan.shard else {}),
        **({"claim_basis": plan.claim_basis} if plan.claim_basis is not None else {}),
    }


def resume_record(plan: RunPlan) -> dict[str, Any]:
    """The first line a `--resume` appends: which host resumed the run, and when (the store's growth rule)."""
    return {"kind": "resume", "run_id": plan.run_id, "host": host_identity(), "started": now_iso()}


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
