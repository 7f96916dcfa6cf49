"""Run directories for the store, rejudge, merge, dashboard and bundle tests, built without a device.

Traces are written in the probe's format (docs/formats.md §5) for real corpus scenarios, so the
current model judges them; result records are made by the runner's own `result_record`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from host.run import GRID, caps_from_info, judge_lines, not_run, result_record
from host.suite import claim_basis, load_catalogue, load_corpus
from reference_model.verdicts import Verdict
from reference_model.vocabulary import VOCABULARY_HASH
from reports.store.identity import host_identity

D2_SCENARIO = "requests.default_device_is_rejected_with_einval"
PASS_SCENARIO = "requests.create_then_free"
NA_SCENARIO = "preemption.unmapped_buffer_gets_onpreempt"  # requires vnpu-control


def _corpus():
    catalogue = load_catalogue()
    return {s.id: s for s in load_corpus(known_clauses=catalogue.ids())}, dict(catalogue.quotes())


CORPUS, CATALOGUE = _corpus()
CLAIM_BASIS = claim_basis(load_catalogue(), CORPUS.values())


def discovery_trace(pairs: list[list[int]], control: bool = False) -> list[str]:
    """The discovery events `verify` derives a device's pairs and vnpu control from."""
    results = [[d, t] in pairs for d, t in GRID]
    return [
        json.dumps({"ev": "ret", "step": 80, "op": "is_supported", "ret": 0, "errno": None, "results": results}),
        json.dumps({"ev": "ret", "step": 81, "op": "vnpu", "ret": 0 if control else -1, "errno": None}),
    ]


def _line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def default_device_trace(error: str = "ENOSYS") -> list[str]:
    """`requests.default_device_is_rejected_with_einval` on a device answering onAlloc with `error`.

    ENOSYS is what AOSP does today (discrepancy D2): published-37 FAILs it, aosp-2026 accepts it.
    """
    sid = D2_SCENARIO
    t = iter(range(1000, 100_000, 1000))
    events: list[dict[str, Any]] = [{"ev": "begin", "scenario": sid, "pid": 4242, "t": next(t)}]

    def step(number: int, op: str, args: dict[str, Any], **ret: Any) -> None:
        events.append({"ev": "call", "step": number, "op": op, "args": args, "t": next(t)})
        events.append({"ev": "ret", "step": number, "op": op, "ret": None, "errno": None, "dur_ns": 500, **ret})
        events[-1]["t"] = next(t)

    step(0, "req_create", {"req": "r0"})
    step(1, "req_set_type", {"req": "r0", "type": 1})
    step(2, "req_set_size", {"req": "r0", "size": 4096})
    step(3, "req_set_onalloc", {"req": "r0", "set": True})
    step(4, "alloc", {"reqs": ["r0"]})
    events.append(
        {"ev": "call", "step": 5, "op": "await_alloc", "args": {"count": 1, "timeout_ms": 2000}, "t": next(t)}
    )
    events.append(
        {"ev": "cb", "kind": "alloc", "cookie": None, "error": error, "buf": None, "thread": "other", "t": next(t)}
    )
    events.append(
        {
            "ev": "ret",
            "step": 5,
            "op": "await_alloc",
            "ret": 0,
            "errno": None,
            "dur_ns": 9000,
            "reached": True,
            "got": 1,
            "t": next(t),
        }
    )
    events.append({"ev": "settle", "what": "alloc", "expected": 1, "got": 1, "reached": True, "t": next(t)})
    events.append({"ev": "settle", "what": "load", "expected": 0, "got": 0, "reached": True, "t": next(t)})
    events.append({"ev": "call", "step": 6, "op": "req_free", "args": {"req": "r0"}, "teardown": True, "t": next(t)})
    events.append({"ev": "ret", "step": 6, "op": "req_free", "ret": None, "errno": None, "dur_ns": 300, "t": next(t)})
    events.append({"ev": "settle", "what": "deleters", "expected": 0, "got": 0, "reached": True, "t": next(t)})
    events.append({"ev": "end", "scenario": sid, "t": next(t)})
    events.append({"ev": "exit", "scenario": sid, "status": "ok", "code": 0, "signal": None, "t": next(t)})
    return [_line(e) for e in events]


def create_then_free_trace() -> list[str]:
    sid = PASS_SCENARIO
    events: list[dict[str, Any]] = [
        {"ev": "begin", "scenario": sid, "pid": 4243, "t": 1},
        {"ev": "call", "step": 0, "op": "req_create", "args": {"req": "r0"}, "t": 2},
        {"ev": "ret", "step": 0, "op": "req_create", "ret": None, "errno": None, "dur_ns": 500, "t": 3},
        {"ev": "call", "step": 1, "op": "req_free", "args": {"req": "r0"}, "t": 4},
        {"ev": "ret", "step": 1, "op": "req_free", "ret": None, "errno": None, "dur_ns": 200, "t": 5},
        {"ev": "settle", "what": "alloc", "expected": 0, "got": 0, "reached": True, "t": 6},
        {"ev": "settle", "what": "load", "expected": 0, "got": 0, "reached": True, "t": 7},
        {"ev": "settle", "what": "deleters", "expected": 0, "got": 0, "reached": True, "t": 8},
        {"ev": "end", "scenario": sid, "t": 9},
        {"ev": "exit", "scenario": sid, "status": "ok", "code": 0, "signal": None, "t": 10},
    ]
    return [_line(e) for e in events]


def device_info(serial: str, fingerprint: str | None = None, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "serial": serial,
        "fingerprint": fingerprint or f"acme/npu/{serial}:37/BUILD1/1:user/release-keys",
        "sdk": 37,
        "abis": ["arm64-v8a"],
        "npu_feature": True,
        "model": "Acme NPU phone",
        "manufacturer": "acme",
        "supported_pairs": [[0, 1]],
        "vnpu_control": False,
        "probe_version": "test",
        "kit_version": "0.1.0",
        "discovery_failed": None,
    }
    info.update(extra)
    info["discovery_trace"] = discovery_trace(info["supported_pairs"] or [], info["vnpu_control"])
    return info


def judged_record(
    serial: str, info: dict[str, Any], scenario_id: str, trace: list[str], profile: str, finished: str
) -> dict[str, Any]:
    """The result record `npuconf run` writes for this trace (judged by the current model)."""
    scenario = CORPUS[scenario_id]
    outcome = judge_lines(scenario, trace, caps_from_info(info), CATALOGUE, profile, (), info["fingerprint"])
    record = result_record(serial, scenario, outcome, lines=trace, slots={"r": "r0"}, duration_ms=1.5)
    return dataclasses.replace(record, finished=finished).to_json()


def not_applicable_record(serial: str, scenario_id: str, finished: str) -> dict[str, Any]:
    outcome = not_run(Verdict.NOT_APPLICABLE, "the implementation has no vnpu control entry point")
    record = result_record(serial, CORPUS[scenario_id], outcome)
    return dataclasses.replace(record, finished=finished).to_json()


def plan(
    run_id: str, started: str, devices: list[str], scenario_ids: list[str], profile: str = "published-37", **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "kind": "plan",
        "schema": 1,
        "run_id": run_id,
        "started": started,
        "kit_version": "0.1.0",
        "vocabulary": VOCABULARY_HASH,
        "profile": profile,
        "target": "adb",
        "devices": devices,
        "scenarios": [
            {"id": s, "title": CORPUS[s].title, "chapter": CORPUS[s].chapter, "clauses": list(CORPUS[s].clauses)}
            for s in scenario_ids
        ],
        "corpus_hash": "c0ffee00c0ffee00",
        "model_hash": "deadbeefdeadbeef",
        "options": {},
        "host": host_identity(),
        "claim_basis": CLAIM_BASIS,
    }
    record.update(extra)
    return record


def resume_line(run_id: str, host: str | None = None) -> dict[str, Any]:
    """The record `npuconf run --resume` appends first (host/run/results_writer.py), by this host by default."""
    return {"kind": "resume", "run_id": run_id, "host": host or host_identity(), "started": "2026-03-01T10:30:00Z"}


def write(directory: Path, records: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return directory


def d2_run(
    directory: Path,
    run_id: str = "20260301-120000-d2d2",
    serial: str = "phone-1",
    started: str = "2026-03-01T12:00:00Z",
    profile: str = "published-37",
    end: bool = True,
) -> Path:
    """A run on one phone: the D2 trace, a passing trace and a NOT_APPLICABLE scenario."""
    info = device_info(serial)
    scenarios = [D2_SCENARIO, PASS_SCENARIO, NA_SCENARIO]
    records = [
        plan(run_id, started, [serial], scenarios, profile),
        {"kind": "device", "device": serial, "info": info},
        judged_record(serial, info, D2_SCENARIO, default_device_trace("ENOSYS"), profile, started[:-1] + ".100Z"),
        judged_record(serial, info, PASS_SCENARIO, create_then_free_trace(), profile, started[:-1] + ".200Z"),
        not_applicable_record(serial, NA_SCENARIO, started[:-1] + ".300Z"),
    ]
    if end:
        counts: dict[str, int] = {}
        for r in records[2:]:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        exit_code = 1 if "FAIL" in counts or "CRASH" in counts else 0
        records.append({"kind": "end", "finished": started[:-1] + ".900Z", "counts": counts, "exit_code": exit_code})
    return write(directory, records)


def verdict_record(serial: str, scenario_id: str, verdict: str, finished: str, **fields: Any) -> dict[str, Any]:
    """A result record with a given verdict (no trace): for store and dashboard tests. A PASS or WARN
    demonstrates the clauses its scenario cites unless ``demonstrated`` says otherwise."""
    scenario = CORPUS.get(scenario_id)
    record: dict[str, Any] = {
        "kind": "result",
        "device": serial,
        "scenario": scenario_id,
        "chapter": scenario.chapter if scenario else scenario_id.split(".", 1)[0],
        "title": scenario.title if scenario else scenario_id,
        "clauses": list(scenario.clauses) if scenario else [f"{scenario_id}-clause"],
        "verdict": verdict,
        "reason": "",
        "divergence": None,
        "discrepancy": None,
        "waiver": None,
        "slots": {},
        "trace": [],
        "duration_ms": 1.0,
        "finished": finished,
    }
    if verdict in ("PASS", "WARN"):
        record["demonstrated"] = sorted(record["clauses"])
    record.update(fields)
    return record


def simple_run(
    directory: Path,
    run_id: str,
    started: str,
    devices: dict[str, str],
    verdicts: dict[tuple[str, str], str],
    plan_extra: dict[str, Any] | None = None,
) -> Path:
    """A run with one record per (device, scenario) → verdict; `devices` maps serial → fingerprint."""
    scenario_ids = list(dict.fromkeys(s for _, s in verdicts))
    records: list[dict[str, Any]] = [plan(run_id, started, list(devices), scenario_ids, **(plan_extra or {}))]
    records += [{"kind": "device", "device": s, "info": device_info(s, f)} for s, f in devices.items()]
    records += [verdict_record(d, s, v, started) for (d, s), v in verdicts.items()]
    records.append({"kind": "end", "finished": started, "counts": {}, "exit_code": None})
    return write(directory, records)
