"""`npuconf fuzz`: generated programs are valid and reproducible, the conformant vnpu gives no divergence,
and single-defect builds of the vnpu are found, shrunk to at most 12 steps and replayed by
`npuconf run --scenarios` to the same clause (while the conformant vnpu passes the same scenario)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from host.errors import UsageError
from host.fuzz import Budget, generate, step_count
from host.fuzz.generate import AWAIT_MS
from host.fuzz.shrink import normalise
from host.suite import load_catalogue
from reference_model.scenario import parse_scenario
from reference_model.verdicts import Verdict
from reference_model.vocabulary import Op
from tests.conftest import npuconf
from tests.vnpu_builds import build_defective_vnpu

MAX_SHRUNK_STEPS = 12
# its only legal route is a free during an in-flight load, a race: shrinks end between 13 and 15 steps
MUTANT_SHRUNK_STEPS = {"M_DELETE_AT_FREE": 15}


def test_programs_validate_and_are_reproducible_from_the_seed():
    known = load_catalogue().ids()
    ops: set[Op] = set()
    for index in range(600):
        program = generate(7, index, vnpu_control=True)
        assert program == generate(7, index, vnpu_control=True)
        scenario = parse_scenario(program, "fuzz", "fuzz", known)
        ops |= {step.op for step in scenario.steps}
    assert program != generate(8, index, vnpu_control=True)
    # the weights reach the deep states the issue names
    wanted = {Op.ALLOC, Op.BIND, Op.BUF_MAP, Op.BUF_UNMAP, Op.MAP_WRITE, Op.MAP_READ, Op.BUF_LOAD, Op.AWAIT_LOAD,
              Op.BUF_FREE, Op.BUF_SET_PRIORITY, Op.REQ_FREE, Op.VNPU, Op.AWAIT_PREEMPT, Op.PAR_BEGIN}
    assert wanted <= ops


def test_without_vnpu_control_no_program_needs_it():
    for index in range(200):
        program = generate(3, index, vnpu_control=False)
        assert "vnpu-control" not in program["requires"]
        assert all("vnpu" not in step for step in program["steps"])


def test_programs_keep_many_requests_and_buffers_alive():
    binds = [sum(1 for step in generate(5, i, vnpu_control=True)["steps"] if "bind" in step) for i in range(400)]
    assert max(binds) >= 5


def test_normalise_recounts_the_waits_after_an_edit():
    program = {
        "id": "x", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair", "load"],
        "steps": [
            {"req_create": {"req": "r"}},
            {"alloc": {"reqs": ["r", "r"]}},
            {"await_alloc": {"count": 5, "timeout_ms": 2000}},
            {"await_load": {"count": 1, "timeout_ms": 2000}},
        ],
    }
    out = normalise(program)
    assert out["steps"][2] == {"await_alloc": {"count": 2, "timeout_ms": 2000}}
    assert len(out["steps"]) == 3  # no load is owed: its wait goes
    assert out["requires"] == ["supported-pair"]
    assert step_count(out) == 3


def test_normalise_keeps_the_unsupported_pair_a_step_still_names():
    """A program that still sets `$unsupported.*` keeps `unsupported-pair` (without it the written scenario,
    the whole program when no candidate was smaller, would not load); once no step names it, it goes."""
    from reference_model.scenario import parse_scenario

    program = {
        "id": "fuzz.x", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair", "unsupported-pair"],
        "timeout_ms": 20000,
        "steps": [{"req_create": {"req": "r"}}, {"req_set_type": {"req": "r", "type": "$unsupported.type"}}],
    }
    out = normalise(program)
    assert out["requires"] == ["supported-pair", "unsupported-pair"]
    parse_scenario(out, "fuzz", "fuzz")
    assert normalise(dict(program, steps=program["steps"][:1]))["requires"] == ["supported-pair"]


@pytest.mark.parametrize(("text", "seconds", "programs"), [("60s", 60.0, None), ("2m", 120.0, None),
                                                            ("500", None, 500), ("1.5s", 1.5, None)])
def test_budget_is_a_time_or_a_count(text, seconds, programs):
    assert Budget.parse(text) == Budget(seconds=seconds, programs=programs)


@pytest.mark.parametrize(("given", "seconds"), [(None, 20.0), ("", 20.0), ("0", 0.0), ("7.5", 7.5), ("30s", 30.0)])
def test_until_found_takes_the_seconds_to_fuzz_past_the_first_divergence(given, seconds):
    from host.fuzz.command import _after_find_s

    assert _after_find_s(given) == seconds


@pytest.mark.parametrize("text", ["-1", "soon", "nan", "inf", "1h", "4000"])
def test_until_found_rejects_other_seconds_in_one_line(text):
    done = npuconf("fuzz", "--until-found", text, "--budget", "5")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"npuconf: --until-found {text}: expected the seconds to fuzz past the first divergence, 0 to 3600 "
        "(as 20 or 20s)"]


@pytest.mark.parametrize("text", ["", "0", "-3", "1.5", "10h", "soon"])
def test_budget_rejects_other_text(text):
    with pytest.raises(UsageError):
        Budget.parse(text)


@pytest.mark.slow
def test_fuzzing_the_conformant_vnpu_finds_nothing(tmp_path, probe_build):
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--seed", "2026", "--budget", "1500", "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    assert summary["divergences"] == [], summary["divergences"]
    assert summary["programs"] == 1500
    assert summary["verdicts"] == {"PASS": 1500}
    html = (out / "fuzz.html").read_text()
    assert "Content-Security-Policy" in html and "no divergence" in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")


# defect switch -> the clauses its first shrunk divergence may name
DEFECTS = {
    # a replaced cookie kept: with an allocation in flight the missing deleter call shows at the end first; a
    # replaced NULL cookie's deleter, or a cleared cookie, is named by its own sentence
    "VNPU_DEFECT_KEEP_REPLACED_COOKIE": ("cookie-replace-deletes-previous", "cookie-deleter-called",
                                         "cookie-deleter-null-cookie", "cookie-clear"),
    "VNPU_DEFECT_PRIORITY_MAX_REFUSED": ("priority-set-range", "priority-set"),
    "VNPU_DEFECT_PARTIAL_UNMAP_REFUSED": ("unmap-returns",),
}

# A time budget bounds the whole command, shrinking included: the tests stop at the first shrunk divergence
# and give it room to shrink whole on a loaded machine.
FIND_AND_SHRINK = ("--budget", "60s", "--until-found", "0")


def results(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "result"]


@pytest.mark.slow
@pytest.mark.parametrize("define", sorted(DEFECTS))
def test_a_single_defect_is_found_shrunk_and_replayed(tmp_path, probe_build, define):
    library = build_defective_vnpu(tmp_path, define)
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--impl", library, "--seed", "1", *FIND_AND_SHRINK, "--out", out, "-q", timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((out / "fuzz.json").read_text())
    # the groups of the first batch are each shrunk; one whose confirmation the budget cut short is not it
    found = {d["signature"]: d for d in summary["divergences"] if d["shrunk"] and not d["cut_short"]}
    named = [c for c in DEFECTS[define] if c in found]
    assert named, (define, list(found))
    clause = named[0]
    divergence = found[clause]
    assert divergence["replays"] and divergence["steps_after"] <= MAX_SHRUNK_STEPS, divergence
    print(f"{define}: found after {divergence['found_after_s']} s, {divergence['steps_before']} -> "
          f"{divergence['steps_after']} steps")
    scenario_path = Path(divergence["scenario"])
    scenario = yaml.safe_load(scenario_path.read_text())
    assert scenario["clauses"] == [clause]
    assert step_count(scenario) == divergence["steps_after"]
    # the defect's scenario alone, replayed by `npuconf run` on the defective build and on the conformant one
    alone = tmp_path / "alone" / "fuzz"
    alone.mkdir(parents=True)
    (alone / scenario_path.name).write_text(scenario_path.read_text())
    replay = tmp_path / "replay"
    done = npuconf("run", "--target", "local", "--impl", library, "--scenarios", alone.parent,
                   "--out", replay, "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    by_id = {r["scenario"]: r for r in results(replay)}
    record = by_id[scenario["id"]]
    assert record["verdict"] == "FAIL" and record["divergence"]["clause"] == clause, record["reason"]
    control = tmp_path / "control"
    done = npuconf("run", "--target", "local", "--scenarios", alone.parent, "--out", control, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["verdict"] for r in results(control)] == ["PASS"]


def test_fuzz_report_groups_divergences_by_clause_and_escapes_text(tmp_path):
    from reports.renderers.fuzz import FuzzDivergence, FuzzSummary, write_fuzz_reports

    divergence = FuzzDivergence(
        signature="map-must-unmap", verdict="FAIL", clause="map-must-unmap", quote="<quoted> sentence",
        reason="observed <script>x</script>", program="fuzz.s1_10", found_after_s=1.0, found_after_programs=11,
        steps_before=43, steps_after=12, shrink_s=20.0, candidates=148, scenario="out/scenarios/fuzz/a.yaml",
        scenario_id="fuzz.map-must-unmap.s1_10", replays=True, shrunk_reason="trace line 30: map-must-unmap", count=3,
    )
    summary = FuzzSummary(seed=1, target="local", impl=None, budget="60s", programs=300,
                          fuzzing_s=9.7, elapsed_s=30.0, programs_per_s=30.9, verdicts={"PASS": 289, "FAIL": 11},
                          divergences=(divergence,), scenarios_dir="/abs/out/scenarios",
                          config={"target": "local", "target_default": True, "personality": "aosp-2026",
                                  "policy": "caching", "capacity": None},
                          replay="npuconf run --target local --personality aosp-2026 --policy caching "
                                 "--scenarios /abs/out/scenarios")
    paths = write_fuzz_reports(summary, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["divergences"][0]["signature"] == "map-must-unmap" and data["divergences"][0]["steps_after"] == 12
    html = paths["html"].read_text()
    assert "Content-Security-Policy" in html and "<script" not in html
    assert "&lt;quoted&gt; sentence" in html and "43 → 12" in html
    assert summary.replay in html and "(default: local)" in html and "caching" in html
    assert data["schema"] == 3 and data["config"]["personality"] == "aosp-2026" and data["replay"] == summary.replay


# --- legality of programs (host.fuzz.legal) and the shrinker's passes -----------------------------------

def _request(r: str, cookie: object = "c", *, onpreempt: bool = False, size: int = 8192) -> list[dict]:
    steps = [
        {"req_create": {"req": r}},
        {"req_set_device": {"req": r, "device": "$pair.device"}},
        {"req_set_type": {"req": r, "type": "$pair.type"}},
        {"req_set_size": {"req": r, "size": size}},
        {"req_set_prot": {"req": r, "prot": ["READ", "WRITE"]}},
        {"req_set_onalloc": {"req": r, "set": True}},
    ]
    if onpreempt:
        steps.append({"req_set_onpreempt": {"req": r, "set": True}})
    if isinstance(cookie, str):
        steps.append({"cookie_new": {"cookie": cookie}})
    steps.append({"req_set_cookie": {"req": r, "cookie": cookie, "deleter": True}})
    return steps


def _program(steps: list[dict]) -> dict:
    return {"id": "fuzz.legal", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair"],
            "timeout_ms": 20000, "steps": steps}


BASE = [*_request("r"), {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}},
        {"bind": {"buf": "b", "select": {"cookie": "c"}}}]
MAP = {"buf_map": {"map": "m", "buf": "b", "length": 8192, "prot": ["READ"], "flags": ["SHARED"], "offset": 0}}


def test_a_legal_program_passes_the_check():
    from host.fuzz.legal import check

    steps = [*BASE, MAP, {"map_read": {"map": "m", "offset": 4096, "length": 4096}},
             {"buf_free": {"bufs": ["b"]}},  # free while mapped: the mapping stays valid until unmapped
             {"map_read": {"map": "m", "offset": 0, "length": 4096}},
             {"buf_unmap": {"map": "m", "offset": 0, "length": 8192}},
             {"req_set_onpreempt": {"req": "r", "set": False}},
             {"is_supported": {"reqs": ["r", "r"]}}, {"req_free": {"req": "r"}}]
    assert check(_program(steps)) is None


def _without(steps: list[dict], op: str) -> list[dict]:
    return [s for s in steps if op not in s]


ILLEGAL = {
    # a step on a request that was freed
    "request used after free": [*BASE, {"req_free": {"req": "r"}}, {"req_set_priority": {"req": "r", "priority": 1}}],
    "allocation of a freed request": [*_request("r"), {"req_free": {"req": "r"}}, {"alloc": {"reqs": ["r"]}}],
    "request never created": [{"req_set_size": {"req": "r", "size": 4096}}],
    "request created while live": [*_request("r"), {"req_create": {"req": "r"}}],
    # the allocation, the wait or the bind of a buffer handle the program uses was dropped
    "bind dropped": [*_without(BASE, "bind"), MAP],
    "allocation dropped": [*_without(BASE, "alloc")],
    "bind by position after a bind by cookie waited among two owed": [
        *_request("r1", "c1"), *_request("r2", "c2"), {"alloc": {"reqs": ["r1"]}}, {"alloc": {"reqs": ["r2"]}},
        {"bind": {"buf": "b", "select": {"cookie": "c2"}}}, {"bind": {"buf": "b1", "select": {"nth": 0}}}],
    "bind by position among two owed onAllocs": [
        *_request("r1", "c1"), *_request("r2", "c2"), {"alloc": {"reqs": ["r1", "r2"]}},
        {"bind": {"buf": "b", "select": {"nth": 1}}}],
    "wait for more than owed": [*_request("r"), {"alloc": {"reqs": ["r"]}},
                                {"await_alloc": {"count": 2, "timeout_ms": 2000}}],
    "bind of a failing request": [*_without(_request("r"), "req_set_type"), {"alloc": {"reqs": ["r"]}},
                                  {"await_alloc": {"count": 1, "timeout_ms": 2000}},
                                  {"bind": {"buf": "b", "select": {"cookie": "c"}}}],
    "bind by a position arrival order decides": [
        *_request("r1", "c1"), *_request("r2", "c2"), {"alloc": {"reqs": ["r1", "r2"]}},
        {"await_alloc": {"count": 2, "timeout_ms": 2000}}, {"bind": {"buf": "b", "select": {"nth": 0}}}],
    # a documented crash is a program's last step: the process died there
    "a step after allocAsync without onAlloc": [*_without(_request("r"), "req_set_onalloc"),
                                                {"alloc": {"reqs": ["r"]}}, {"req_free": {"req": "r"}}],
    "a step after setOnAlloc(NULL)": [{"req_create": {"req": "r"}}, {"req_set_onalloc": {"req": "r", "set": False}},
                                      {"req_free": {"req": "r"}}],
    # buffers and mappings
    "map of an unbound handle": [*_request("r"), MAP],
    "use of a freed buffer": [*BASE, {"buf_free": {"bufs": ["b"]}}, {"buf_set_priority": {"buf": "b", "priority": 1}}],
    "double free": [*BASE, {"buf_free": {"bufs": ["b"]}}, {"buf_free": {"bufs": ["b"]}}],
    # a map a conforming device may refuse, or must: never used
    "read through a map beyond the buffer": [*BASE, {"buf_map": dict(MAP["buf_map"], length=3 * 4096)},
                                             {"map_read": {"map": "m", "offset": 0, "length": 4096}}],
    "write through a map beyond the request's protection": [
        *_without(BASE, "req_set_prot"), {"buf_map": dict(MAP["buf_map"], prot=["READ", "WRITE"])},
        {"map_write": {"map": "m", "offset": 0, "length": 4096, "seed": 1}}],
    "read of an unmapped page": [*BASE, MAP, {"buf_unmap": {"map": "m", "offset": 0, "length": 4096}},
                                 {"map_read": {"map": "m", "offset": 0, "length": 4096}}],
    "write through a read-only mapping": [*BASE, MAP, {"map_write": {"map": "m", "offset": 0, "length": 4096,
                                                                      "seed": 1}}],
    "unmap of a mapping never made": [*BASE, {"buf_unmap": {"map": "m", "offset": 0, "length": 4096}}],
    "read through a map of a preempted buffer": [*BASE, {"vnpu": {"command": "preempt=b"}}, MAP,
                                                 {"map_read": {"map": "m", "offset": 0, "length": 4096}}],
    "wait for the onPreempt of a preemption of a mapped buffer": [
        *_request("r", onpreempt=True), *BASE[-3:], MAP, {"vnpu": {"command": "preempt=b"}},
        {"await_preempt": {"count": 1, "timeout_ms": 2000}}],
    "wait for an onPreempt nobody owes": [*BASE, {"vnpu": {"command": "preempt=b"}},
                                          {"await_preempt": {"count": 1, "timeout_ms": 2000}}],
    # cookies and files
    "cookie never created": [*_without(_request("r"), "cookie_new")],
    "cookie created twice": [*_request("r"), {"cookie_new": {"cookie": "c"}}],
    "cookie handed over with a deleter twice": [*_request("r"), *_request("q", None)[:-1],
                                                {"req_set_cookie": {"req": "q", "cookie": "c", "deleter": True}}],
    "load longer than its file": [*BASE, {"file_new": {"file": "f", "size": 4096, "seed": 1}},
                                  {"buf_load": {"buf": "b", "fd": "f", "file_offset": 0, "length": 8192,
                                                "buffer_offset": 0, "onload": True}}],
    "load from a file handed over already": [
        *BASE, {"file_new": {"file": "f", "size": 4096, "seed": 1}},
        {"buf_load": {"buf": "b", "fd": "f", "file_offset": 0, "length": 4096, "buffer_offset": 0, "onload": False}},
        {"buf_load": {"buf": "b", "fd": "f", "file_offset": 0, "length": 4096, "buffer_offset": 0, "onload": False}}],
    "wait for an onLoad after a free during the load": [
        *BASE, {"file_new": {"file": "f", "size": 4096, "seed": 1}},
        {"buf_load": {"buf": "b", "fd": "f", "file_offset": 0, "length": 4096, "buffer_offset": 0, "onload": True}},
        {"buf_free": {"bufs": ["b"]}}, {"await_load": {"count": 1, "timeout_ms": 2000}}],
    # threads
    "one handle on two threads": [*BASE, {"parallel": [[{"buf_set_priority": {"buf": "b", "priority": 1}}],
                                                       [{"buf_free": {"bufs": ["b"]}}]]}],
}


def test_refused_calls_and_documented_crashes_are_legal():
    """A call the text makes fail (a map wider than the request's protection or of a preempted buffer, a
    commanded preemption of a mapped buffer) is legal when nothing relies on what it would have made; a
    documented crash is legal as the program's last step."""
    from host.fuzz.legal import check

    wider = {"buf_map": dict(MAP["buf_map"], map="w", prot=["READ", "WRITE", "EXEC"])}
    assert check(_program([*BASE, wider, MAP, {"map_read": {"map": "m", "offset": 0, "length": 4096}}])) is None
    assert check(_program([*BASE, MAP, {"vnpu": {"command": "preempt=b"}},
                           {"map_read": {"map": "m", "offset": 0, "length": 4096}}])) is None
    assert check(_program([*BASE, {"vnpu": {"command": "preempt=b"}}, MAP])) is None
    for death in ({"req_set_onalloc": {"req": "r", "set": False}}, {"req_set_onalloc_null_req": {}}):
        assert check(_program([*BASE, death])) is None


def test_a_bind_waits_for_its_onalloc():
    """A bind names the buffer an onAlloc brings and waits for it: no await_alloc is needed before it, by
    cookie, or by position where the owed onAlloc is the only success still to come."""
    from host.fuzz.legal import check

    assert check(_program([*_without(BASE, "await_alloc"), MAP])) is None
    by_position = [*_request("r1", "c1"), *_request("r2", "c2"), {"alloc": {"reqs": ["r1"]}},
                   {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"alloc": {"reqs": ["r2"]}},
                   {"bind": {"buf": "b2", "select": {"nth": 1}}}, {"bind": {"buf": "b1", "select": {"nth": 0}}}]
    assert check(_program(by_position)) is None
    by_cookie_then_position = [*_request("r1", "c1"), *_request("r2", "c2"), {"alloc": {"reqs": ["r1"]}},
                               {"bind": {"buf": "b1", "select": {"cookie": "c1"}}}, {"alloc": {"reqs": ["r2"]}},
                               {"bind": {"buf": "b2", "select": {"nth": 1}}}]
    assert check(_program(by_cookie_then_position)) is None


def test_null_and_integers_may_be_handed_over_again():
    from host.fuzz.legal import check

    for value in (None, 12345):
        assert check(_program([*_request("r", value), *_request("q", value)])) is None


@pytest.mark.parametrize("kind", sorted(ILLEGAL))
def test_an_illegal_program_is_rejected(kind):
    from host.fuzz.legal import check

    assert check(_program(ILLEGAL[kind])) is not None, kind


def test_every_generated_program_is_legal():
    from host.fuzz.legal import check

    for seed in (1, 2, 3, 7, 2026):
        for index in range(300):
            for control, pointer64 in ((True, True), (False, False)):
                program = generate(seed, index, vnpu_control=control, pointer64=pointer64)
                assert check(program) is None, (seed, index, check(program))


def test_generated_programs_reach_the_new_actions():
    """isSupported (a request twice, an invalid request), integer cookies above 2^48 and NULL cookies, NULL
    deleters, callbacks set or cleared after allocAsync, a free of a mapped buffer then its unmap, file
    segments, owned descriptors awaited closed, an integer cookie handed over again: each is in the stream
    of one seed."""
    reached: set[str] = set()
    reached_ints: dict[int, list[int]] = {}
    for index in range(300):
        program = generate(11, index, vnpu_control=True, pointer64=True)
        requests_submitted: set[str] = set()
        mapped: dict[str, str] = {}
        freed_mapped: set[str] = set()
        for step in flat_steps_of(program):
            ((op, args),) = step.items()
            if op == "is_supported":
                reached.add("isSupported")
                if len(set(args["reqs"])) < len(args["reqs"]):
                    reached.add("isSupported twice")
            if (op == "req_set_type" and args["type"] == 0) or (op == "req_set_device" and args["device"] == -1):
                reached.add("invalid request")
            if op == "req_set_cookie":
                cookie = args["cookie"]
                if cookie is None:
                    reached.add("NULL cookie")
                elif isinstance(cookie, int) and cookie >= 1 << 48:
                    reached.add("cookie above 2^48")
                    assert "pointer-64" in program["requires"]
                if not args["deleter"]:
                    reached.add("NULL deleter")
            if op == "alloc":
                requests_submitted |= set(args["reqs"])
            if op == "req_set_onpreempt" and args["req"] in requests_submitted:
                reached.add("onPreempt " + ("set" if args["set"] else "cleared") + " after allocAsync")
            if op == "req_set_onalloc" and args["req"] in requests_submitted:
                reached.add("onAlloc set again after allocAsync")
            if op == "buf_map":
                mapped[args["map"]] = args["buf"]
            if op == "buf_free":
                freed_mapped |= {m for m, b in mapped.items() if b in args["bufs"]}
            if op == "buf_unmap" and args["map"] in freed_mapped:
                reached.add("unmap after the buffer's free")
            if op == "req_set_file":
                reached.add("file segment")
            if op == "await_closed":
                reached.add("owned descriptor awaited closed")
            if op == "req_set_cookie" and isinstance(args["cookie"], int) and args["deleter"]:
                handed_ints = reached_ints.setdefault(index, [])
                if args["cookie"] in handed_ints:
                    reached.add("integer handed over again")
                handed_ints.append(args["cookie"])
    assert reached == {
        "isSupported", "isSupported twice", "invalid request", "NULL cookie", "cookie above 2^48", "NULL deleter",
        "onPreempt set after allocAsync", "onPreempt cleared after allocAsync", "onAlloc set again after allocAsync",
        "unmap after the buffer's free", "file segment", "owned descriptor awaited closed",
        "integer handed over again"}


def test_a_load_is_read_back_apart_from_the_bytes_around_it():
    """After a load of one argument class the buffer is read back in parts: before its range, the range, and
    after it, so a digest that disagrees names the sentence of its part (the length for bytes after it)."""
    split = 0
    for index in range(300):
        steps = flat_steps_of(generate(1, index, vnpu_control=True))
        for k, step in enumerate(steps):
            ((op, args),) = step.items()
            if op != "buf_load" or not isinstance(args["fd"], str) or args["length"] <= 0:
                continue
            start, end = args["buffer_offset"], args["buffer_offset"] + args["length"]
            reads = [(a["offset"], a["offset"] + a["length"]) for s in steps[k + 1:] for o, a in s.items()
                     if o == "map_read"]
            if end % 4096 and reads and reads[0][0] == 0:
                assert (start, end) in reads[:3] and any(lo == end for lo, _ in reads[:3]), (index, args, reads)
                split += 1
    assert split >= 5


def test_about_half_of_the_commanded_preemptions_are_late():
    """`preempt_late=` (the vnpu's late onPreempt, one step) for about half of those that preempt a buffer the
    program names, unmapped (one of a mapped buffer is refused, and has no onPreempt to make late;
    `preempt=lowest` lets the device choose); legal like `preempt=`, its onPreempt owed (an await_preempt
    may follow it)."""
    from host.fuzz.caller import Caller, item_steps
    from host.fuzz.legal import check

    commands = {"preempt": 0, "preempt_late": 0}
    awaited_late = 0
    for seed, index in ((seed, index) for seed in (1, 2, 3) for index in range(1000)):
        caller = Caller()
        steps = [{op: args} for item in generate(seed, index, vnpu_control=True)["steps"]
                 for op, args in item_steps(item)]
        for i, step in enumerate(steps):
            ((op, args),) = step.items()
            key, _, buf = str(args.get("command", "") if op == "vnpu" else "").partition("=")
            if key in commands and buf != "lowest" and not caller.live_mapped(buf):
                commands[key] += 1
                awaited_late += key == "preempt_late" and i + 1 < len(steps) and "await_preempt" in steps[i + 1]
            caller.take(op, args)
    share = commands["preempt_late"] / sum(commands.values())
    assert 0.35 < share < 0.65, commands
    assert awaited_late > 0
    program = generate(1, 0, vnpu_control=True)
    program["steps"] = [
        {"req_create": {"req": "r"}}, {"req_set_device": {"req": "r", "device": "$pair.device"}},
        {"req_set_type": {"req": "r", "type": "$pair.type"}}, {"req_set_size": {"req": "r", "size": 4096}},
        {"req_set_onalloc": {"req": "r", "set": True}}, {"req_set_onpreempt": {"req": "r", "set": True}},
        {"cookie_new": {"cookie": "c"}}, {"req_set_cookie": {"req": "r", "cookie": "c", "deleter": True}},
        {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}},
        {"bind": {"buf": "b", "select": {"cookie": "c"}}}, {"vnpu": {"command": "preempt_late=b"}},
        {"await_preempt": {"count": 1, "timeout_ms": 2000}},
    ]
    assert check(program) is None
    mapped = [*program["steps"][:11], {"buf_map": {"map": "m", "buf": "b", "length": 4096, "prot": ["READ"],
                                                    "flags": ["SHARED"], "offset": 0}},
              {"vnpu": {"command": "preempt_late=b"}}]
    # never while mapped, as preempt=: refused, and no onPreempt is owed
    assert check({**program, "steps": mapped}) is None
    assert check({**program, "steps": [*mapped, {"await_preempt": {"count": 1, "timeout_ms": 2000}}]}) is not None


def flat_steps_of(program: dict) -> list[dict]:
    from host.fuzz.shrink import flat_steps

    return flat_steps(program)


def test_without_a_64_bit_abi_no_cookie_needs_one():
    for index in range(300):
        program = generate(4, index, vnpu_control=True, pointer64=False)
        assert "pointer-64" not in program["requires"]
        cookies = [s["req_set_cookie"]["cookie"] for s in flat_steps_of(program) if "req_set_cookie" in s]
        assert all(not isinstance(c, int) or c < 1 << 31 for c in cookies)


def _fake_target(predicate):
    """A run function that FAILs (clause `x`) the programs the predicate holds for, and counts the runs."""
    from host.fuzz.execute import Result
    from host.fuzz.legal import check
    from reference_model.verdicts import Verdict

    ran: list[dict] = []

    def run(programs):
        out = []
        for program in programs:
            assert check(program) is None, check(program)  # the shrinker runs only legal candidates
            ran.append(program)
            hit = predicate(flat_steps_of(program))
            out.append(Result(program["id"], Verdict.FAIL if hit else Verdict.PASS, "", "x" if hit else None,
                              None, {}))
        return out

    return run, ran


def _first(predicate, seeds=range(1, 6)):
    for seed in seeds:
        for index in range(400):
            program = generate(seed, index, vnpu_control=True, pointer64=True)
            if predicate(flat_steps_of(program)):
                return program
    raise AssertionError("no generated program has the pattern")


def _twice_listed(steps):
    return any("is_supported" in s and len(set(s["is_supported"]["reqs"])) < len(s["is_supported"]["reqs"])
               for s in steps)


def _freed_while_mapped(steps):
    mapped: set[str] = set()
    for step in steps:
        ((op, args),) = step.items()
        if op == "buf_map":
            mapped.add(args["buf"])
        if op == "buf_free" and mapped & set(args["bufs"]):
            return True
    return False


def _late_preempt_then_free(steps):
    """A buffer preempted by `preempt_late=`, then freed (the route of M_DELETE_AT_FREE)."""
    late: set[str] = set()
    for step in steps:
        ((op, args),) = step.items()
        if op == "vnpu" and args["command"].startswith("preempt_late="):
            late.add(args["command"].partition("=")[2])
        if op == "buf_free" and late & set(args["bufs"]):
            return True
    return False


def _wide_cookie_and_alloc(steps):
    ops = {next(iter(s)) for s in steps}
    wide = any("req_set_cookie" in s and isinstance(s["req_set_cookie"]["cookie"], int)
               and s["req_set_cookie"]["cookie"] >= 1 << 48 for s in steps)
    return wide and "alloc" in ops


@pytest.mark.parametrize(("predicate", "most"), [(_twice_listed, 2), (_freed_while_mapped, 11),
                                                 (_wide_cookie_and_alloc, 4), (_late_preempt_then_free, 10)])
def test_the_shrinker_keeps_programs_legal_and_small(predicate, most):
    import time

    from host.fuzz.execute import Result
    from host.fuzz.shrink import shrink
    from reference_model.verdicts import Verdict

    program = _first(predicate)
    run, ran = _fake_target(predicate)
    found = Result(program["id"], Verdict.FAIL, "", "x", None, {})
    shrunk, tried = shrink(program, found, run, time.monotonic() + 60)
    assert predicate(flat_steps_of(shrunk))
    assert step_count(shrunk) <= most, (step_count(program), shrunk["steps"])
    assert tried == len(ran) and tried > 0


def test_chunk_removals_start_where_the_last_removal_kept_the_divergence():
    """After a removal at step 4 kept the divergence, the next round tries the chunks from there on first and
    those before it, which did not go, last (the chunk holding step ``first`` included)."""
    from host.fuzz.shrink import _chunk_removals, _first_change

    program = {"id": "p", "steps": [{"sleep_ms": {"ms": k}} for k in range(8)]}

    def removed(first: int) -> list[int]:
        return [_first_change(program["steps"], c["steps"]) for c in _chunk_removals(program, 2, first)]

    assert removed(0) == [0, 2, 4, 6]
    assert removed(4) == [4, 6, 0, 2]
    assert removed(5) == [4, 6, 0, 2]
    assert list(_chunk_removals(program, 8)) == []


def _read_through_a_wider_mapping(steps):
    ops = {next(iter(s)) for s in steps}
    wide = any("buf_map" in s and s["buf_map"]["prot"] not in (["READ"], 1) for s in steps)
    return "map_read" in ops and ("req_set_prot" in ops or wide)


def test_the_shrinker_narrows_a_protection_to_read_and_drops_the_setter():
    """A read through a mapping needs no more than PROT_READ: the map's protection narrows, and the
    request's setProt (then the default) goes."""
    import time

    from host.fuzz.execute import Result
    from host.fuzz.shrink import shrink
    from reference_model.verdicts import Verdict

    def reads(steps):
        return any("map_read" in s for s in steps)

    program = _first(_read_through_a_wider_mapping)
    run, _ = _fake_target(reads)
    shrunk, _ = shrink(program, Result(program["id"], Verdict.FAIL, "", "x", None, {}), run, time.monotonic() + 60)
    steps = flat_steps_of(shrunk)
    assert reads(steps) and not _read_through_a_wider_mapping(steps), shrunk["steps"]


def _refused_with_onpreempt(steps):
    """An allocAsync of a request with onPreempt set and without the pair's device or type (its onAlloc
    fails on a conforming device): written without host.fuzz.legal, which the tests below check."""
    reqs: dict[str, dict[str, bool]] = {}
    for step in steps:
        ((op, args),) = step.items()
        if op == "req_create":
            reqs[args["req"]] = {}
        elif op == "req_set_device" and args["req"] in reqs:
            reqs[args["req"]]["device"] = args["device"] == "$pair.device"
        elif op == "req_set_type" and args["req"] in reqs:
            reqs[args["req"]]["type"] = args["type"] == "$pair.type"
        elif op == "req_set_onpreempt" and args["req"] in reqs:
            reqs[args["req"]]["onpreempt"] = args["set"]
        elif op == "alloc":
            for r in args["reqs"]:
                req = reqs.get(r, {})
                if req.get("onpreempt") and not (req.get("device") and req.get("type")):
                    return True
    return False


def _paused_after_its_onalloc(steps):
    """The first await_alloc after that allocAsync is followed by a pause of at least 100 ms."""
    ops = [next(iter(s)) for s in steps]
    waits = [k for k in range(ops.index("alloc"), len(ops)) if ops[k] == "await_alloc"]
    if not waits or ops[waits[0] + 1:waits[0] + 2] != ["sleep_ms"]:
        return False
    return bool(steps[waits[0] + 1]["sleep_ms"]["ms"] >= 100)


REFUSED = [{"req_create": {"req": "r"}}, {"req_set_onalloc": {"req": "r", "set": True}},
           {"req_set_onpreempt": {"req": "r", "set": True}}, {"alloc": {"reqs": ["r"]}}]


@pytest.mark.parametrize(("steps", "expected"), [
    # M_PREEMPT_ON_FAILED's shrunk scenarios as written before: the pause after the onAlloc goes in ...
    ([*REFUSED, {"await_alloc": {"count": 1, "timeout_ms": 2000}}],
     [*REFUSED, {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"sleep_ms": {"ms": 100}}]),
    # ... and a wait for the onAlloc first when the program has none
    (REFUSED, [*REFUSED, {"await_alloc": {"count": 1, "timeout_ms": AWAIT_MS}}, {"sleep_ms": {"ms": 100}}]),
    # a shorter pause is lengthened, not doubled; later steps stay after it
    ([*REFUSED, {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"sleep_ms": {"ms": 20}},
      {"req_free": {"req": "r"}}],
     [*REFUSED, {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"sleep_ms": {"ms": 100}},
      {"req_free": {"req": "r"}}]),
    # an allocation that succeeds on a conforming device, or a refused one without onPreempt: no pause
    ([*_request("r"), {"req_set_onpreempt": {"req": "r", "set": True}}, {"alloc": {"reqs": ["r"]}},
      {"await_alloc": {"count": 1, "timeout_ms": 2000}}], None),
    ([*REFUSED[:2], {"alloc": {"reqs": ["r"]}}], None),
    # under pressure the same valid request may be refused: the pause goes in
    ([{"vnpu": {"command": "pressure=1048576"}}, *_request("r"), {"req_set_onpreempt": {"req": "r", "set": True}},
      {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"req_free": {"req": "r"}}],
     [{"vnpu": {"command": "pressure=1048576"}}, *_request("r"), {"req_set_onpreempt": {"req": "r", "set": True}},
      {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}}, {"sleep_ms": {"ms": 100}},
      {"req_free": {"req": "r"}}]),
    # a commanded preemption of a buffer without onPreempt in its snapshot (set on the request after
    # allocAsync): M_LIVE_CALLBACKS's shrunk scenario as written before, ending at the command
    ([*BASE, {"req_set_onpreempt": {"req": "r", "set": True}}, {"vnpu": {"command": "preempt=b"}}],
     [*BASE, {"req_set_onpreempt": {"req": "r", "set": True}}, {"vnpu": {"command": "preempt=b"}},
      {"sleep_ms": {"ms": 100}}]),
    # the onPreempt of a buffer whose snapshot had it is owed and waited for by teardown: no pause
    ([*_request("r", onpreempt=True), {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}},
      {"bind": {"buf": "b", "select": {"cookie": "c"}}}, {"vnpu": {"command": "preempt=b"}}], None),
])
def test_normalise_keeps_a_pause_where_an_onpreempt_must_not_come(steps, expected):
    """An onPreempt that must not come (after a failed onAlloc: preempt-callback-on-forced-dealloc; after a
    commanded preemption of a buffer without onPreempt: req-onpreempt-default-null) comes, if at all, on
    the device's thread after the event: without a wait and a pause the child may exit first and the
    scenario replays to PASS by thread timing (M_PREEMPT_ON_FAILED 2 of 3, M_LIVE_CALLBACKS 1 of 3)."""
    out = normalise(_program(steps))
    assert out["steps"] == (steps if expected is None else expected)
    assert normalise(out)["steps"] == out["steps"]
    from host.fuzz.legal import check

    assert check(out) is None


def test_the_shrinker_keeps_the_pause_that_shows_an_onpreempt_after_a_failed_onalloc():
    """A target whose FAIL shows in every run (as the confirmation runs did when the thread was quick) must
    not lead the shrinker to drop the pause: the written scenario would replay only by luck."""
    import time

    from host.fuzz.execute import Result
    from host.fuzz.shrink import shrink
    from reference_model.verdicts import Verdict

    program = _first(_refused_with_onpreempt)
    run, ran = _fake_target(_refused_with_onpreempt)
    found = Result(program["id"], Verdict.FAIL, "", "x", None, {})
    shrunk, tried = shrink(program, found, run, time.monotonic() + 60)
    steps = flat_steps_of(shrunk)
    assert _refused_with_onpreempt(steps) and _paused_after_its_onalloc(steps), steps
    assert step_count(shrunk) <= 6, steps  # create, setOnAlloc, setOnPreempt, allocAsync, the wait, the pause
    assert tried == len(ran) and tried < 200  # candidates the pause made equal to the kept one never ran


# interposer mutant of tests/adversarial -> the clauses its first shrunk divergence may name
MUTANTS = {
    "M_SUPPORT_COUNT": ("support-returns",),  # pair discovery fails: programs without a pair
    "M_SUPPORT_TWICE_DIFFERS": ("support-tests-requests",),
    "M_SUPPORT_CANARY": ("support-out-array-size",),
    "M_COOKIE_48": ("cookie-raw-integer",),
    "M_PREEMPT_IN_FREE": ("preempt-never-while-mapped",),
    # an onPreempt that must not come: shown only within a pause that the shrinker now keeps (replays were
    # 2 of 3 and 1 of 3 when a candidate without the pause was kept)
    "M_PREEMPT_ON_FAILED": ("preempt-callback-on-forced-dealloc",),
    # the snapshot ignored both ways: an onPreempt set after allocAsync is called, one cleared is not
    "M_LIVE_CALLBACKS": ("req-onpreempt-default-null", "preempt-onpreempt-purpose"),
    "M_DELETE_AT_FREE": ("cookie-borrowed-in-callbacks",),
    "M_FD_LEAK": ("req-file-fd-ownership", "load-fd-ownership"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mutation", sorted(MUTANTS))
def test_an_adversary_is_found_shrunk_and_replayed(tmp_path, probe_build, mutation):
    from tests.adversarial.adversary import build, real_library

    library = build(mutation, tmp_path / "lib", real_library())
    clauses = MUTANTS[mutation]
    out = tmp_path / "fuzz"
    done = npuconf("fuzz", "--impl", library, "--seed", "1", *FIND_AND_SHRINK, "--out", out, "-q", timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    found = {d["signature"]: d for d in json.loads((out / "fuzz.json").read_text())["divergences"] if d["shrunk"]}
    named = [c for c in clauses if c in found]
    assert named, (mutation, list(found))
    divergence = found[named[0]]
    most = MUTANT_SHRUNK_STEPS.get(mutation, MAX_SHRUNK_STEPS)
    told = {k: divergence.get(k) for k in ("steps_after", "replayed", "replay_runs", "cut_short", "shrinks",
                                           "shrink_s", "candidates", "shrunk_reason")}
    assert divergence["replays"] and divergence["steps_after"] <= most, told
    scenario = yaml.safe_load(Path(divergence["scenario"]).read_text())
    assert check_program(scenario) is None


def check_program(program: dict) -> str | None:
    from host.fuzz.legal import check

    return check(program)


_GROUP_PROGRAM = {"id": "p", "title": "t", "clauses": ["x"], "requires": [], "timeout_ms": 20000,
                  "steps": [{"req_create": {"req": "r"}}]}


def _group_found(k: int):
    from types import SimpleNamespace

    return SimpleNamespace(signature="FAIL:x", verdict=Verdict.FAIL, clause="x", quote="q", reason="r",
                           program_id=f"fuzz.s1_{k}", trace=())


def _scripted_worker(tmp_path, outcomes):
    """A real campaign worker (the group bookkeeping under test) whose shrink is scripted: each shrink takes
    the next (replayed of 3, steps after, seconds) of ``outcomes`` and writes its scenario file. Returns the
    run, the worker and the program ids shrunk so far."""
    import dataclasses
    from types import SimpleNamespace

    from host.fuzz import campaign

    request = SimpleNamespace(seed=1, until_found=True, after_find_s=campaign.AFTER_FIRST_FIND_S,
                              budget=campaign.Budget(programs=100))
    run = campaign._Run(request, tmp_path)  # type: ignore[arg-type]
    worker = campaign._Worker.__new__(campaign._Worker)
    worker.run, worker.name, worker.fuzzing_s, worker.status = run, "local", 1.0, "running"
    worker.build = "local"
    # The device fuzzed AFTER_FIRST_FIND_S since its first divergence: the groups alone decide the end.
    worker.fuzzing_at_find = worker.fuzzing_s - campaign.AFTER_FIRST_FIND_S
    shrunk_programs: list[str] = []
    script = iter(outcomes)

    def shrink_and_write(program, found, first):
        replayed, steps, seconds = next(script)
        shrunk_programs.append(found.program_id)
        path = tmp_path / f"{found.program_id}.yaml"
        path.write_text("scenario")
        return dataclasses.replace(first, steps_after=steps, scenario=str(path), replays=replayed == 3,
                                   replayed=replayed, replay_runs=3, shrunk=True, shrinks=first.shrinks + 1,
                                   shrink_s=seconds)

    worker._shrink_and_write = shrink_and_write
    return run, worker, shrunk_programs


def test_a_group_keeps_the_scenario_that_replays_most_often_then_the_shortest(tmp_path, monkeypatch):
    """A divergence with two routes, one racy: the first shrunk scenario replays 1 of 3; the group's next
    programs are shrunk too (GROUP_SHRINKS at most, 3 here) and the scenario that replays 3 of 3, then the
    shorter, is kept (the others' files go); --until-found ends after the group's last shrink."""
    from host.fuzz import campaign

    monkeypatch.setattr(campaign, "GROUP_SHRINKS", 3)
    run, worker, _ = _scripted_worker(tmp_path, [(1, 11, 0.0), (3, 13, 0.0), (3, 12, 0.0)])
    kept = []
    for k in range(3):
        worker._divergent(_GROUP_PROGRAM, _group_found(k), k + 1, shrink_it=True)
        kept.append(run.get("local", "FAIL:x"))
        assert run.enough.is_set() == (k == 2)
    assert [(d.replayed, d.steps_after, d.shrinks, d.count) for d in kept] == [(1, 11, 1, 1), (3, 13, 2, 2),
                                                                               (3, 12, 3, 3)]
    assert [Path(d.scenario).exists() for d in kept] == [False, False, True]
    assert worker.status == "found" and "best of 3 shrunk" in kept[2].replay_text()
    worker._divergent(_GROUP_PROGRAM, _group_found(3), 4, shrink_it=True)  # its shrinks are spent: counted only
    again = run.get("local", "FAIL:x")
    assert again is not None and (again.steps_after, again.count, again.shrinks) == (12, 4, 3)


def test_until_found_shrinks_other_groups_once_until_the_first_settles(tmp_path):
    """--until-found: a group of another clause found while the first group still has shrinks left is shrunk
    once, and does not end the run; without --until-found every group is shrunk up to GROUP_SHRINKS."""
    from types import SimpleNamespace

    def found(clause: str, program: int) -> SimpleNamespace:
        return SimpleNamespace(signature=f"FAIL:{clause}", verdict=Verdict.FAIL, clause=clause, quote="q",
                               reason="r", program_id=f"fuzz.s1_{program}", trace=())

    for until_found, shrunk in ((True, ["fuzz.s1_0", "fuzz.s1_7"]), (False, ["fuzz.s1_0", "fuzz.s1_7", "fuzz.s1_8"])):
        run, worker, shrunk_programs = _scripted_worker(tmp_path / str(until_found), [(3, 5, 0.0)] * 3)
        run.request.until_found = until_found
        worker._divergent(_GROUP_PROGRAM, _group_found(0), 1, shrink_it=True)
        worker._divergent(_GROUP_PROGRAM, found("y", 7), 2, shrink_it=True)
        worker._divergent(_GROUP_PROGRAM, found("y", 8), 3, shrink_it=True)  # y again: shrunk once only
        assert shrunk_programs == shrunk
        other = run.get("local", "FAIL:y")
        assert other is not None and other.shrunk and not run.enough.is_set()
        assert other.count == 2


def _found(clause: str, program: int):
    from types import SimpleNamespace

    return SimpleNamespace(signature=f"FAIL:{clause}", verdict=Verdict.FAIL, clause=clause, quote="q", reason="r",
                           program_id=f"fuzz.s1_{program}", trace=(), divergent=True)


def test_a_group_the_ending_batch_found_is_shrunk_once(tmp_path):
    """--until-found: the batch whose first shrink settles the run (a slow one, over GROUP_SHRINK_S and the
    budget's shrinking share) also found another clause: that group is shrunk once before the run ends (the
    defect looked for may show under it); a batch after the end leaves its groups as generated."""
    from host.fuzz import campaign

    slow = 10 * campaign.GROUP_SHRINK_S
    run, worker, shrunk_programs = _scripted_worker(tmp_path, [(3, 5, slow), (3, 7, 0.0)])
    run.request.budget = campaign.Budget(seconds=slow)  # the first shrink takes more than the share
    worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 0), 1), (_GROUP_PROGRAM, _found("x", 1), 2),
                             (_GROUP_PROGRAM, _found("y", 2), 3)])
    assert run.enough.is_set() and worker.status == "found"
    assert shrunk_programs == ["fuzz.s1_0", "fuzz.s1_2"]
    y = run.get("local", "FAIL:y")
    assert y is not None and y.shrunk and y.steps_after == 7
    worker._batch_divergent([(_GROUP_PROGRAM, _found("z", 3), 4)])  # after the end: kept as generated
    z = run.get("local", "FAIL:z")
    assert shrunk_programs == ["fuzz.s1_0", "fuzz.s1_2"] and z is not None and not z.shrunk


def test_until_found_shrinks_each_new_group_once_past_the_share(tmp_path, monkeypatch):
    """--until-found under a time budget whose shrinking share two slow shrinks spent: a third clause found
    later is still shrunk once (it may be the defect looked for), while the first group is not shrunk again;
    without --until-found the share holds for every group."""
    from host.fuzz import campaign

    monkeypatch.setattr(campaign, "GROUP_SHRINK_S", 1000.0)  # the first group is not settled by its time
    for until_found, shrunk in ((True, ["fuzz.s1_0", "fuzz.s1_1", "fuzz.s1_3"]), (False, ["fuzz.s1_0", "fuzz.s1_1"])):
        run, worker, shrunk_programs = _scripted_worker(tmp_path / str(until_found), [(3, 5, 40.0)] * 4)
        run.request.until_found = until_found
        run.request.budget = campaign.Budget(seconds=100.0)
        worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 0), 1), (_GROUP_PROGRAM, _found("y", 1), 2)])
        worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 2), 3), (_GROUP_PROGRAM, _found("z", 3), 4)])
        assert shrunk_programs == shrunk
        assert not run.enough.is_set()


def test_other_groups_shrinks_do_not_hold_an_until_found_run_up(tmp_path):
    """The wait for the first group to be met again runs from that group's last shrink: another clause's
    shrink meanwhile does not restart it, so a run that keeps finding new clauses still ends."""
    import time

    from host.fuzz import campaign

    run, worker, shrunk_programs = _scripted_worker(tmp_path, [(3, 5, 0.0)] * 2)
    worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 0), 1)])
    run.shrunk_at = time.monotonic() - campaign.GROUP_SHRINK_S  # x shrunk a while ago, not met since
    worker._batch_divergent([(_GROUP_PROGRAM, _found("y", 1), 2)])
    assert shrunk_programs == ["fuzz.s1_0", "fuzz.s1_1"]
    worker._settle_unless_met_again()
    assert run.enough.is_set() and worker.status == "found"


def test_a_batch_shrinks_its_new_groups_before_a_known_group_again(tmp_path):
    """A batch that meets the first group again and finds another: the new group's one shrink comes before
    the first group's next, so that a group's repeated shrinks do not take the time the other one needs."""
    run, worker, shrunk_programs = _scripted_worker(tmp_path, [(3, 5, 0.0)] * 4)
    worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 0), 1)])
    worker._batch_divergent([(_GROUP_PROGRAM, _found("x", 1), 2), (_GROUP_PROGRAM, _found("y", 2), 3),
                             (_GROUP_PROGRAM, _found("y", 3), 4)])
    assert shrunk_programs == ["fuzz.s1_0", "fuzz.s1_2", "fuzz.s1_1"]
    assert not run.enough.is_set()


def test_until_found_ends_once_its_group_is_not_met_again(tmp_path):
    """A group shrunk once whose programs the fuzzing does not meet again (a rare route): --until-found ends
    GROUP_SHRINK_S after its shrink instead of at the budget's end."""
    import time

    from host.fuzz import campaign

    run, worker, _ = _scripted_worker(tmp_path, [(3, 5, 0.0)])
    worker._divergent(_GROUP_PROGRAM, _group_found(0), 1, shrink_it=True)
    worker._settle_unless_met_again()
    assert not run.enough.is_set() and worker.status == "running"  # its shrinks are not spent yet
    run.shrunk_at = time.monotonic() - campaign.GROUP_SHRINK_S
    worker._settle_unless_met_again()
    assert run.enough.is_set() and worker.status == "found"


def test_until_found_fuzzes_a_while_after_its_first_find_before_it_ends(tmp_path):
    """A group whose shrinks are spent does not end --until-found before the device fuzzed
    AFTER_FIRST_FIND_S since its first divergence (a defect that breaks several sentences may show another
    in that time); then the next batch's settle ends it."""
    import time

    from host.fuzz import campaign

    run, worker, _ = _scripted_worker(tmp_path, [(3, 5, campaign.GROUP_SHRINK_S + 1)])
    worker.fuzzing_at_find = worker.fuzzing_s  # it has just diverged
    worker._divergent(_GROUP_PROGRAM, _group_found(0), 1, shrink_it=True)  # one slow shrink: none left
    run.shrunk_at = time.monotonic() - campaign.GROUP_SHRINK_S  # and not met again since
    worker._settle_unless_met_again()
    assert not run.enough.is_set() and worker.status == "running"
    worker.fuzzing_s += campaign.AFTER_FIRST_FIND_S
    worker._settle_unless_met_again()
    assert run.enough.is_set() and worker.status == "found"


def test_a_clause_is_shrunk_once_per_build_whichever_device_finds_it_again(tmp_path, monkeypatch):
    """Two identical devices (one build) find one clause: the first shrinks it, the second's finding is
    counted, and once the group's shrinks are spent no device shrinks it again."""
    import copy

    from host.fuzz import campaign

    monkeypatch.setattr(campaign, "GROUP_SHRINKS", 1)
    run, first, shrunk_programs = _scripted_worker(tmp_path, [(3, 5, 0.0)])
    second = copy.copy(first)
    second.name = "virtual-2"  # another device of the build
    first._divergent(_GROUP_PROGRAM, _group_found(0), 1, shrink_it=True)
    second._divergent(_GROUP_PROGRAM, _group_found(1), 1, shrink_it=True)
    kept = run.get("local", "FAIL:x")
    assert shrunk_programs == ["fuzz.s1_0"] and kept is not None and (kept.count, kept.shrinks) == (2, 1)
    assert len(run.snapshot()) == 1


def test_a_slow_shrink_that_never_replayed_is_shrunk_again(tmp_path):
    """A slow shrink whose scenario replayed in none of its runs (a route that showed the divergence only
    under the shrinker's short settle) does not end --until-found: the group's next program is shrunk, and
    the scenario that replays is kept; the not-met-again clock does not end the run meanwhile either."""
    import time

    from host.fuzz import campaign

    slow = campaign.GROUP_SHRINK_S + 1
    run, worker, shrunk_programs = _scripted_worker(tmp_path, [(0, 29, slow), (3, 18, slow), (3, 9, slow)])
    worker._divergent(_GROUP_PROGRAM, _group_found(0), 1, shrink_it=True)
    assert not run.enough.is_set() and worker.status == "running"
    run.shrunk_at = time.monotonic() - campaign.GROUP_SHRINK_S  # not met again since
    worker._settle_unless_met_again()
    assert not run.enough.is_set() and worker.status == "running"
    worker._divergent(_GROUP_PROGRAM, _group_found(1), 2, shrink_it=True)
    kept = run.get("local", "FAIL:x")
    assert shrunk_programs == ["fuzz.s1_0", "fuzz.s1_1"] and kept is not None
    assert (kept.replayed, kept.steps_after, kept.shrinks) == (3, 18, 2)
    assert run.enough.is_set() and worker.status == "found"  # a scenario that replays, and its time spent


def test_shrinking_takes_at_most_its_share_of_a_time_budget(tmp_path):
    """Under a 10 s budget a shrink starts only while the shrinking so far is under SHRINK_SHARE of it: a
    divergence found after that stays as generated; a count budget sets no share."""
    from host.fuzz import campaign

    run, worker, _ = _scripted_worker(tmp_path, [])
    assert worker._time_to_shrink()
    run.shrunk_for("local", "FAIL:x", 10 * campaign.SHRINK_SHARE)
    assert worker._time_to_shrink()  # a count budget: no share
    run.request.budget = campaign.Budget(seconds=10.0)
    assert not worker._time_to_shrink()


def test_a_group_is_not_shrunk_again_once_its_shrinking_took_long(tmp_path):
    """A slow shrink (every candidate of the defect waits out a settle) is not repeated: --until-found ends
    after the first shrink once the group's shrinking time reached GROUP_SHRINK_S."""
    from host.fuzz import campaign

    run, worker, shrunk_programs = _scripted_worker(tmp_path, [(3, 5, campaign.GROUP_SHRINK_S + 1)] * 2)
    for k in range(2):
        worker._divergent(_GROUP_PROGRAM, _group_found(k), k + 1, shrink_it=True)
        assert run.enough.is_set() and worker.status == "found"
    kept = run.get("local", "FAIL:x")
    assert shrunk_programs == ["fuzz.s1_0"] and kept is not None and (kept.count, kept.shrinks) == (2, 1)
