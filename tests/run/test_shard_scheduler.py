"""The --shard scheduler on its own: balance by estimates, stealing, lost devices, every id exactly once."""

import threading
import time
from collections import Counter

import pytest

from host.run.lanes import DEFAULT_ESTIMATE_MS, estimate_all
from host.run.shard import MAX_CHUNK, ShardScheduler


def drain(scheduler, device, taken, work_s=0.0):
    while chunk := scheduler.take(device):
        taken.extend((device, i) for i in chunk)
        for scenario_id in chunk:
            time.sleep(work_s)
            scheduler.finished(device, scenario_id)


def test_estimates_fall_back_to_the_median_then_the_default():
    assert estimate_all(["a", "b", "c"], {"a": 10.0, "b": 30.0}) == {"a": 10.0, "b": 30.0, "c": 20.0}
    assert estimate_all(["a"], {}) == {"a": DEFAULT_ESTIMATE_MS}
    assert estimate_all(["a", "b"], {"a": 0.0, "b": 8.0}) == {"a": 8.0, "b": 8.0}  # zero is "not measured"


def test_deal_is_longest_first_to_the_least_loaded_device():
    estimates = {"long": 900.0, "mid1": 500.0, "mid2": 400.0, **{f"s{i}": 100.0 for i in range(10)}}
    scheduler = ShardScheduler(list(estimates), estimates, ["d1", "d2"])
    queues = {d: list(q) for d, q in scheduler._queues.items()}
    loads = {d: sum(estimates[i] for i in q) for d, q in queues.items()}
    assert abs(loads["d1"] - loads["d2"]) <= 100.0, loads
    assert queues["d1"][0] == "long"  # each queue runs its longest scenario first
    assert sorted(queues["d1"] + queues["d2"]) == sorted(estimates)


def test_chunks_respect_the_budget_and_the_count_cap():
    ids = [f"s{i:03d}" for i in range(400)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 1.0), ["only"])
    chunk = scheduler.take("only")
    assert len(chunk) == MAX_CHUNK  # 1 ms each: the count cap binds before the time budget
    heavy = {i: 1000.0 for i in ids[:10]}
    scheduler = ShardScheduler(ids[:10], heavy, ["a", "b"])
    assert len(scheduler.take("a")) == 1  # each scenario alone exceeds the chunk budget


def test_a_device_that_runs_dry_steals_from_the_most_loaded():
    ids = [f"s{i}" for i in range(20)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 100.0), ["fast", "slow"])
    taken = []
    drain(scheduler, "fast", taken)  # "slow" never takes anything: "fast" ends up with all of it
    assert sorted(i for _, i in taken) == sorted(ids)
    assert scheduler.steals >= 1
    assert scheduler.take("slow") == []


def test_a_lost_device_gives_its_chunk_and_queue_to_the_others():
    ids = [f"s{i}" for i in range(30)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 50.0), ["a", "b", "c"])
    lost_chunk = scheduler.take("b")
    done_on_b = lost_chunk[:1]
    scheduler.finished("b", done_on_b[0])
    scheduler.lost("b", "device gone", lost_chunk[1:])
    assert scheduler.take("b") == []
    taken = [("b", done_on_b[0])]
    drain(scheduler, "a", taken)
    drain(scheduler, "c", taken)
    assert Counter(i for _, i in taken) == Counter(ids)  # every scenario exactly once
    assert scheduler.leftovers() == []
    assert scheduler.lost_devices == {"b": "device gone"}


def test_a_waiting_lane_picks_up_what_a_device_lost_later():
    """A device that ran out of work waits while another still has a chunk in flight, then runs it if lost."""
    ids = [f"s{i}" for i in range(4)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 10_000.0), ["a", "b"])
    a_chunks = []
    while chunk := scheduler.take("a") if not a_chunks or scheduler._queues["a"] else []:
        a_chunks.append(chunk)
        for i in chunk:
            scheduler.finished("a", i)
    in_flight_b = scheduler.take("b")
    rest_b = list(scheduler._queues["b"])
    taken = []
    waiter = threading.Thread(target=drain, args=(scheduler, "a", taken))
    waiter.start()
    waiter.join(0.3)
    # "a" either stole b's queued work or is waiting for b's chunk; it must not have given up
    assert waiter.is_alive() or rest_b
    scheduler.lost("b", "killed", in_flight_b)
    waiter.join(5)
    assert not waiter.is_alive()
    ran_on_a = [i for c in a_chunks for i in c] + [i for _, i in taken]
    assert sorted(ran_on_a) == sorted(ids)


def test_when_every_device_is_lost_the_rest_is_left_over():
    ids = [f"s{i}" for i in range(6)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 50.0), ["a", "b"])
    chunk_a = scheduler.take("a")
    scheduler.finished("a", chunk_a[0])
    scheduler.lost("a", "a died", chunk_a[1:])
    chunk_b = scheduler.take("b")
    scheduler.lost("b", "b died", chunk_b)
    left = scheduler.leftovers()
    assert sorted(x.scenario_id for x in left) == sorted(set(ids) - {chunk_a[0]})
    assert {x.reason for x in left} <= {"a died", "b died"}


def test_concurrent_lanes_take_every_id_once():
    ids = [f"s{i}" for i in range(500)]
    scheduler = ShardScheduler(ids, {i: float(1 + n % 7) for n, i in enumerate(ids)}, ["a", "b", "c", "d"], lanes=2)
    taken: list[tuple[str, str]] = []
    lock = threading.Lock()

    def lane(device):
        mine = []
        drain(scheduler, device, mine, work_s=0.001)
        with lock:
            taken.extend(mine)

    threads = [threading.Thread(target=lane, args=(d,)) for d in "abcd" for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert Counter(i for _, i in taken) == Counter(ids)
    assert set(d for d, _ in taken) == set("abcd")


def test_a_group_needs_a_device():
    with pytest.raises(ValueError):
        ShardScheduler(["a"], {}, [])


def test_work_given_back_by_a_second_lane_of_a_lost_device_still_finds_a_device():
    """With -j 2 a lost device may hold two chunks: the second comes back after the first; nobody has left."""
    ids = [f"s{i}" for i in range(6)]
    scheduler = ShardScheduler(ids, dict.fromkeys(ids, 10_000.0), ["a", "b"], lanes=2)
    first, second = scheduler.take("b"), scheduler.take("b")
    scheduler.lost("b", "gone", first)  # lane 1 of b noticed; lane 2 is still in its batch
    taken = []
    lane_a = threading.Thread(target=drain, args=(scheduler, "a", taken))
    lane_a.start()
    time.sleep(0.3)
    assert lane_a.is_alive()  # a waits: b's second chunk may come back
    scheduler.lost("b", "gone", second)
    lane_a.join(5)
    assert not lane_a.is_alive()
    assert sorted(i for _, i in taken) == sorted(ids) and scheduler.leftovers() == []
