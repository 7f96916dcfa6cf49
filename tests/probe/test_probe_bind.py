"""`bind` waits for the onAlloc it names (docs/probe.md "Buffer handles")."""

import json

from tests.probe.test_probe_threads import SETUP, run_probe


def _bind_events(stdout: str) -> list[tuple[dict, dict]]:
    events = [json.loads(line) for line in stdout.splitlines()]
    calls = {e["step"]: e for e in events if e["ev"] == "call" and e["op"] == "bind"}
    return [(calls[e["step"]], e) for e in events if e["ev"] == "ret" and e.get("step") in calls]


def test_a_bind_waits_for_a_late_onalloc_and_not_once_none_is_owed(probe_build, tmp_path):
    body = ("scenario t.bind 10000\n" + SETUP + "vnpu delay_ms=300\nalloc r0\nbind b0 cookie:c0\n"
            "bind b1 cookie:c0\nbuf_free b0\nvnpu delay_ms=0\nend\n")
    done = run_probe(probe_build, tmp_path, body)
    assert done.returncode == 0, done.stderr
    (first_call, first), (second_call, second) = _bind_events(done.stdout)
    assert first["handle"] is not None, first
    assert first["t"] - first_call["t"] >= 250_000_000, "the bind returned before the delayed onAlloc"
    # The only onAlloc owed has come and is bound: nothing can match any more, so no wait.
    assert second["handle"] is None, second
    assert second["t"] - second_call["t"] < 200_000_000


def test_a_bind_of_a_failed_allocation_does_not_wait_past_its_onalloc(probe_build, tmp_path):
    body = ("scenario t.bindfail 10000\n" + SETUP.replace("req_set_type r0 1\n", "") + "alloc r0\n"
            "bind b0 cookie:c0\nend\n")
    done = run_probe(probe_build, tmp_path, body)
    assert done.returncode == 0, done.stderr
    ((call, ret),) = _bind_events(done.stdout)
    assert ret["handle"] is None
    assert ret["t"] - call["t"] < 1_000_000_000
