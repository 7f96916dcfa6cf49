"""Recording a finished run in the results store, so dashboards see every run without an extra step;
reading back the scenarios' measured durations for the `--shard` balance."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from floor.safe_io import shared_default
from reference_model.errors import KitError
from reports.store.postgresql import is_postgresql_url
from reports.store.runs import DEFAULT_STORE, MeasuredDurations, describe_location, import_runs, measured_durations

from ..suite import part_tree_hash


def default_store(out_dir: Path) -> Path:
    """The store a run records itself in: next to its output directory (out/npuconf.sqlite by default)."""
    return out_dir.parent / DEFAULT_STORE.name


def default_store_problem(out_dir: Path) -> str | None:
    """Why the default store (next to the run directory) may not be used; None when it may. A store nobody
    named is used only where no other user could have planted it or could swap it (shared_default): a
    store another user made at the default path would receive the run's data and could stall the run."""
    problem = shared_default(default_store(out_dir))
    if problem is None:
        return None
    return (
        f"the default results store {default_store(out_dir)} is not used: {problem}; "
        "name a store with --store PATH to record the run"
    )


def record_run(out_dir: Path, store: str | Path | None = None) -> str | Path | None:
    """Import a finished (or resumed) run into the results store; a store problem is a warning, never the
    run's failure. A store that refuses the run (its run id is there with other results) is a warning too."""
    if store is None and (problem := default_store_problem(out_dir)) is not None:
        print(f"npuconf: warning: the run was not recorded: {problem}", file=sys.stderr)
        return None
    location = store if store is not None else default_store(out_dir)
    where = describe_location(location)
    try:
        outcomes = import_runs(location, [out_dir], kit_hash=part_tree_hash("kit"))
    except (KitError, OSError) as exc:
        print(f"npuconf: warning: the run was not recorded in the results store {where}: {exc}", file=sys.stderr)
        return None
    for outcome in outcomes:
        if outcome.status in ("refused", "skipped"):
            print(f"npuconf: warning: results store {where}: {outcome.line()}", file=sys.stderr)
            return None
    return location


def duration_estimates(out_dir: Path, store: str | Path | None = None) -> Estimates:
    """Measured scenario durations from the run's store, by build fingerprint (empty when unknown, and from
    a default store that may not be used: record_run says why)."""
    if store is None and default_store_problem(out_dir) is not None:
        return Estimates(None)
    return Estimates(store if store is not None else default_store(out_dir))


class Estimates:
    """Callable fingerprint -> {scenario id: mean duration ms}; a store problem gives no estimates.

    A SQLite store is read on a thread of its own from the start, while the devices are prepared: its
    query grows with the store, and a device waits for it only when it deals its lanes. (A PostgreSQL
    store is read when asked: its driver is imported on the calling thread.)"""

    def __init__(self, location: str | Path | None) -> None:
        self.location = location
        self._read: MeasuredDurations | BaseException | None = None
        self._reading: threading.Thread | None = None
        if location is None:
            self._read = MeasuredDurations({})
        elif not is_postgresql_url(str(location)):
            self._reading = threading.Thread(target=self._read_ahead, name="durations", daemon=True)
            self._reading.start()

    def _measured(self) -> MeasuredDurations | BaseException:
        if self.location is None:
            return MeasuredDurations({})
        try:
            return measured_durations(self.location)
        except BaseException as exc:  # said by the caller, on its own thread
            return exc

    def _read_ahead(self) -> None:
        self._read = self._measured()

    def __call__(self, fingerprint: str) -> Mapping[str, float]:
        if self._reading is not None or self.location is None:
            if self._reading is not None:
                self._reading.join()
            read = self._read
        else:
            read = self._measured()
        if isinstance(read, MeasuredDurations):
            return read.for_build(fingerprint)
        if isinstance(read, (KitError, OSError)):
            where = describe_location(self.location or "")
            print(f"npuconf: warning: no measured durations from {where} ({read}); defaults used", file=sys.stderr)
            return {}
        assert read is not None
        raise read
