"""A device's next batch of programs, drawn while its batch runs: in a process of its own once batches are
large (host.fuzz.campaign).

Drawing costs the kit about as much CPU as judging (three candidates a program, each taken through the
caller's model, host.fuzz.steer), and the kit's process runs on one core at most: its lanes' threads share
one interpreter. In a process of its own, drawing takes CPU the probes leave free. A batch is chosen on the
coverage as it stood when the batch before it began (its order carries that snapshot), so its programs are
the same wherever they are drawn: in the drawing process, or in this one when the order is small (starting
a process would cost more than it saves), the process could not start or is gone, or the batch turns out
longer than its order."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

from .coverage import Snapshot
from .generate import Drawn
from .steer import Prior, Scorer, choose

# An order of fewer programs is drawn in the kit's process when the batch needs it: a campaign of a few
# programs (the first batches, a test) never starts the drawing process.
IN_PROCESS_FROM: Final = 100
# How often the drawing process looks for its parent: it ends once the kit's process is gone, killed or not.
PARENT_POLL_S: Final = 0.5


@dataclass(frozen=True)
class Order:
    """Programs ``indices`` of the stream ``seed`` for a device of ``capabilities`` (host.fuzz.generate.draw's),
    each the best of its candidates scored on ``snapshot``."""

    seed: int
    indices: tuple[int, ...]
    capabilities: Mapping[str, Any]
    snapshot: Snapshot


def draw_order(order: Order, prior: Prior) -> list[Drawn]:
    scorer = Scorer(order.snapshot, prior)
    return [choose(scorer, order.seed, index, **order.capabilities) for index in order.indices]


class Pending:
    """An order being drawn (``future``) or to be drawn here (no future)."""

    def __init__(self, drawer: Drawer, order: Order, future: Future[list[Drawn]] | None) -> None:
        self.drawer = drawer
        self.order = order
        self._future = future

    def programs(self, indices: tuple[int, ...]) -> list[Drawn]:
        """Programs ``indices``: the order's first ones, as its snapshot chooses them (those past its end
        drawn here on the same snapshot)."""
        shared = min(len(indices), len(self.order.indices))
        if indices[:shared] != self.order.indices[:shared]:
            raise ValueError(f"programs {indices[:3]}... are not the order's {self.order.indices[:3]}...")
        drawn = self._drawn()
        rest = indices[len(drawn):]
        if rest:
            drawn += draw_order(Order(self.order.seed, rest, self.order.capabilities, self.order.snapshot),
                                self.drawer.prior)
        return drawn[:len(indices)]

    def cancel(self) -> None:
        if self._future is not None:
            self._future.cancel()

    def _drawn(self) -> list[Drawn]:
        if self._future is not None:
            try:
                return self._future.result()
            except BrokenProcessPool:  # the process died (killed, out of memory): this one draws from now on
                self.drawer.lost()
        return []


class Drawer:
    """The drawing process of a campaign (started with its first large order), shared by its devices."""

    def __init__(self, prior: Prior, processes: int = 1) -> None:
        self.prior = prior
        self.processes = max(1, processes)
        self._pool: ProcessPoolExecutor | None = None
        self._unavailable = False
        self._lock = threading.Lock()

    def order(self, order: Order) -> Pending:
        """Start drawing ``order`` (in the drawing process when it is large and the process is there)."""
        pool = self._started() if len(order.indices) >= IN_PROCESS_FROM else None
        if pool is None:
            return Pending(self, order, None)
        try:
            return Pending(self, order, pool.submit(_draw_there, order))
        except (BrokenProcessPool, RuntimeError):  # gone, or shut down as the campaign ends
            return Pending(self, order, None)

    def warm(self) -> None:
        """Start the drawing process now (it imports the generator while the devices are prepared)."""
        pool = self._started()
        if pool is not None:
            with suppress(BrokenProcessPool, RuntimeError):
                pool.submit(_ready)

    def lost(self) -> None:
        with self._lock:
            self._unavailable = True

    def close(self) -> None:
        """Stop the drawing process (an order in flight is cancelled or, already begun, waited for)."""
        with self._lock:
            pool, self._pool, self._unavailable = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _started(self) -> ProcessPoolExecutor | None:
        with self._lock:
            if self._pool is None and not self._unavailable:
                try:
                    self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_start_drawing, initargs=(self.prior, os.getpid()))
                except OSError:
                    self._unavailable = True
            return None if self._unavailable else self._pool


# --- in the drawing process ----------------------------------------------------------------------------

_PRIOR: list[Prior] = []  # the campaign's prior, set once as the process starts


def _start_drawing(prior: Prior, parent: int) -> None:
    _PRIOR.append(prior)
    # Ctrl-C reaches the whole process group: the kit's process handles it and closes this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(parent,), name="parent-watch", daemon=True).start()


def _end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)


def _ready() -> bool:
    return True


def _draw_there(order: Order) -> list[Drawn]:
    return draw_order(order, _PRIOR[0])
