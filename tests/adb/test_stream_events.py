"""host/targets/adb/streaming.py: a frame's lines reach the batch reader in order, in events of a bounded
size (so a device that frames a million short lines at once holds no more than the queue's lines in
flight), and a watchdog deadline still ends a wait for lines that never come."""

from __future__ import annotations

import queue
import threading
import time

from host.probe import ProbeEnded
from host.targets.adb.streaming import EVENT_QUEUE, LINES_PER_EVENT, _ProbeStream


def _stream() -> _ProbeStream:
    # The queue side alone: no transport (its reader thread is what _put_lines runs on).
    stream = object.__new__(_ProbeStream)
    stream.events = queue.Queue(maxsize=EVENT_QUEUE)
    stream._aborted = False
    return stream


def test_a_large_frame_is_queued_in_bounded_events_and_read_back_in_order():
    stream = _stream()
    lines = [(f"line {n}", None if n % 7 else "over a limit") for n in range(3 * LINES_PER_EVENT + 5)]
    sizes: list[int] = []
    real_put = stream.events.put

    def counting_put(event, timeout=None):
        sizes.append(len(event) if isinstance(event, tuple) else 0)
        real_put(event, timeout=timeout)

    stream.events.put = counting_put
    writer = threading.Thread(target=lambda: (stream._put_lines(lines), stream._put(ProbeEnded(0, ""))))
    writer.start()
    read = []
    while True:
        item = stream.next_lines(time.monotonic() + 5.0)
        assert item is not None
        if isinstance(item, ProbeEnded):
            assert item.status == 0
            break
        read.extend(item)
    writer.join()
    assert read == lines
    assert sizes[:-1] == [LINES_PER_EVENT] * 3 + [5]  # the last event is the exit
    assert EVENT_QUEUE * LINES_PER_EVENT <= 4096


def test_no_line_before_the_deadline_is_none():
    stream = _stream()
    started = time.monotonic()
    assert stream.next_lines(started + 0.05) is None
    assert time.monotonic() - started < 1.0
