"""Drawing a batch while the one before runs (host/fuzz/draw_ahead.py): the same programs wherever they are
drawn, no process for small orders, drawing here once the process is gone, and no process left behind."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from host.cli import main
from host.fuzz import draw_ahead
from host.fuzz.coverage import Snapshot
from host.fuzz.draw_ahead import Drawer, Order, draw_order
from host.fuzz.steer import kit_prior

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = {"vnpu_control": True, "pointer64": True, "pair": True, "unsupported": False, "capacity": None}


def _order(first: int, count: int, snapshot: Snapshot | None = None) -> Order:
    return Order(7, tuple(range(first, first + count)), CAPABILITIES, snapshot or _snapshot())


def _snapshot() -> Snapshot:
    """A campaign that has run some programs: the steering then prefers cells they did not reach."""
    reached = Counter({("req_create", "main", "fresh"): 40, ("alloc", "main", "one"): 12})
    judged = Counter({("alloc-async", "shown"): 12})
    return Snapshot(reached, judged, {("alloc", "main", "one"): Counter({("alloc-async", "shown"): 12})})


@pytest.fixture
def drawer():
    made = Drawer(kit_prior())
    yield made
    made.close()


def test_an_order_drawn_in_the_drawing_process_is_the_one_drawn_here(drawer):
    order = _order(100, draw_ahead.IN_PROCESS_FROM)
    pending = drawer.order(order)
    assert pending._future is not None  # a large order goes to the process
    assert pending.programs(order.indices) == draw_order(order, kit_prior())


def test_a_small_order_starts_no_process(drawer):
    order = _order(0, draw_ahead.IN_PROCESS_FROM - 1)
    pending = drawer.order(order)
    assert pending._future is None and drawer._pool is None
    assert pending.programs(order.indices[:5]) == draw_order(_order(0, 5), kit_prior())


def test_warming_starts_the_process_before_any_order_and_closing_ends_it(drawer):
    drawer.warm()
    (process,) = multiprocessing.active_children()
    drawer.close()
    process.join(10)
    assert not process.is_alive() and multiprocessing.active_children() == []
    order = _order(0, draw_ahead.IN_PROCESS_FROM)
    assert drawer.order(order)._future is None  # a closed drawer draws here


def test_programs_past_the_order_are_chosen_on_its_snapshot(drawer):
    order = _order(30, 4)
    wanted = tuple(range(30, 40))
    assert drawer.order(order).programs(wanted) == draw_order(Order(7, wanted, CAPABILITIES, _snapshot()), kit_prior())
    with pytest.raises(ValueError, match="not the order's"):
        drawer.order(order).programs((31, 32))


def test_once_the_drawing_process_is_gone_the_programs_are_drawn_here(drawer):
    order = _order(0, draw_ahead.IN_PROCESS_FROM)
    drawer.order(order).programs(order.indices)  # the process is up
    (process,) = multiprocessing.active_children()
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    later = _order(500, draw_ahead.IN_PROCESS_FROM)
    assert drawer.order(later).programs(later.indices) == draw_order(later, kit_prior())
    assert drawer.order(later)._future is None  # no process is started again


DRAWING_PARENT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from host.fuzz.draw_ahead import Drawer, Order, IN_PROCESS_FROM
from host.fuzz.coverage import Snapshot
from collections import Counter
if __name__ == "__main__":
    drawer = Drawer({})
    order = Order(1, tuple(range(IN_PROCESS_FROM)), {"vnpu_control": True}, Snapshot(Counter(), Counter(), {}))
    drawer.order(order).programs(order.indices)
    import multiprocessing
    print(multiprocessing.active_children()[0].pid, flush=True)
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_the_drawing_process_ends_with_the_kits_process_even_when_it_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(DRAWING_PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(ROOT)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10 * draw_ahead.PARENT_POLL_S
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.slow
def test_a_campaign_runs_the_same_programs_with_or_without_the_drawing_process(tmp_path, probe_build, monkeypatch):
    """300 programs: batches of 5, 10 and 25, then 260, ordered while the third runs: in the drawing process,
    and then again with every order drawn here."""
    coverage = []
    for name, smallest in (("process", draw_ahead.IN_PROCESS_FROM), ("here", 10**9)):
        monkeypatch.setattr(draw_ahead, "IN_PROCESS_FROM", smallest)
        out = tmp_path / name
        assert main(["fuzz", "--target", "local", "--seed", "4", "--budget", "300", "--out", str(out), "-q"]) == 0
        records = [json.loads(line) for line in (out / "fuzz.jsonl").read_text().splitlines()]
        (summary,) = [{k: v for k, v in r.items() if k != "at"} for r in records if r["kind"] == "coverage"]
        coverage.append(summary)
    assert coverage[0]["programs"] == 300
    assert coverage[0] == coverage[1]
