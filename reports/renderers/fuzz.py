"""The fuzz run's reports: fuzz.json (the summary for scripts) and fuzz.html (one self-contained page in
the family of report.html: same environment, inline CSS, a Content-Security-Policy, no network)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floor.safe_io import write_text

from .html import environment

FUZZ_SCHEMA: Final = 3


@dataclass(frozen=True, slots=True)
class FuzzDivergence:
    """One group of divergent programs of one device: the same verdict and clause (``signature``), shrunk
    once on that device. ``shrunk`` is False when the run ended before shrinking did: ``scenario`` is then
    the program as generated, ``steps_after`` its own length, and ``replays`` was not checked."""

    signature: str
    verdict: str
    clause: str | None
    quote: str | None
    reason: str
    program: str  # the first program that showed it
    found_after_s: float  # the device's fuzzing time (generation and runs, not shrinking) at the end of that batch
    found_after_programs: int
    steps_before: int
    steps_after: int
    shrink_s: float
    candidates: int  # shrinking candidates run
    scenario: str  # path of the shrunk scenario YAML (or of the generated program, unshrunk)
    scenario_id: str
    replays: bool  # the written scenario, run again (replay_runs times), gave the same verdict and clause each time
    shrunk_reason: str
    count: int  # programs of the device that showed it
    device: str = ""
    shrunk: bool = True
    replayed: int = 0  # runs of the written scenario that gave the same verdict and clause
    replay_runs: int = 0  # of how many
    # Programs of the group shrunk (the first few it met): the scenario kept replays most often, then is the
    # shortest (a divergence may have several routes, some racy or longer).
    shrinks: int = 0
    # The shrink ended at its deadline (the time budget's end, or the per-shrink bound) before it had
    # tried every edit: the scenario is the smallest program found until then.
    cut_short: bool = False
    replay: str = ""  # the `npuconf run` command that runs this scenario again on the run's configuration

    def replay_text(self) -> str:
        if not self.shrunk:
            return "not checked"
        tries = f", best of {self.shrinks} shrunk" if self.shrinks > 1 else ""
        if self.replay_runs == 0:
            return ("yes" if self.replays else "NO") + tries
        if self.replays:
            return f"yes ({self.replayed} of {self.replay_runs}{tries})"
        if self.replayed == self.replay_runs:  # the budget's end left out the other runs
            return f"yes in {self.replayed} of {self.replay_runs} runs, the others cut by the budget{tries}"
        return f"{'NO' if self.replayed == 0 else 'SOMETIMES'} ({self.replayed} of {self.replay_runs}{tries})"

    def seen_again(self) -> FuzzDivergence:
        return dataclasses.replace(self, count=self.count + 1)


@dataclass(frozen=True, slots=True)
class FuzzDevice:
    """What one device ran: its share of the program stream and how its part ended."""

    device: str
    programs: int
    fuzzing_s: float
    programs_per_s: float
    divergences: int
    verdicts: dict[str, int]
    # complete (budget spent), stopped (another device's divergence ended an --until-found run),
    # found (this device's divergence ended it), interrupted, lost, unprepared
    status: str
    detail: str = ""  # why a lost or unprepared device's part ended
    stream: str = ""  # which programs of the seed's stream it ran: "index k, k+n, ..."


@dataclass(frozen=True, slots=True)
class FuzzSummary:
    seed: int
    target: str
    impl: str | None
    budget: str
    programs: int  # every device's, summed
    fuzzing_s: float  # the longest device's fuzzing time
    elapsed_s: float
    programs_per_s: float  # every device's programs per second of the longest device's fuzzing time
    verdicts: dict[str, int]
    divergences: tuple[FuzzDivergence, ...]
    scenarios_dir: str
    devices: tuple[FuzzDevice, ...] = ()
    status: str = "complete"  # complete, found (--until-found), interrupted
    until_found: bool = False
    # target, impl, personality, policy, capacity, profile, timeout multiplier, seed, budget, shrink bound,
    # devices, serials and adb servers (as they apply): host/fuzz/replay.py `configuration`
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    replay: str = ""  # `npuconf run` of every kept scenario (shrunk or as generated), same configuration
    exit_code: int = 0

    @property
    def unshrunk(self) -> tuple[FuzzDivergence, ...]:
        return tuple(d for d in self.divergences if not d.shrunk)

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["divergences"] = [dataclasses.asdict(d) for d in self.divergences]
        data["devices"] = [dataclasses.asdict(d) for d in self.devices]
        return {"schema": FUZZ_SCHEMA, **data}


def render_fuzz_html(summary: FuzzSummary) -> str:
    template = environment().get_template("fuzz.html.j2")
    return template.render(
        s=summary,
        generated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        replay=summary.replay,
    )


def write_fuzz_reports(summary: FuzzSummary, out_dir: Path) -> dict[str, Path]:
    paths = {"json": out_dir / "fuzz.json", "html": out_dir / "fuzz.html"}
    write_text(paths["json"], json.dumps(summary.as_json(), indent=2, sort_keys=False) + "\n")
    write_text(paths["html"], render_fuzz_html(summary))
    return paths
