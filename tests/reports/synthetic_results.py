"""Synthetic results.jsonl files (docs/formats.md §6) for the report tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.recorded.kit import ClaimBasis, KitFacts
from reports.recorded.results import RunResults, load_results


def trace_lines(scenario: str, *, alloc_latencies_ns: tuple[int, ...] = (), status: str = "ok") -> list[str]:
    """A short, well-formed trace: begin, one alloc call per latency followed by its callback, end, exit."""
    events: list[dict[str, Any]] = [{"ev": "begin", "scenario": scenario, "pid": 4242, "t": 1000}]
    t = 2000
    events.append({"ev": "call", "step": 0, "op": "req_create", "args": {"req": "r0"}, "t": t})
    events.append({"ev": "ret", "step": 0, "op": "req_create", "ret": None, "errno": None, "dur_ns": 800, "t": t + 800})
    for step, latency in enumerate(alloc_latencies_ns, start=1):
        t += 10_000
        events.append({"ev": "call", "step": step, "op": "alloc", "args": {"reqs": ["r0"]}, "t": t})
        events.append(
            {"ev": "ret", "step": step, "op": "alloc", "ret": None, "errno": None, "dur_ns": 500, "t": t + 500}
        )
        events.append(
            {
                "ev": "cb",
                "kind": "alloc",
                "cookie": "c0",
                "error": 0,
                "buf": f"B{step}",
                "thread": "other",
                "t": t + latency,
            }
        )
        t += latency
    if status == "ok":
        events.append({"ev": "end", "scenario": scenario, "t": t + 100})
        events.append({"ev": "exit", "scenario": scenario, "status": "ok", "code": 0, "signal": None, "t": t + 200})
    else:
        events.append(
            {"ev": "exit", "scenario": scenario, "status": status, "code": None, "signal": "SIGSEGV", "t": t + 200}
        )
    return [json.dumps(e, separators=(",", ":")) for e in events]


class ResultsBuilder:
    """Writes plan, device, result and end records; `raw` adds any line as is (to corrupt files)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.lines: list[str] = []
        self.planned: dict[str, dict[str, Any]] = {}

    def plan(self, devices: list[str], scenarios: list[dict[str, Any]], **overrides: Any) -> ResultsBuilder:
        record: dict[str, Any] = {
            "kind": "plan",
            "schema": 1,
            "run_id": "run-20260101-000000",
            "started": "2026-01-01T00:00:00Z",
            "kit_version": "0.1.0",
            "vocabulary": "0123456789abcdef",
            "profile": "published-37",
            "target": "virtual",
            "devices": devices,
            "scenarios": scenarios,
            "corpus_hash": "c0ffee00c0ffee00",
            "model_hash": "deadbeefdeadbeef",
            "options": {"jobs": 2},
            # Every clause the plan cites is device-testable; the corpus is the released one.
            "claim_basis": {
                "kit_corpus_hash": "c0ffee00c0ffee00",
                "device_testable": sorted(
                    {c for s in scenarios if isinstance(s, dict) for c in s.get("clauses", [])}
                    | {f"{s['id'].split('.', 1)[0]}-clause" for s in scenarios if isinstance(s, dict) and "id" in s}
                ),
                "without_buffers": [],
            },
        }
        record.update(overrides)
        self.planned.update({s["id"]: s for s in scenarios if isinstance(s, dict) and "id" in s})
        return self.record(record)

    def device(self, serial: str, **info: Any) -> ResultsBuilder:
        full: dict[str, Any] = {
            "serial": serial,
            "fingerprint": f"npuconf/vnpu/{serial}:37/TEST/1:userdebug/test-keys",
            "sdk": 37,
            "abis": ["x86_64"],
            "npu_feature": True,
            "model": "vnpu",
            "manufacturer": "npuconf",
            "supported_pairs": [[0, 1]],
            "vnpu_control": True,
            "probe_version": "0.1.0",
            "kit_version": "0.1.0",
        }
        full.update(info)
        return self.record({"kind": "device", "device": serial, "info": full})

    def result(self, device: str, scenario: str, verdict: str, **fields: Any) -> ResultsBuilder:
        """A result record; a PASS or WARN demonstrates the clauses its scenario cites unless ``demonstrated``
        says otherwise (as the model records what a trace showed)."""
        chapter = scenario.split(".", 1)[0]
        cited = self.planned.get(scenario, {}).get("clauses", [f"{chapter}-clause"])
        record: dict[str, Any] = {
            "kind": "result",
            "device": device,
            "scenario": scenario,
            "chapter": chapter,
            "title": f"title of {scenario}",
            "clauses": cited,
            "verdict": verdict,
            "reason": "",
            "divergence": None,
            "discrepancy": None,
            "waiver": None,
            "slots": {"r": "r0"},
            "trace": trace_lines(scenario),
            "exit": {"status": "ok", "code": 0, "signal": None},
            "duration_ms": 12.5,
            "finished": "2026-01-01T00:00:01Z",
        }
        if verdict in ("PASS", "WARN"):
            record["demonstrated"] = sorted(cited)
        record.update(fields)
        return self.record(record)

    def end(self, counts: dict[str, int] | None = None, exit_code: int = 0) -> ResultsBuilder:
        return self.record(
            {"kind": "end", "finished": "2026-01-01T00:10:00Z", "counts": counts or {}, "exit_code": exit_code}
        )

    def record(self, obj: dict[str, Any]) -> ResultsBuilder:
        self.lines.append(json.dumps(obj))
        return self

    def raw(self, line: str) -> ResultsBuilder:
        self.lines.append(line)
        return self

    def write(self, name: str = "results.jsonl") -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / name
        path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path


def scenario(sid: str, clauses: list[str] | None = None) -> dict[str, Any]:
    chapter = sid.split(".", 1)[0]
    return {"id": sid, "title": f"title of {sid}", "chapter": chapter, "clauses": clauses or [f"{chapter}-clause"]}


DIVERGENCE = {
    "step": 4,
    "event": 9,
    "observed": {"cb": "alloc", "error": "ENOMEM"},
    "allowed": [{"cb": "alloc", "error": 0}],
    "clause": "alloc-supported-succeeds",
    "quote": "An allocation for a supported pair succeeds unless memory is exhausted.",
    "message": "onAlloc reported ENOMEM for a supported pair with capacity left",
}


def populate_mixed(builder: ResultsBuilder) -> ResultsBuilder:
    """Two devices, every verdict at least once, one planned pair left without a result."""
    scenarios = [
        scenario("alloc.basic", ["alloc-callback-once", "alloc-supported-succeeds"]),
        scenario("alloc.enomem", ["alloc-supported-succeeds"]),
        scenario("cookie.replace", ["cookie-replace-deletes-previous"]),
        scenario("map.prot", ["map-prot-subset"]),
        scenario("preempt.mapped", ["preempt-never-mapped"]),
        scenario("load.async", ["load-callback"]),
        scenario("free.twice", ["free-twice-crashes"]),
    ]
    b = builder.plan(["emulator-5554", "vnpu-1"], scenarios)
    b.device("emulator-5554")
    b.device("vnpu-1", personality="aosp-2026", policy="budget", capacity=1 << 24)
    for dev in ("emulator-5554", "vnpu-1"):
        b.result(dev, "alloc.basic", "PASS", trace=trace_lines("alloc.basic", alloc_latencies_ns=(3_000, 45_000)))
    b.result(
        "emulator-5554",
        "alloc.enomem",
        "FAIL",
        divergence=DIVERGENCE,
        discrepancy="D4",
        reason="event outside the model",
        trace=trace_lines("alloc.enomem", alloc_latencies_ns=(1_200_000,)),
    )
    b.result(
        "vnpu-1",
        "alloc.enomem",
        "WAIVED",
        divergence=DIVERGENCE,
        waiver={"reason": "known AOSP bug b/123", "clause": "alloc-supported-succeeds"},
    )
    b.result(
        "emulator-5554",
        "cookie.replace",
        "CRASH",
        reason="probe died with SIGSEGV",
        exit={"status": "signal", "code": None, "signal": "SIGSEGV"},
        trace=trace_lines("cookie.replace", status="signal"),
    )
    b.result("vnpu-1", "cookie.replace", "PASS")
    b.result("emulator-5554", "map.prot", "TIMEOUT", reason="no exit within 5000 ms", exit={"status": "timeout"})
    b.result(
        "vnpu-1", "map.prot", "ERROR", reason="trace line 3: ret without its call", trace=["x" * 10 for _ in range(60)]
    )
    b.result("emulator-5554", "preempt.mapped", "NOT_APPLICABLE", reason="requires vnpu-control", trace=[], exit=None)
    b.result("vnpu-1", "preempt.mapped", "PASS")
    b.result("emulator-5554", "load.async", "PASS")
    b.result("vnpu-1", "load.async", "PASS")
    b.result("emulator-5554", "free.twice", "PASS")
    # vnpu-1 / free.twice: planned, never recorded -> NOT_EXECUTED
    return b


def synthetic_kit(path: Path) -> KitFacts:
    """The kit a synthetic run is judged against: its own plan's scenarios and claim basis. These runs
    cite made-up clauses, so the test stands in for the kit (reports/recorded/kit.py) with the plan it wrote."""
    plan: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("kind") == "plan":
            plan = obj
            break
    scenarios = plan.get("scenarios") if isinstance(plan.get("scenarios"), list) else []
    basis = plan.get("claim_basis") if isinstance(plan.get("claim_basis"), dict) else {}
    cited = {s["id"]: tuple(s.get("clauses", ())) for s in scenarios if isinstance(s, dict) and "id" in s}
    return KitFacts(
        cited,
        ClaimBasis(
            corpus_hash=str(basis.get("kit_corpus_hash", "")),
            device_testable=frozenset(basis.get("device_testable", ())),
            without_buffers=frozenset(basis.get("without_buffers", ())),
            pointer_64_only=frozenset(basis.get("pointer_64_only", ())),
        ),
    )


def load(path: Path) -> RunResults:
    """load_results against the synthetic run's own kit (synthetic_kit)."""
    results = path / "results.jsonl" if path.is_dir() else path
    return load_results(path, kit=synthetic_kit(results) if results.is_file() else None)
