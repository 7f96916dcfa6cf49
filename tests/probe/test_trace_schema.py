"""The C probe against the trace schema of ndk_probe/vocabulary.yaml: what the real probe writes over a slice
of the corpus is checked line by line, independently of the host's reader (every kind in the schema,
every field declared with its type, every required field present), and every kind the schema declares is
seen unless the vocabulary lists it as never emitted, with why."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from reference_model.vocabulary import RET_RESULTS, TRACE_EVENTS, TRACE_UNEMITTED, EventKind, FieldSpec, Op

ROOT = Path(__file__).resolve().parents[2]
NPUCONF = Path(sys.executable).with_name("npuconf")

# Eight scenarios that between them make the probe write every event kind and every field and op result
# the whole corpus writes (a greedy cover of the corpus run's traces): threads, callbacks inside calls,
# delayed loads, preemption, deleters, settles, skipped steps and a crash.
SLICE = (
    "loading.map_during_delayed_load",
    "allocation.batch_returns_before_onalloc_runs",
    "concurrency.allocate_inside_onpreempt",
    "concurrency.is_supported_while_allocating",
    "crashes.alloc_fresh_request_without_onalloc",
    "loading.async_fd_closed_after_onload",
    "cookies.null_cookie_still_gets_deleter",
    "free.commands_on_a_buffer_whose_allocation_may_fail",
)

_JSON_TYPES = {"int": int, "str": str, "bool": bool, "null": type(None), "object": dict, "list": list}


def _has_type(value: object, types: tuple[str, ...]) -> bool:
    kinds = {type(value)}
    allowed = {_JSON_TYPES[t] for t in types if t != "number"} | ({int, float} if "number" in types else set())
    return bool(kinds & allowed)


def schema_problems(line: str) -> list[str]:
    """What is wrong with one trace line against the schema: the empty list for a conforming line."""
    event = json.loads(line)
    if not isinstance(event, dict) or event.get("ev") not in TRACE_EVENTS:
        return [f"kind {event.get('ev') if isinstance(event, dict) else event!r} is not in the schema"]
    kind = EventKind(event["ev"])
    declared: dict[str, FieldSpec] = {f.name: f for f in TRACE_EVENTS[kind]}
    if kind is EventKind.RET and event.get("op") in RET_RESULTS:
        declared.update({f.name: f for f in RET_RESULTS[Op(event["op"])]})
    problems = [f"{kind}: undeclared field {name!r}" for name in event if name != "ev" and name not in declared]
    for name, spec in declared.items():
        if name not in event:
            if not spec.optional:
                problems.append(f"{kind}: required field {name!r} is absent")
        elif not _has_type(event[name], spec.types):
            problems.append(f"{kind}: field {name!r} is {event[name]!r}, declared {'|'.join(spec.types)}")
    return problems


def kinds_unaccounted(seen: Iterable[str], unemitted: Mapping[EventKind, str]) -> list[str]:
    """Schema kinds no run wrote and the vocabulary does not list as unemitted, and listed kinds that were."""
    seen = set(seen)
    missing = [f"{k} is never written (list it under trace_unemitted with why)"
               for k in TRACE_EVENTS if k not in seen and k not in unemitted]
    stale = [f"{k} is listed under trace_unemitted but was written" for k in unemitted if k in seen]
    return missing + stale


@pytest.fixture(scope="module")
def probe_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("schema-run")
    command = [str(NPUCONF), "run", "--target", "local", "-q", "--out", str(out)]
    for scenario in SLICE:
        command += ["--scenario", scenario]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    records = [json.loads(raw) for raw in (out / "results.jsonl").read_text().splitlines()]
    results = [r for r in records if r.get("kind") == "result"]
    assert sorted(r["scenario"] for r in results) == sorted(SLICE)
    return [line for r in results for line in r["trace"]]


def test_every_line_the_probe_writes_conforms_to_the_schema(probe_lines: list[str]) -> None:
    assert len(probe_lines) > 100
    problems = sorted({p for line in probe_lines for p in schema_problems(line)})
    assert problems == []


def test_every_schema_kind_is_written_or_listed_as_unemitted(probe_lines: list[str]) -> None:
    seen = {json.loads(line)["ev"] for line in probe_lines}
    assert kinds_unaccounted(seen, TRACE_UNEMITTED) == []
    assert all(why.strip() for why in TRACE_UNEMITTED.values())


def test_the_checks_report_what_they_exist_to_report() -> None:
    assert schema_problems('{"ev":"settle","what":"alloc","reached":true,"extra":1}') == [
        "settle: undeclared field 'extra'"]
    assert schema_problems('{"ev":"settle","what":"alloc"}') == ["settle: required field 'reached' is absent"]
    assert schema_problems('{"ev":"end","scenario":7}') == ["end: field 'scenario' is 7, declared str"]
    assert schema_problems('{"ev":"ret","step":1,"op":"map_read","digest":5}') == [
        "ret: field 'digest' is 5, declared str"]
    assert schema_problems('{"ev":"nope"}') == ["kind 'nope' is not in the schema"]
    seen = set(TRACE_EVENTS) - {EventKind.SETTLE}
    assert kinds_unaccounted(seen, {}) == ["settle is never written (list it under trace_unemitted with why)"]
    assert kinds_unaccounted(set(TRACE_EVENTS), {EventKind.END: "x"}) == [
        "end is listed under trace_unemitted but was written"]
