"""The probe's parallel blocks and callback actions (docs/formats.md §3, §5; docs/probe.md)."""

import json
import subprocess

import pytest

from host.probe import program_header


def run_probe(probe_build, tmp_path, body):
    program = tmp_path / "p.txt"
    program.write_text(program_header() + "\n" + body)
    return subprocess.run([str(probe_build.probe), str(program)], capture_output=True, text=True, timeout=60,
                          check=False)


def probe_events(probe_build, tmp_path, body):
    """The trace events of a program that must run to completion."""
    done = run_probe(probe_build, tmp_path, body)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


SETUP = """req_create r0
req_set_device r0 0
req_set_type r0 1
req_set_size r0 4096
req_set_onalloc r0 1
cookie_new c0
req_set_cookie r0 c0 1
"""


def test_threads_run_their_steps_between_par_begin_and_par_end(probe_build, tmp_path):
    body = ("scenario t.par 5000\n" + SETUP + "cb_action alloc free_buf 3\npar_begin 3\n@0 alloc r0\n@0 sleep_ms 1\n"
            "@1 alloc r0\n@2 alloc r0\npar_end\nawait_alloc 3 2000\nend\n")
    done = run_probe(probe_build, tmp_path, body)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    calls = [e for e in events if e["ev"] in ("call", "ret")]
    assert all("th" in e for e in calls)
    index = {(e["ev"], e["op"]): i for i, e in enumerate(events) if e["ev"] in ("call", "ret") and e["th"] == "main"}
    threads = [i for i, e in enumerate(events) if e["ev"] in ("call", "ret") and e["th"].startswith("t")]
    assert {events[i]["th"] for i in threads} == {"t0", "t1", "t2"}
    assert index[("ret", "par_begin")] < min(threads) and max(threads) < index[("ret", "par_end")]
    assert [events[i]["step"] for i in threads if events[i]["ev"] == "call" and events[i]["th"] == "t0"] == [9, 10]
    nested = [e for e in events if e.get("in_cb")]
    assert len(nested) == 6 and {e["op"] for e in nested} == {"buf_free"}
    assert all(e["step"] == 7 and e["th"].startswith("w") for e in nested)
    assert [e["ret"] for e in nested if e["ev"] == "ret"] == [0, 0, 0]
    # the buffers freed inside onAlloc are not freed again by teardown
    assert not [e for e in events if e.get("teardown") and e["op"] == "buf_free"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("par_end\n", "par_end without par_begin"),
        ("@0 sleep_ms 1\n", "outside a parallel block"),
        ("par_begin 1\n", "2 to 16 threads"),
        ("par_begin 2\n@0 sleep_ms 1\npar_end\n", "the block has 2 threads but steps for 1"),
        ("par_begin 2\n@1 sleep_ms 1\n@0 sleep_ms 1\npar_end\n", "@1 after @-1"),
        ("par_begin 2\n@0 sleep_ms 1\n@2 sleep_ms 1\npar_end\n", "expected @<k> with k < 2"),
        ("par_begin 2\n@0 sleep_ms 1\nsleep_ms 1\n", "every step is prefixed"),
        ("par_begin 2\n@0 par_begin 2\n", "blocks do not nest"),
        ("par_begin 2\n@0 sleep_ms 1\n@1 sleep_ms 1\n", "missing par_end"),
        ("cb_action alloc unmap 1\n", "cb_action: expected kind"),
        ("cb_action alloc none 1\n", "count must be 0 for action none"),
        ("cb_action alloc sleep_0 1\n", "sleep_<ms>"),
        ("cb_action load sleep_10000 1\n", "sleep_<ms>"),
        ("cb_action alloc hold_0 1\n", "hold_<ms>"),
        ("cb_action preempt hold_10000 1\n", "hold_<ms>"),
    ],
)
def test_bad_blocks_are_bad_programs_with_a_line_number(probe_build, tmp_path, body, message):
    done = run_probe(probe_build, tmp_path, f"scenario t.bad 5000\n{body}end\n")
    assert done.returncode == 3
    assert "line " in done.stderr and message in done.stderr, done.stderr


def test_each_callback_writes_cb_return_last_on_its_thread(probe_build, tmp_path):
    """Trace version 2 (formats §5): every cb is closed by a cb_return of the same kind and cookie on its
    thread, after the API calls its cb_action made; a sleep_<ms> callback returns only after the sleep,
    and teardown waits for it before `end`."""
    body = ("scenario t.ret 5000\n" + SETUP + "cb_action alloc sleep_300 1\nalloc r0\nsleep_ms 50\n"
            "bind b0 cookie:c0\nbuf_free b0\ncb_action alloc free_buf 1\nalloc r0\nawait_alloc 2 2000\nend\n")
    done = run_probe(probe_build, tmp_path, body)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["ev"] == "begin" and events[0]["trace"] == 2
    opened: dict[str, list[dict]] = {}
    closed = []
    for e in events:
        if e["ev"] == "cb":
            opened.setdefault(e["th"], []).append(e)
        elif e["ev"] == "cb_return":
            top = opened[e["th"]].pop()
            assert (top["kind"], top["cookie"]) == (e["kind"], e["cookie"])
            closed.append((top, e))
    assert len(closed) == 2 and not any(opened.values())
    (slow, slow_ret), (freeing, freeing_ret) = closed
    assert slow_ret["t"] - slow["t"] >= 300_000_000
    # the buffer was freed by the program while the slow callback still ran
    free = next(i for i, e in enumerate(events) if e["ev"] == "ret" and e["op"] == "buf_free" and "in_cb" not in e)
    assert events.index(slow) < free < events.index(slow_ret)
    nested = [i for i, e in enumerate(events) if e.get("in_cb")]
    assert nested and events.index(freeing) < min(nested) and max(nested) < events.index(freeing_ret)
    assert events.index(slow_ret) < next(i for i, e in enumerate(events) if e["ev"] == "end")


def test_a_held_callback_runs_until_the_steps_are_done_and_bind_sees_it_start(probe_build, tmp_path):
    """cb_action hold_<ms> ends on an event, the program's last step: the callback still runs (and borrows
    its cookie) while the program binds and frees its buffer, replaces the cookie, and returns as
    teardown begins, long before its bound; bind does not wait for the callback to return."""
    body = ("scenario t.hold 20000\n" + SETUP + "cb_action alloc hold_9000 1\nalloc r0\nbind b0 cookie:c0\n"
            "buf_free b0\ncookie_new c1\nreq_set_cookie r0 c1 1\nend\n")
    events = probe_events(probe_build, tmp_path, body)

    def first(predicate):
        return next(i for i, e in enumerate(events) if predicate(e))

    held = first(lambda e: e["ev"] == "cb" and e["kind"] == "alloc")
    returned = first(lambda e: e["ev"] == "cb_return")
    bound = first(lambda e: e["ev"] == "ret" and e["op"] == "bind")
    replaced = first(lambda e: e["ev"] == "ret" and e["op"] == "req_set_cookie" and e["step"] == 12)
    deleted = first(lambda e: e["ev"] == "deleter" and e["cookie"] == "c0")
    assert events[bound]["handle"] == "B1"
    assert held < bound < replaced < returned < deleted
    assert events[returned]["t"] - events[held]["t"] < 2_000_000_000  # released by the steps, not its bound


def test_a_held_callback_inside_a_call_of_the_program_is_not_held(probe_build, tmp_path):
    """With callbacks on the caller's thread, nothing could release a hold before its bound: none is made."""
    body = ("scenario t.hold_caller 20000\n" + SETUP + "vnpu callback_thread=caller\ncb_action alloc hold_9000 1\n"
            "alloc r0\nawait_alloc 1 2000\nend\n")
    events = probe_events(probe_build, tmp_path, body)
    call = next(e for e in events if e["ev"] == "ret" and e["op"] == "alloc")
    assert call["dur_ns"] < 2_000_000_000
    assert any(e["ev"] == "cb" and e["thread"] == "caller" for e in events)


def test_preempt_settle_waits_for_the_commanded_onpreempt_not_an_earlier_one_of_its_cookie(probe_build, tmp_path):
    """An onPreempt of the cookie seen before the command (here inside ANpuBuffer_free, as a device may do)
    does not end teardown's preempt settle: it waits for one more, the one the command owes."""
    from tests.adversarial.adversary import build, real_library

    library = build("W_PREEMPT_IN_FREE_UNMAPPED", tmp_path / "lib", real_library())
    body = ("scenario t.owed 5000\n" + SETUP + "req_set_onpreempt r0 1\nalloc r0\nawait_alloc 1 2000\n"
            "bind b0 cookie:c0\nbuf_free b0\nalloc r0\nawait_alloc 2 2000\nbind b1 cookie:c0\n"
            "vnpu preempt=b1\nend\n")
    program = tmp_path / "p.txt"
    program.write_text(program_header() + "\n" + body)
    done = subprocess.run([str(probe_build.probe), "--impl", str(library), str(program)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    preempts = [i for i, e in enumerate(events) if e["ev"] == "cb" and e["kind"] == "preempt"]
    command = next(i for i, e in enumerate(events) if e["ev"] == "call" and e["op"] == "vnpu")
    settle = next(i for i, e in enumerate(events) if e["ev"] == "settle" and e["what"] == "preempt")
    assert events[settle]["expected"] == 2 and events[settle]["reached"], events[settle]
    assert preempts[0] < command < preempts[1] < settle
