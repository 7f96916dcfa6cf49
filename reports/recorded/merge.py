"""Merging several runs (other devices, other hosts, a re-run) into one results.jsonl.

- The newest result per scenario × device wins: the later `finished`; on a tie, the run given later.
- Plans are united: every device and every scenario of any input. A planned pair no input ran is
  NOT_EXECUTED in the merged run, as in any run.
- Device info that differs between runs: the newest run's (plan `started`; on a tie, the later input).
- One column holds one configuration: two runs of one device serial with another vnpu personality,
  policy or capacity, another profile or another --impl are refused (MergeRefused, exit 3). A new
  build of a real device (an update) is the same column: its newest info wins, as below.
- The merged plan keeps every input's filters (a merge with a partial run is partial) and the claim
  basis when all inputs share it. Each input's target, devices and options are kept in `merged_from`
  (a result's replay line is its own run's), and an option the inputs set differently (`--impl` in one,
  the vnpu in another) names every input's value with its run.
- Run identity fields (profile, kit version, hashes, target) that differ are joined with `+`, and a
  problem is noted: verdicts judged with different profiles or models are not comparable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import output_dir
from reference_model.errors import KitError

from .outputs import RESULTS_FILE
from .plan_options import OPTION, read_plan_options
from .records import (
    RESULTS_SCHEMA,
    DeviceRecord,
    EndRecord,
    LostRecord,
    Plan,
    PlannedScenario,
    Record,
    Records,
    ResultRecord,
    read_records,
    results_file,
    verdict_counts,
    write_records,
)
from .results import RunResults, load_results

IDENTITY_FIELDS: Final = ("kit_version", "vocabulary", "profile", "target", "corpus_hash", "model_hash")


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    path: Path
    run_id: str
    inputs: tuple[str, ...]  # run ids, in the order used (oldest first)
    results: int
    superseded: int  # result records another input replaced
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Input:
    order: int
    path: Path
    run: RunResults
    records: Records

    @property
    def started(self) -> str:
        return self.run.plan.started if self.run.plan else ""


def _joined(values: Sequence[str]) -> str:
    distinct = list(dict.fromkeys(v for v in values if v))
    return "+".join(distinct)


def merged_run_id(run_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(run_ids)).encode()).hexdigest()[:12]
    return f"merged-{digest}"


class MergeRefused(KitError):
    """Two configurations of one device would share one column of the merged run (exit 3)."""


# What an option nobody gave means, where the option table has no default (the implementation: the vnpu).
_ABSENT: Final = {"impl": "vnpu", "waivers": "none"}

# What makes a device's verdicts comparable: one column holds one configuration.
_DEVICE_CONFIG: Final = ("personality", "policy", "capacity")
_PLAN_CONFIG: Final = ("impl", "personality", "policy", "capacity")


def _configuration(item: _Input, serial: str) -> dict[str, object]:
    info = item.run.devices.get(serial, {})
    plan = item.run.plan
    config: dict[str, object] = {f"device {key}": info.get(key) for key in _DEVICE_CONFIG}
    if plan is not None:
        config["profile"] = plan.profile
        options = read_plan_options(plan.options)
        config.update({OPTION[key].flag: getattr(options, key) for key in _PLAN_CONFIG})
    return config


def _refuse_mixed_configurations(loaded: Sequence[_Input]) -> None:
    seen: dict[str, tuple[_Input, dict[str, object]]] = {}
    for item in loaded:
        for serial in item.run.device_serials:
            config = _configuration(item, serial)
            earlier = seen.get(serial)
            if earlier is None:
                seen[serial] = (item, config)
                continue
            first, first_config = earlier
            differing = [key for key in config if config[key] != first_config.get(key)]
            if differing:
                key = differing[0]
                raise MergeRefused(
                    f"device {serial}: {key} is {first_config.get(key)!r} in run {first.run.run_id} and "
                    f"{config[key]!r} in run {item.run.run_id}; one column holds one configuration: "
                    "merge these runs separately"
                )


def _merged_options(loaded: Sequence[_Input]) -> dict[str, object]:
    """The inputs' filters united, so that a merged run of a partial run stays partial. A selection an input
    records with the wrong type is kept as it is: the merged run's selection is as unknown as that run's."""
    plans = [i.run.plan for i in loaded if i.run.plan is not None]
    typed = [read_plan_options(p.options) for p in plans]
    options: dict[str, object] = {"merged": True}
    keywords = list(dict.fromkeys(o.keyword for o in typed if o.keyword))
    if keywords:
        options["keyword"] = " or ".join(f"({k})" for k in keywords)
    for key in ("clauses", "scenario_ids"):  # list filters: their union, in first-seen order
        united = list(dict.fromkeys(v for o in typed for v in getattr(o, key)))
        if united:
            options[key] = united
    scenarios = list(dict.fromkeys(o.scenarios for o in typed if o.scenarios))
    if scenarios:
        options["scenarios"] = "+".join(scenarios)
    for key in (*_PLAN_CONFIG, "waivers"):
        values = [getattr(o, key) for o in typed]
        if values and all(v == values[0] for v in values):
            options[key] = values[0]
        elif OPTION[key].kind == "text":
            # Inputs that differ (one ran --impl, another the vnpu) are all named, each as its run did it,
            # so the merged configuration never shows one input's value for all.
            shown = [v if v is not None else str(OPTION[key].default or _ABSENT.get(key, "none")) for v in values]
            options[key] = " + ".join(f"{v} ({plan.run_id})" for v, plan in zip(shown, plans, strict=True))
    for plan, read in zip(plans, typed, strict=True):
        for key, _ in read.malformed:
            if OPTION[key].selection:
                options.setdefault(key, plan.options[key])
    return options


def merge_runs(inputs: Sequence[Path], out_dir: Path) -> MergeOutcome:
    """Merge the runs in `inputs` (run directories or results.jsonl files) into `out_dir`/results.jsonl."""
    loaded: list[_Input] = []
    problems: list[str] = []
    for order, given in enumerate(inputs):
        path = results_file(given)
        run = load_results(path)
        problems.extend(f"{path}: {p}" for p in run.problems)
        loaded.append(_Input(order, path, run, read_records(path)))
    # Oldest first, so that "later wins" everywhere below means "newer wins".
    loaded.sort(key=lambda i: (i.started, i.order))
    _refuse_mixed_configurations(loaded)

    run_ids = [i.run.run_id or str(i.path) for i in loaded]
    devices: dict[str, None] = {}
    scenarios: dict[str, PlannedScenario] = {}
    for item in loaded:
        if item.run.plan is None:
            continue
        devices.update(dict.fromkeys(item.run.plan.devices))
        for entry in item.run.plan.scenarios:
            scenarios.setdefault(entry.id, entry)
    identity: dict[str, str] = {}
    for field in IDENTITY_FIELDS:
        values = [str(getattr(i.run.plan, field)) for i in loaded if i.run.plan is not None]
        identity[field] = _joined(values)
        if len({v for v in values if v}) > 1:
            problems.append(f"the merged runs differ in {field} ({identity[field]}); verdicts may not be comparable")
    started = [i.started for i in loaded if i.started]
    bases = [dict(i.run.plan.claim_basis) if i.run.plan and i.run.plan.claim_basis else None for i in loaded]
    plan_record = Plan(
        schema=RESULTS_SCHEMA,
        run_id=merged_run_id(run_ids),
        started=min(started) if started else "",
        kit_version=identity["kit_version"],
        vocabulary=identity["vocabulary"],
        profile=identity["profile"],
        target=identity["target"],
        devices=tuple(devices),
        scenarios=tuple(scenarios.values()),
        corpus_hash=identity["corpus_hash"],
        model_hash=identity["model_hash"],
        options=_merged_options(loaded),
        claim_basis=bases[0] if bases and all(b == bases[0] for b in bases) else None,
        merged_from=tuple(
            {"run_id": i.run.run_id, "results": str(i.path), "started": i.started, "profile": i.run.plan.profile,
             "target": i.run.plan.target, "devices": list(i.run.plan.devices), "options": dict(i.run.plan.options)}
            for i in loaded
            if i.run.plan is not None
        ),
    )

    device_info: dict[str, dict[str, object]] = {}
    for item in loaded:
        for serial, info in item.run.devices.items():
            previous = device_info.get(serial)
            if previous is not None and previous != dict(info):
                problems.append(f"device {serial}: info differs between runs; the newest ({item.run.run_id}) is used")
            device_info[serial] = dict(info)

    chosen: dict[tuple[str, str], tuple[str, ResultRecord]] = {}
    superseded = 0
    for item in loaded:
        by_line = item.records.by_line()
        for record in item.run.results:
            stored = by_line.get(record.line) if record.recorded and record.line is not None else None
            if not isinstance(stored, ResultRecord):
                continue
            key = (record.device, record.scenario)
            finished = record.finished or ""
            earlier = chosen.get(key)
            if earlier is not None:
                superseded += 1
                if finished < earlier[0]:
                    continue
            chosen[key] = (finished, stored)

    lost = {device: why for item in loaded for device, why in item.run.lost.items()}  # still lost, merged
    lines: list[Record] = [plan_record]
    lines.extend(DeviceRecord(serial, info) for serial, info in device_info.items())
    lines.extend(record for _, record in chosen.values())
    lines.extend(LostRecord(device, None, why) for device, why in lost.items())
    path = output_dir(out_dir) / RESULTS_FILE
    ends = [i.run.end for i in loaded]
    if ends and all(end is not None for end in ends):
        finished_all = max(end.finished for end in ends if end is not None)
        lines.append(EndRecord(finished_all, verdict_counts(r.verdict for _, r in chosen.values()), lost=lost))
    write_records(path, lines)
    return MergeOutcome(
        path=path,
        run_id=plan_record.run_id,
        inputs=tuple(run_ids),
        results=len(chosen),
        superseded=superseded,
        problems=tuple(problems),
    )
