"""`npuconf verify BUNDLE`: check a submission bundle against this checkout (see docs/reports.md)."""

from __future__ import annotations

import json
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from junitparser import xunit2

from reference_model.profiles import PROFILES
from reports import RunResults, load_results
from reports.jsonl import raw_objects
from reports.limits import limit, over
from reports.summary import build_summary

from ..suite import HASHED_PARTS, SCENARIO_ROOT, checkout_hashes
from .bundle import BUNDLE_FILES, BUNDLE_SCHEMA, MANIFEST, BundleUnreadable, device_fingerprints, sha256_hex
from .rejudge import corpus_by_id, rejudge_run


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str  # file, kit, results, coverage, verdict, report
    message: str

    def line(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    bundle: Path
    run_id: str
    results: int
    devices: int
    rejudged: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def read_bundle(bundle: Path) -> dict[str, bytes]:
    """Every regular file of the bundle by name; BundleUnreadable when it is not a readable tar.gz."""
    members: dict[str, bytes] = {}
    member_limit, total_limit, count_limit = (
        limit("bundle_member_bytes"),
        limit("bundle_total_bytes"),
        limit("bundle_members"),
    )
    total = 0
    try:
        with tarfile.open(str(bundle), mode="r:gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > count_limit:
                    raise BundleUnreadable(f"{bundle}: " + over("bundle_members", f"more than {count_limit} members"))
                if not member.isfile():
                    members[f"{member.name} (not a regular file)"] = b""
                    continue
                if member.size > member_limit:
                    raise BundleUnreadable(
                        f"{bundle}: " + over("bundle_member_bytes", f"member {member.name!r} holds {member.size} bytes")
                    )
                total += member.size
                if total > total_limit:
                    raise BundleUnreadable(
                        f"{bundle}: " + over("bundle_total_bytes", f"members hold more than {total_limit} bytes")
                    )
                handle = tar.extractfile(member)  # a file object over the archive: nothing is written to disk
                members[member.name] = handle.read(member.size) if handle is not None else b""
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise BundleUnreadable(
            f"{bundle}: not a readable bundle ({exc}); expected a tar.gz from `npuconf bundle`"
        ) from None
    return members


def _manifest(bundle: Path, members: Mapping[str, bytes]) -> dict[str, Any]:
    if MANIFEST not in members:
        raise BundleUnreadable(f"{bundle}: no {MANIFEST}; expected a tar.gz from `npuconf bundle`")
    try:
        manifest = json.loads(members[MANIFEST].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleUnreadable(f"{bundle}: {MANIFEST} is not JSON ({exc})") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("kind") != "npuconf-bundle"
        or not isinstance(manifest.get("files"), dict)
    ):
        raise BundleUnreadable(f"{bundle}: {MANIFEST} is not an npuconf bundle manifest (kind npuconf-bundle, files)")
    schema = manifest.get("schema")
    if not isinstance(schema, int) or schema > BUNDLE_SCHEMA:
        raise BundleUnreadable(f"{bundle}: bundle schema {schema!r}; this kit reads schema {BUNDLE_SCHEMA}")
    return manifest


def _check_files(manifest: Mapping[str, Any], members: Mapping[str, bytes]) -> list[Problem]:
    problems: list[Problem] = []
    listed: dict[str, object] = manifest["files"]
    for name in BUNDLE_FILES:
        if name not in listed:
            problems.append(Problem("file", f"{name} is not listed in the manifest"))
    for name, expected in sorted(listed.items()):
        if name not in members:
            problems.append(Problem("file", f"{name} is listed in the manifest but missing from the bundle"))
        elif sha256_hex(members[name]) != expected:
            problems.append(
                Problem("file", f"{name}: sha256 {sha256_hex(members[name])} differs from the manifest's {expected}")
            )
    for name in sorted(set(members) - set(listed) - {MANIFEST}):
        problems.append(Problem("file", f"{name} is in the bundle but not listed in the manifest"))
    return problems


def _check_hashes(manifest: Mapping[str, Any]) -> list[Problem]:
    recorded = manifest.get("hashes")
    if not isinstance(recorded, dict):
        return [Problem("kit", "the manifest records no kit hashes")]
    current = checkout_hashes()
    problems: list[Problem] = []
    for part in HASHED_PARTS:
        if recorded.get(part) != current[part]:
            problems.append(
                Problem(
                    "kit",
                    f"{part} hash {str(recorded.get(part))[:16]}… differs from this checkout's {current[part][:16]}…: "
                    f"the bundle was made with another {part}",
                )
            )
    return problems


def _check_coverage(run: RunResults, raw: Mapping[int, Mapping[str, object]]) -> list[Problem]:
    plan = run.plan
    if plan is None:
        return []
    counts: Counter[tuple[str, str]] = Counter()
    for obj in raw.values():
        if obj.get("kind") == "result" and isinstance(obj.get("device"), str) and isinstance(obj.get("scenario"), str):
            counts[(str(obj["device"]), str(obj["scenario"]))] += 1
    problems: list[Problem] = []
    planned = {(d, s.id) for d in plan.devices for s in plan.scenarios}
    for device in plan.devices:
        for scenario in plan.scenarios:
            n = counts[(device, scenario.id)]
            if n == 0:
                problems.append(Problem("coverage", f"{scenario.id} on {device}: planned but missing"))
            elif n > 1:
                problems.append(Problem("coverage", f"{scenario.id} on {device}: recorded {n} times (duplicated)"))
    for device, scenario_id in sorted(set(counts) - planned):
        problems.append(Problem("coverage", f"{scenario_id} on {device}: recorded but not planned"))
    return problems


def _check_verdicts(
    run: RunResults, raw: Mapping[int, Mapping[str, object]], scenario_root: Path
) -> tuple[int, list[Problem]]:
    plan = run.plan
    if plan is None:
        return 0, []
    if plan.profile not in PROFILES:
        return 0, [Problem("verdict", f"profile {plan.profile!r} is unknown to this kit; verdicts not re-derived")]
    corpus, catalogue = corpus_by_id(scenario_root)
    rejudged = rejudge_run(run, raw, plan.profile, corpus, catalogue, waivers=None)
    problems = [
        Problem("verdict", f"{c.scenario} on {c.device}: stored {c.before}, recomputed {c.after}")
        for c in rejudged.changes
    ]
    problems.extend(
        Problem("verdict", f"{scenario} on {device}: scenario not in this corpus; verdict not re-derived")
        for device, scenario in rejudged.missing_scenarios
    )
    problems.extend(Problem("verdict", note) for note in rejudged.notes)
    return rejudged.judged, problems


def _check_reports(run: RunResults, members: Mapping[str, bytes], workdir: Path) -> list[Problem]:
    problems: list[Problem] = []
    if "summary.json" in members:
        try:
            stored = json.loads(members["summary.json"].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            stored = None
        expected = json.loads(json.dumps(build_summary(run), ensure_ascii=False))
        if not isinstance(stored, dict):
            problems.append(Problem("report", "summary.json is not a JSON object"))
        else:
            for key in ("answer", "exit_code", "counts", "devices", "clauses", "failures"):
                if stored.get(key) != expected.get(key):
                    problems.append(Problem("report", f"summary.json {key} does not match results.jsonl"))
    if "junit.xml" in members:
        junit_path = workdir / "junit.xml"
        junit_path.write_bytes(members["junit.xml"])
        try:
            xml = xunit2.JUnitXml.fromfile(str(junit_path))
            found = {
                (suite.name, case.name): {p.name: p.value for p in case.properties()}.get("verdict")  # type: ignore[attr-defined]
                for suite in xml
                for case in suite
            }
        except Exception as exc:
            return [*problems, Problem("report", f"junit.xml does not parse ({type(exc).__name__}: {exc})")]
        expected_cases = {(r.device, r.scenario): str(r.verdict) for r in run.results}
        for case_key in sorted(set(expected_cases) | set(found)):
            if found.get(case_key) != expected_cases.get(case_key):
                device, scenario = case_key
                problems.append(
                    Problem(
                        "report",
                        f"junit.xml {scenario} on {device}: verdict {found.get(case_key)}, results.jsonl "
                        f"{expected_cases.get(case_key)}",
                    )
                )
    return problems


def verify_bundle(bundle: Path, scenario_root: Path = SCENARIO_ROOT) -> VerifyReport:
    members = read_bundle(bundle)
    manifest = _manifest(bundle, members)
    problems = _check_files(manifest, members)
    problems.extend(_check_hashes(manifest))
    if "results.jsonl" not in members:
        raise BundleUnreadable(f"{bundle}: no results.jsonl in the bundle")
    with tempfile.TemporaryDirectory(prefix="npuconf-verify-") as tmp:
        workdir = Path(tmp)
        results = workdir / "results.jsonl"
        results.write_bytes(members["results.jsonl"])
        run = load_results(results)
        raw = raw_objects(results)
        problems.extend(Problem("results", p) for p in run.problems)
        if run.plan is None:
            problems.append(Problem("results", "results.jsonl has no plan record"))
        elif manifest.get("run_id") != run.plan.run_id:
            problems.append(
                Problem("results", f"manifest run id {manifest.get('run_id')!r} is not the plan's {run.plan.run_id!r}")
            )
        devices = manifest.get("devices")
        if isinstance(devices, dict) and devices != device_fingerprints(run):
            problems.append(Problem("results", "the manifest's device fingerprints differ from results.jsonl"))
        problems.extend(_check_coverage(run, raw))
        rejudged, verdict_problems = _check_verdicts(run, raw, scenario_root)
        problems.extend(verdict_problems)
        problems.extend(_check_reports(run, members, workdir))
    return VerifyReport(
        bundle=bundle,
        run_id=run.run_id,
        results=sum(1 for r in run.results if r.recorded),
        devices=len(run.device_serials),
        rejudged=rejudged,
        problems=tuple(problems),
    )
