"""`npuconf verify BUNDLE`: check a submission bundle against this checkout (see docs/reports.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import functools
import hashlib
import html
import json
import os
import re
import stat
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Final

import markupsafe
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from floor.limits import limit, over
from floor.safe_io import DISK_ERRNOS, OutputFailed, console_text
from reference_model.profiles import PROFILES
from reference_model.scenario import Scenario
from reference_model.verdicts import Verdict
from reference_model.vocabulary import VOCABULARY_HASH
from reference_model.waivers import Waiver
from reports.answers.atlas import Atlas, run_atlas
from reports.answers.claim import Claim, ClaimLevel, claim_of, problems_of
from reports.recorded.outputs import ATLAS_FILE, HTML_FILE, JUNIT_FILE, RESULTS_FILE, SUMMARY_FILE
from reports.recorded.plan_filters import filters_of
from reports.recorded.plan_options import PlanOptions, read_plan_options
from reports.recorded.records import EndRecord, LostRecord, Plan, Records, ResultRecord, ResumeRecord, parse_records
from reports.recorded.results import ResultsUnreadable, RunResults, load_results
from reports.recorded.run_options import npuconf_command, portable_command
from reports.renderers.atlas_json import atlas_bytes
from reports.renderers.html import html_chunks
from reports.renderers.junit import junit_chunks
from reports.renderers.summary import summary_chunks
from reports.store.runs import parse_date

from .. import KIT_VERSION
from ..run import TARGETS, Judging, pointer_bits
from ..suite import (
    HASHED_PARTS,
    SCENARIO_ROOT,
    check_waiver_ids,
    checkout_tree_hashes,
    claim_basis,
    corpus_hash,
    load_catalogue,
    load_waiver_file,
    model_hash,
    waivers_as_of,
)
from . import signing
from .bundle import (
    BUNDLE_FILES,
    BUNDLE_SCHEMA,
    LATER_FILES,
    MANIFEST,
    BundleUnreadable,
    device_fingerprints,
    sha256_hex,
)
from .recorded import decide_record, recorded_devices
from .rejudge import corpus_by_id


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str  # file, kit, results, coverage, verdict, report
    message: str

    def line(self) -> str:
        return f"{self.kind}: {self.message}"


# Problems kept per check: a rejected bundle is named by its first problems, and a bundle of a hundred
# thousand edited records must not make verify hold a hundred thousand messages.
PROBLEMS_KEPT: Final = 200


class _Capped(list[Problem]):
    """A check's problems, at most PROBLEMS_KEPT of them; the rest are only counted."""

    dropped = 0

    def append(self, problem: Problem) -> None:
        if len(self) < PROBLEMS_KEPT:
            super().append(problem)
        else:
            self.dropped += 1


@dataclass(frozen=True, slots=True)
class VerifyReport:
    bundle: Path
    run_id: str
    results: int
    devices: int
    rejudged: int
    problems: tuple[Problem, ...]
    claim: Claim
    fingerprints: tuple[tuple[str, str | None], ...] = ()
    # (name, the run's value, this checkout's): the corpus hash and model hash the plan and reports show
    run_hashes: tuple[tuple[str, str, str], ...] = ()
    tree_hashes: tuple[tuple[str, str], ...] = ()  # the manifest's: part -> tree hash of the kit that bundled
    signer: str | None = None  # the key a manifest.sig names (checked only with --trusted-key)
    signature_checked: bool = False
    waivers: str | None = None
    narrow_devices: tuple[str, ...] = ()  # devices whose recorded ABI is 32-bit (their word, not checked)
    pointer_64_only: int = 0  # clauses only 64-bit pointers exercise, not required of those devices
    unchecked: tuple[str, ...] = ()  # the fields a verified answer rests on that no check reaches (UNCHECKED)

    @property
    def ok(self) -> bool:
        """Intact: every file, hash and verdict checks out (the claim may still be no conformance claim)."""
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0 a verified conformance claim, 1 the bundle does not verify, 2 verified but not a claim."""
        if not self.ok:
            return 1
        return 0 if self.claim.is_claim else 2

    def reason(self) -> str:
        """The one-line answer; a verified one ends with what it rests on unchecked (`unchecked`)."""
        if self.problems:
            return f"bundle rejected: {self.problems[0].line()}"
        if self.claim.level is ClaimLevel.PARTIAL:  # no claim, and none of a device: nothing rests on the records
            return f"bundle verifies; {self.claim.headline}"
        if not self.claim.is_claim:
            return (
                f"bundle verifies, but it is not a conformance claim: {self.claim.headline}{self._narrow()}"
                f"{self._unchecked()}"
            )
        return f"bundle verifies: {self.claim.headline}{self._narrow()}{self._unchecked()}"

    def _unchecked(self) -> str:
        return f"; on the submitter's word: {', '.join(self.unchecked)}" if self.unchecked else ""

    def _narrow(self) -> str:
        if not self.narrow_devices:
            return ""
        shown = ", ".join(self.narrow_devices[:3]) + (", ..." if len(self.narrow_devices) > 3 else "")
        return (
            f" for a claimed 32-bit ABI on {shown} ({self.pointer_64_only} clauses needing 64-bit pointers "
            "not required; the ABI is the device record's word)"
        )


# Members verify keeps in memory (each at most its limit): the manifest and its signature are small JSON,
# results.jsonl is bounded by results_bytes. Every other member is written to a private scratch directory
# as it is read (its digest taken on the way) and compared from there piece by piece: what a bundle
# holds is never in memory whole, whatever its size.
KEPT: Final = frozenset({MANIFEST, signing.SIGNATURE, RESULTS_FILE})
KEPT_SMALL_BYTES: Final = 4 << 20  # the manifest and its signature
HEAD_BYTES: Final = 1 << 20  # what is kept of a spilled member's start (report.html names its results there)
PIECE_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a bundle: its digest and size, and its bytes (`data`, members in KEPT) or the scratch
    file holding them (`spilled`), with their first HEAD_BYTES (`head`)."""

    digest: str
    size: int
    data: bytes | None = None
    spilled: Path | None = None
    head: bytes = b""

    def pieces(self) -> Iterator[bytes]:
        """The member's bytes in pieces of at most PIECE_BYTES."""
        if self.data is not None:
            yield from (self.data[i : i + PIECE_BYTES] for i in range(0, len(self.data), PIECE_BYTES))
            return
        if self.spilled is None:
            return
        with self.spilled.open("rb") as handle:
            while piece := handle.read(PIECE_BYTES):
                yield piece


_NOTHING: Final = Member(sha256_hex(b""), 0, b"")


def read_bundle(bundle: Path, scratch: Path) -> dict[str, Member]:
    """Every regular file of the bundle by name, the large ones written to `scratch` (a private directory
    the caller made); BundleUnreadable when it is not a readable tar.gz or past a limit."""
    members: dict[str, Member] = {}
    member_limit, total_limit, count_limit = (
        limit("bundle_member_bytes"),
        limit("bundle_total_bytes"),
        limit("bundle_members"),
    )
    total = 0
    try:
        with _open_regular(bundle) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > count_limit:
                    raise BundleUnreadable(f"{bundle}: " + over("bundle_members", f"more than {count_limit} members"))
                if not member.isfile():
                    members[f"{member.name} (not a regular file)"] = _NOTHING
                    continue
                if member.name in members:  # `tar x` extracts the last copy, verify would read another
                    members[f"{member.name} (a second member of that name)"] = _NOTHING
                    continue
                if member.size > member_limit:
                    raise BundleUnreadable(
                        f"{bundle}: " + over("bundle_member_bytes", f"member {member.name!r} holds {member.size} bytes")
                    )
                if member.name == RESULTS_FILE and member.size > limit("results_bytes"):
                    raise BundleUnreadable(
                        f"{bundle}: member results.jsonl: "
                        + over("results_bytes", f"it holds {member.size} bytes")
                    )
                if member.name in KEPT - {RESULTS_FILE} and member.size > KEPT_SMALL_BYTES:
                    raise BundleUnreadable(
                        f"{bundle}: member {member.name}: it holds {member.size} bytes; a bundle's is at most "
                        f"{KEPT_SMALL_BYTES}"
                    )
                total += member.size
                if total > total_limit:
                    raise BundleUnreadable(
                        f"{bundle}: " + over("bundle_total_bytes", f"members hold more than {total_limit} bytes")
                    )
                handle = tar.extractfile(member)  # a file object over the archive
                if handle is None:
                    members[member.name] = _NOTHING
                elif member.name in KEPT:
                    data = handle.read(member.size)
                    members[member.name] = Member(sha256_hex(data), len(data), data=data)
                else:
                    members[member.name] = _spill(handle, scratch / f"member-{count}")
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise OutputFailed(scratch, exc) from None
        why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else str(exc)
        hint = f" (for a run directory: `{npuconf_command('bundle', str(bundle))}` first)" if bundle.is_dir() else ""
        raise BundleUnreadable(
            f"{bundle}: not a readable bundle ({why}); expected a tar.gz from `npuconf bundle`{hint}"
        ) from None
    return members


def _spill(handle: IO[bytes], path: Path) -> Member:
    """A member copied to `path` piece by piece, hashed on the way, its start kept."""
    digest = hashlib.sha256()
    head = bytearray()
    size = 0
    with path.open("xb") as out:
        while piece := handle.read(PIECE_BYTES):
            digest.update(piece)
            if len(head) < HEAD_BYTES:
                head += piece[: HEAD_BYTES - len(head)]
            size += len(piece)
            out.write(piece)
    return Member(digest.hexdigest(), size, spilled=path, head=bytes(head))


def _open_regular(bundle: Path) -> BinaryIO:
    """The bundle opened for reading without blocking: a FIFO, a device or a directory is refused (OSError
    EINVAL, said as "not a readable bundle") before a byte is read, never waited on or read without end."""
    fd = os.open(bundle, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise OSError(errno.EINVAL, "not a regular file")
    return handle


def _manifest(bundle: Path, members: Mapping[str, Member]) -> dict[str, Any]:
    if MANIFEST not in members:
        raise BundleUnreadable(f"{bundle}: no {MANIFEST}; expected a tar.gz from `npuconf bundle`")
    try:
        manifest = json.loads((members[MANIFEST].data or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: also the int-string limit
        raise BundleUnreadable(f"{bundle}: {MANIFEST} is not JSON ({str(exc)[:200]})") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("kind") != "npuconf-bundle"
        or not isinstance(manifest.get("files"), dict)
    ):
        raise BundleUnreadable(f"{bundle}: {MANIFEST} is not an npuconf bundle manifest (kind npuconf-bundle, files)")
    schema = manifest.get("schema")
    if not isinstance(schema, int) or schema > BUNDLE_SCHEMA:
        raise BundleUnreadable(f"{bundle}: bundle schema {schema!r}; this kit reads schemas 1 to {BUNDLE_SCHEMA}")
    return manifest


# The only member names a bundle has: `./summary.json` beside `summary.json` is another name to verify
# but the same file to `tar x`, which would extract whichever copy comes last.
EXACT_NAMES: Final = frozenset({*BUNDLE_FILES, *LATER_FILES, MANIFEST, signing.SIGNATURE})


def _check_names(manifest: Mapping[str, Any], members: Mapping[str, Member]) -> list[Problem]:
    problems = [
        Problem("file", f"member {name!r} is not one of the bundle's names ({', '.join(sorted(EXACT_NAMES))})")
        for name in sorted(set(members) - EXACT_NAMES)
    ]
    problems.extend(
        Problem("file", f"the manifest lists {name!r}, not one of the bundle's names")
        for name in sorted(set(manifest["files"]) - EXACT_NAMES)
    )
    return problems


def _check_files(manifest: Mapping[str, Any], members: Mapping[str, Member]) -> list[Problem]:
    problems: list[Problem] = []
    listed: dict[str, object] = manifest["files"]
    for name in BUNDLE_FILES:
        if name not in listed:
            problems.append(Problem("file", f"{name} is not listed in the manifest"))
    for name, expected in sorted(listed.items()):
        if name not in members:
            problems.append(Problem("file", f"{name} is listed in the manifest but missing from the bundle"))
        elif members[name].digest != expected:
            problems.append(
                Problem("file", f"{name}: sha256 {members[name].digest} differs from the manifest's {expected}")
            )
    for name in sorted(set(members) - set(listed) - {MANIFEST}):
        problems.append(Problem("file", f"{name} is in the bundle but not listed in the manifest"))
    return problems


# Bundle schema 1 recorded the tree hashes as `hashes`, with the suite part named `corpus`.
_SCHEMA_1_PARTS: Final = {"corpus": "suite"}


def recorded_tree_hashes(manifest: Mapping[str, Any]) -> dict[str, object] | None:
    """The manifest's tree hashes by part, from `tree_hashes` or a schema-1 bundle's `hashes`."""
    recorded = manifest.get("tree_hashes")
    if isinstance(recorded, dict):
        return dict(recorded)
    old = manifest.get("hashes")
    if isinstance(old, dict):
        return {_SCHEMA_1_PARTS.get(str(part), str(part)): value for part, value in old.items()}
    return None


def _check_tree_hashes(manifest: Mapping[str, Any]) -> list[Problem]:
    recorded = recorded_tree_hashes(manifest)
    if recorded is None:
        return [Problem("kit", "the manifest records no tree hashes of the kit")]
    current = checkout_tree_hashes()
    problems: list[Problem] = []
    for part in HASHED_PARTS:
        if recorded.get(part) != current[part]:
            problems.append(
                Problem(
                    "kit",
                    f"{part} tree hash {str(recorded.get(part))[:16]}… differs from this checkout's "
                    f"{current[part][:16]}…: the bundle was made with another {part}",
                )
            )
    return problems


def _check_coverage(run: RunResults, records: Records) -> list[Problem]:
    """Every planned scenario recorded exactly once per device, or in a sharded run once per build (group)."""
    plan = run.plan
    if plan is None:
        return []
    counts: Counter[tuple[str, str]] = Counter((r.device, r.scenario) for r in records.results)
    problems = _Capped()
    if read_plan_options(plan.options).shard is not plan.shard:
        problems.append(
            Problem("plan", f"the plan says shard {str(plan.shard).lower()} but its options say "
                            f"{plan.options.get('shard')!r}: the run was not recorded so")
        )
    units = _sharded_units(run, problems) if plan.shard else {device: (device,) for device in plan.devices}
    for unit, devices in units.items():
        where = unit if len(devices) == 1 else f"build {unit} ({', '.join(devices)})"
        for scenario in plan.scenarios:
            n = sum(counts[(device, scenario.id)] for device in devices)
            if n == 0:
                problems.append(Problem("coverage", f"{scenario.id} on {where}: planned but missing"))
            elif n > 1:
                problems.append(Problem("coverage", f"{scenario.id} on {where}: recorded {n} times (duplicated)"))
    planned = {(d, s.id) for d in plan.devices for s in plan.scenarios}
    for device, scenario_id in sorted(set(counts) - planned):
        problems.append(Problem("coverage", f"{scenario_id} on {device}: recorded but not planned"))
    return problems


def _check_cited_clauses(records: Records, corpus: Mapping[str, Scenario]) -> list[Problem]:
    """A record of a released scenario cites exactly that scenario's clauses, as its line says them (the
    claim never reads them from the record, but a record that says otherwise was edited)."""
    problems = _Capped()
    for record in records.results:
        scenario = corpus.get(record.scenario)
        if scenario is not None and record.clauses != tuple(scenario.clauses):
            problems.append(
                Problem("results", f"{scenario.id} on {record.device}: its record cites other clauses than "
                                   "the kit's scenario does")
            )
    return problems


def _sharded_units(run: RunResults, problems: list[Problem]) -> dict[str, tuple[str, ...]]:
    """A sharded run's groups (group -> devices), each checked to be its devices' recorded build: a group
    is what lets one device's result stand for another's, so it must not be a label anyone could choose."""
    assert run.plan is not None
    fingerprints = device_fingerprints(run)
    members: dict[str, list[str]] = {}
    for device in run.plan.devices:
        group = run.groups.get(device, f"device:{device}")
        fingerprint = fingerprints.get(device)
        if group != (fingerprint or f"device:{device}"):
            problems.append(
                Problem("plan", f"device {device} is recorded in group {group!r} but its build fingerprint is "
                                f"{fingerprint!r}: a shard group is the devices of one build")
            )
            group = f"device:{device}"
        members.setdefault(group, []).append(device)
    return {group: tuple(devices) for group, devices in members.items()}


# The run's local date may be a day behind its UTC start west of Greenwich, never more (UTC-12).
_WESTMOST: Final = dt.timedelta(hours=12)


def _check_waivers_as_of(options: PlanOptions, started: str | None) -> list[Problem]:
    """`options.waivers_as_of` (the day the run judged waivers on) is no earlier than the run's start: an
    earlier day would revive waivers that had expired when the run ran. (One that is not a date is a
    malformed option, named by the results.)"""
    as_of = options.waivers_as_of
    if as_of is None:
        return []
    try:
        start = dt.datetime.fromisoformat(started) if isinstance(started, str) else None
    except ValueError:
        start = None
    if start is None:
        problem = f"plan field 'started' is {started!r}, not a date: options.waivers_as_of cannot be checked"
        return [Problem("plan", problem)]
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.UTC)
    earliest = (start.astimezone(dt.UTC) - _WESTMOST).date()
    if as_of < earliest:
        return [
            Problem(
                "plan",
                f"options.waivers_as_of {as_of} is earlier than the run's start {started}: waivers would be "
                "judged as of a day before the run",
            )
        ]
    return []


def _kit_problems(run: RunResults, corpus: Mapping[str, Scenario], basis: Mapping[str, object]) -> list[Problem]:
    """The plan against this kit: its claim basis, and the scenario list when it names the released corpus."""
    plan = run.plan
    if plan is None:
        return []
    problems: list[Problem] = []
    recorded = plan.claim_basis
    if recorded is None:
        problems.append(Problem("plan", "the plan records no claim basis (an older kit): no claim can be verified"))
    else:
        for key in sorted(basis):
            if recorded.get(key) != basis[key]:
                problems.append(Problem("plan", f"the plan's claim basis {key} is not this kit's"))
    options = read_plan_options(plan.options)
    problems.extend(_check_waivers_as_of(options, plan.started))
    filters = filters_of(options)
    problems.extend(Problem("plan", message) for message in filters.malformed)
    if plan.corpus_hash == basis["kit_corpus_hash"]:
        planned = {s.id for s in plan.scenarios}
        if filters.narrowed:
            return problems
        absent = sorted(set(corpus) - planned)
        if absent:
            shown = ", ".join(absent[:3]) + (", ..." if len(absent) > 3 else "")
            problems.append(
                Problem(
                    "plan",
                    f"the plan names this kit's full corpus but lacks {len(absent)} of its {len(corpus)} "
                    f"scenarios ({shown}) and records no filter",
                )
            )
    return problems


def _check_verdicts(
    run: RunResults, corpus: Mapping[str, Scenario], catalogue: Mapping[str, str], waivers: Sequence[Waiver]
) -> tuple[int, list[Problem]]:
    """Every stored verdict decided again (host.run.decide) from the record's own evidence."""
    plan = run.plan
    if plan is None:
        return 0, []
    if plan.profile not in PROFILES:
        return 0, [Problem("verdict", f"profile {plan.profile!r} is unknown to this kit; verdicts not re-derived")]
    devices = recorded_devices(run)
    problems = _Capped()
    for message in devices.problems:
        problems.append(Problem("device", message))
    # Waivers are applied as of the day the run applied them, not the day of the check.
    as_of = waivers_as_of(plan.options, plan.started)
    if waivers and as_of is None:
        problems.append(Problem("verdict", "the plan records no date its waivers were applied on; judged as of today"))
    judging = Judging(catalogue, plan.profile, waivers, as_of)
    derived = 0
    for record in run.results:
        if not record.recorded:
            continue
        scenario = corpus.get(record.scenario)
        if scenario is None:
            problems.append(Problem("verdict", f"{record.scenario} on {record.device}: not in this kit's corpus"))
            continue
        device = devices.facts.get(record.device)
        if device is None:
            problems.append(Problem("verdict", f"{record.scenario} on {record.device}: no device record"))
            continue
        decision = decide_record(record, scenario, device, run.devices.get(record.device, {}), judging)
        derived += 1
        where = f"{record.scenario} on {record.device}"
        if record.verdict is Verdict.PASS and decision.allocations_refused != record.allocations_refused:
            problems.append(
                Problem(
                    "verdict",
                    f"{where}: allocations_refused is {str(record.allocations_refused).lower()}, "
                    "its trace says otherwise",
                )
            )
        if record.verdict is decision.verdict and record.demonstrated != decision.outcome.demonstrated:
            problems.append(
                Problem("verdict", f"{where}: the record claims other demonstrated clauses than its trace shows")
            )
        if record.verdict is not decision.verdict:
            why = decision.basis
            if record.verdict is Verdict.NOT_APPLICABLE:
                why = "its requirements hold on this device and its trace shows no missing API function"
            if record.verdict is Verdict.WAIVED:
                why += "; waivers come only from `verify --waivers`, never from the bundle"
            stored = f"stored {record.verdict}, re-derived {decision.verdict}"
            problems.append(Problem("verdict", f"{where}: {stored} ({why})"))
    return derived, problems


# The reports a bundle ships, each rendered again from its results.jsonl and compared byte for byte: a
# junit.xml showing no failure, a report.html saying "conformant", a summary.json of another answer or an
# atlas.json of other answers, for results that give another, are edits (the kit renders them
# deterministically; the tree hashes say it is this kit's rendering code). atlas.json is optional: bundles
# made before it travelled have none.
RENDERED: Final = (SUMMARY_FILE, JUNIT_FILE, HTML_FILE, ATLAS_FILE)
_RESULTS_ROW: Final = re.compile(rb'<tr><td>results</td><td class="mono">([^<]{0,4096})</td></tr>')


def _rendered(name: str, run: RunResults, submitted: Member, atlas: Callable[[], Atlas]) -> Iterable[bytes]:
    """The member `name` as this kit renders it from `run`, in pieces (a large page is never held whole);
    `atlas`: the run's devices side by side, which report.html and atlas.json both show."""
    if name == SUMMARY_FILE:
        return summary_chunks(run)
    if name == JUNIT_FILE:
        return junit_chunks(run)
    if name == ATLAS_FILE:
        return (atlas_bytes(run, atlas()),)
    # report.html names the results file it was rendered from (its absolute path when bundled): rendered
    # again with that name, every other byte must be the same
    shown = _RESULTS_ROW.search(submitted.head)
    path = Path(html.unescape(shown.group(1).decode("utf-8", errors="replace"))) if shown else run.path
    return html_chunks(dataclasses.replace(run, path=path), atlas())


# The commands a report prints name where the kit that rendered it is installed (reports/recorded/run_options.py
# npuconf_words: a bundle made by the same kit installed elsewhere names another path): in both the member
# and the rendering, each such command is compared in its portable form (`portable_command`), every other
# byte as it is. A command is found where the kit prints one: a failure's `"replay": "..."` in
# summary.json; `<code>...</code>` in report.html (the replay lines, the errata command). junit.xml and
# atlas.json print none.
_COMMAND_MAX: Final = 64 * 1024  # a longer span is compared as it is


_JSON_STRING_BODY: Final = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _json_string_end(data: bytes, start: int, limit: int) -> int | None:
    """Where the JSON string whose body starts at `start` ends (its closing quote), if before `limit`."""
    found = _JSON_STRING_BODY.match(data, start, limit)
    return found.end() - 1 if found else None


def _json_command(body: bytes) -> bytes:
    try:
        text = json.loads(b'"' + body + b'"')
    except ValueError:
        return body
    canonical = json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", errors="replace")
    if not isinstance(text, str) or canonical != body:  # only the kit's own spelling is made portable
        return body
    return json.dumps(portable_command(text), ensure_ascii=False)[1:-1].encode("utf-8", errors="replace")


def _html_command(body: bytes) -> bytes:
    try:
        text = html.unescape(body.decode("utf-8"))
    except UnicodeDecodeError:
        return body
    if str(markupsafe.escape(text)).encode() != body:  # only the kit's own spelling is made portable
        return body
    return str(markupsafe.escape(str(portable_command(text)))).encode()


def _code_end(data: bytes, start: int, limit: int) -> int | None:
    """Where the `<code>` element whose text starts at `start` closes, if before `limit`."""
    end = data.find(b"</code>", start, limit)
    return end if end >= 0 else None


# Per member: what opens a span holding a command, where the span ends, and its portable form.
_SPANS: Final[dict[str, tuple[bytes, Callable[[bytes, int, int], int | None], Callable[[bytes], bytes]]]] = {
    SUMMARY_FILE: (b'"replay": "', _json_string_end, _json_command),
    HTML_FILE: (b"<code>", _code_end, _html_command),
}


def _portable(name: str, pieces: Iterable[bytes]) -> Iterator[bytes]:
    """`pieces` of the member `name` with each command it prints in its portable form; the same bytes, in
    the same places, whatever pieces they come in (a comparison cuts the two sides differently). A span
    is decided once the bytes up to its end, or to _COMMAND_MAX past its opening, are there."""
    span = _SPANS.get(name)
    if span is None:
        yield from pieces
        return
    opening, ending, portable = span
    buffer = b""
    for piece in pieces:
        buffer += piece
        out: list[bytes] = []
        at = 0
        while True:
            found = buffer.find(opening, at)
            if found < 0:  # all but what could be the start of an opening cut by the piece's end
                cut = max(at, len(buffer) - (len(opening) - 1))
                out.append(buffer[at:cut])
                at = cut
                break
            start = found + len(opening)
            limit = start + _COMMAND_MAX + 1
            end = ending(buffer, start, limit)
            if end is None and len(buffer) < limit:  # the span may still end in the next piece
                out.append(buffer[at:found])
                at = found
                break
            out.append(buffer[at:start])
            if end is None:  # too long to be a command the kit printed: compared as it is
                at = start
            else:
                out.append(portable(buffer[start:end]))
                at = end
        if done := b"".join(out):  # never an empty piece: a reader takes one for the member's end
            yield done
        buffer = buffer[at:]
    if buffer:
        yield buffer


_CONTEXT: Final = 240  # bytes kept of a rendering before and after where it parts from the member


def _difference(submitted: Iterable[bytes], rendered: Iterable[bytes]) -> str | None:
    """None when the pieces `rendered` make exactly the pieces `submitted`; else where they part (the line
    number and the two lines there, cut), found piece by piece: neither is ever held whole."""
    theirs = _Stream(iter(submitted))
    before_ours = b""
    after_ours = b""
    parted = False
    pieces = iter(rendered)
    for piece in pieces:
        part = theirs.take(len(piece))
        if part == piece:
            before_ours = (before_ours + piece)[-_CONTEXT:]
            continue
        at = next((i for i, (a, b) in enumerate(zip(part, piece, strict=False)) if a != b), len(part))
        theirs.give_back(part[at:])
        before_ours = (before_ours + piece[:at])[-_CONTEXT:]
        after_ours = piece[at : at + _CONTEXT]
        for more in pieces:
            if len(after_ours) >= _CONTEXT:
                break
            after_ours += more[: _CONTEXT - len(after_ours)]
        parted = True
        break
    if not parted:
        rest = theirs.take(1)
        if not rest:
            return None
        theirs.give_back(rest)
    before_theirs, line = theirs.before, theirs.newlines + 1
    after_theirs = theirs.take(_CONTEXT)

    def shown(head: bytes, tail: bytes) -> str:
        text = (head[head.rfind(b"\n") + 1 :] + tail.split(b"\n", 1)[0]).decode("utf-8", errors="replace").strip()
        return console_text(text[:100] + ("…" if len(text) > 100 else ""))

    return (
        f"line {line}: {shown(before_theirs, after_theirs)!r} in the bundle, "
        f"{shown(before_ours, after_ours)!r} rendered"
    )


class _Stream:
    """A member's bytes taken in the sizes a comparison asks, remembering the last _CONTEXT bytes taken and
    how many lines they completed."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._buffer = b""
        self.before = b""
        self.newlines = 0
        self._last = (b"", b"")  # `before` as it was ahead of the last take, and what that take returned

    def take(self, size: int) -> bytes:
        while len(self._buffer) < size:
            piece = next(self._pieces, b"")
            if not piece:
                break
            self._buffer += piece
        taken, self._buffer = self._buffer[:size], self._buffer[size:]
        self._last = (self.before, taken)
        self.before = (self.before + taken)[-_CONTEXT:]
        self.newlines += taken.count(b"\n")
        return taken

    def give_back(self, data: bytes) -> None:
        """Un-take the last `data` taken (it must be the end of what `take` returned last)."""
        if data:
            self._buffer = data + self._buffer
            self.newlines -= data.count(b"\n")
            before, taken = self._last
            self.before = (before + taken[: len(taken) - len(data)])[-_CONTEXT:]


def _check_reports(run: RunResults, members: Mapping[str, Member]) -> list[Problem]:
    problems: list[Problem] = []
    atlas = functools.cache(lambda: run_atlas(run))  # computed once, for report.html and atlas.json
    for name in RENDERED:
        submitted = members.get(name)
        if submitted is None:
            continue  # named by the file checks
        rendered = _rendered(name, run, submitted, atlas)
        parted = _difference(_portable(name, submitted.pieces()), _portable(name, rendered))
        if parted is not None:
            problems.append(Problem("report", f"{name} is not what this kit renders from results.jsonl ({parted})"))
    return problems


def _check_identity(run: RunResults, manifest: Mapping[str, Any]) -> list[Problem]:
    """The plan's and the devices' fields this kit can know: its version and vocabulary (the tree hashes say
    the bundle is this kit's, which writes exactly these), a target it has, and the manifest's copy of them."""
    plan = run.plan
    if plan is None:
        return []
    problems: list[Problem] = []
    expected = {"kit_version": KIT_VERSION, "vocabulary": VOCABULARY_HASH}
    for name, value in expected.items():
        if getattr(plan, name) != value:
            problems.append(Problem("plan", f"the plan's {name} {getattr(plan, name)!r} is not this kit's {value!r}"))
    if plan.target not in TARGETS:
        known = ", ".join(TARGETS)
        problems.append(Problem("plan", f"the plan's target {plan.target!r} is none of this kit's ({known})"))
    copied = manifest.get("plan")
    if isinstance(copied, dict):
        for name in ("kit_version", "vocabulary", "model_hash", "corpus_hash"):
            if copied.get(name) != getattr(plan, name):
                problems.append(Problem("plan", f"the manifest's plan {name} differs from results.jsonl's"))
    if manifest.get("kit_version") != KIT_VERSION:
        problems.append(Problem("kit", f"the manifest's kit_version {manifest.get('kit_version')!r} is not "
                                       f"this kit's {KIT_VERSION!r}"))
    for serial, info in run.devices.items():
        if "kit_version" in info and info["kit_version"] != KIT_VERSION:
            problems.append(Problem("device", f"{serial}: device record kit_version {info['kit_version']!r} is "
                                              f"not this kit's {KIT_VERSION!r}"))
    return problems


def _check_lost(run: RunResults, records: Records) -> list[Problem]:
    """A device a sharded run lost is said twice: by its `lost` record and by the end record that follows;
    the two must agree, so that removing either one is seen (and the claim reads both)."""
    plan = run.plan
    if plan is None or not plan.shard:
        return []
    said: dict[str, str] = {}
    end: EndRecord | None = None
    for _, record in records.lines:
        if isinstance(record, ResumeRecord):
            said, end = {}, None
        elif isinstance(record, LostRecord):
            said.setdefault(record.device, record.reason)
            end = None
        elif isinstance(record, EndRecord):
            end = record
        elif isinstance(record, ResultRecord):
            end = None
    if end is None:
        return [Problem("results", "a sharded run's results.jsonl does not end with its end record (which names "
                                   "the devices it lost): the run did not finish, or the record was removed")]
    if set(said) != set(end.lost):
        shown = ", ".join(sorted(set(said) ^ set(end.lost))[:3])
        return [Problem("results", f"the lost devices of the `lost` records and of the end record differ ({shown}): "
                                   "a record of a lost device was removed or added")]
    return []


# Wall-clock dates of one host may disagree by this much (clock steps, the time a record takes to write).
_DATE_SLACK: Final = dt.timedelta(seconds=60)
# A run's first result comes within this of its start (or a resume's): preparing devices takes minutes.
_FIRST_RESULT_WITHIN: Final = dt.timedelta(hours=6)
# Dates later than this past the verifier's clock are from the future.
_FUTURE: Final = dt.timedelta(minutes=10)


def _check_dates(run: RunResults, records: Records, manifest: Mapping[str, Any]) -> list[Problem]:
    """The run's dates against each other and the traces' own clock: each start (the plan's, a resume's)
    comes before its results and within _FIRST_RESULT_WITHIN of the first; the results' dates move as
    their traces' monotonic timestamps do, device by device; the end record follows them, the bundle
    follows the end, and nothing is in the future. A `started` moved back alone (to judge waivers as of
    an earlier day) disagrees with the results; moving every date back together is what a bundle cannot
    show, and the answer line says the dates are the bundle's own."""
    problems: list[Problem] = []
    now = dt.datetime.now(dt.UTC)
    start: dt.datetime | None = None
    first_of_segment = True
    latest: dt.datetime | None = None
    clock: dict[str, tuple[dt.datetime, int, str]] = {}  # device -> (finished, trace exit ns, scenario)

    def bad(message: str) -> None:
        if len(problems) < 3:
            problems.append(Problem("dates", message))

    for _, record in records.lines:
        if isinstance(record, Plan | ResumeRecord):
            what = "the plan" if isinstance(record, Plan) else "a resume record"
            start = parse_date(record.started)
            if start is None:
                bad(f"{what} says started {record.started!r}, not a date")
            elif latest is not None and start < latest - _DATE_SLACK:
                bad(f"{what} says started {record.started}, before results recorded ahead of it")
            first_of_segment, clock = True, {}
        elif isinstance(record, ResultRecord):
            finished = parse_date(record.finished)
            if finished is None or start is None:
                continue
            where = f"{record.scenario} on {record.device}"
            begun = finished - dt.timedelta(milliseconds=max(0.0, record.duration_ms or 0.0))
            if begun < start - _DATE_SLACK:
                bad(f"{where} began {begun.isoformat(timespec='seconds')}, before its run started {start.isoformat()}")
            elif first_of_segment and begun - start > _FIRST_RESULT_WITHIN:
                bad(f"the first result ({where}) began {begun - start} after the run started {start.isoformat()}: "
                    "a run's first result comes within hours of its start; the start was moved")
            first_of_segment = False
            latest = finished if latest is None else max(latest, finished)
            stamp = _exit_stamp(record.trace)
            previous = clock.get(record.device)
            if stamp is not None:
                if previous is not None and stamp >= previous[1]:
                    walled = (finished - previous[0]).total_seconds()
                    traced = (stamp - previous[1]) / 1e9
                    if abs(walled - traced) > _DATE_SLACK.total_seconds() + 0.01 * traced:
                        bad(f"{where} is dated {walled:.0f} s after {previous[2]}, but its trace's own clock "
                            f"says {traced:.0f} s: the dates were edited")
                clock[record.device] = (finished, stamp, record.scenario)
        elif isinstance(record, EndRecord):
            finished = parse_date(record.finished)
            if finished is None:
                bad(f"the end record says finished {record.finished!r}, not a date")
            elif latest is not None and finished < latest - _DATE_SLACK:
                bad(f"the end record says finished {record.finished}, before results it follows")
            else:
                latest = finished if latest is None else max(latest, finished)
    created = parse_date(manifest.get("created"))
    if created is not None and latest is not None and created < latest - _DATE_SLACK:
        bad(f"the bundle says it was made {manifest.get('created')}, before the run it holds ended")
    for moment in (created, latest):
        if moment is not None and moment > now + _FUTURE:
            bad(f"a date of the bundle ({moment.isoformat(timespec='seconds')}) is in the future")
    return problems


def _exit_stamp(trace: Sequence[str]) -> int | None:
    """The monotonic timestamp (ns) of a trace's last event, its `exit`, when it has one."""
    if not trace or len(trace[-1]) > 4096:
        return None
    try:
        event = json.loads(trace[-1])
    except (ValueError, RecursionError):
        return None
    stamp = event.get("t") if isinstance(event, dict) else None
    return stamp if isinstance(stamp, int) and 0 <= stamp < 1 << 63 else None


def _check_claim(run: RunResults, manifest: Mapping[str, Any], members: Mapping[str, Member]) -> list[Problem]:
    """The claim the bundle states (manifest, summary.json) is the one its results give."""
    claim = claim_of(run)
    expected = json.loads(json.dumps(claim.to_json()))
    problems: list[Problem] = []
    if manifest.get("claim") != expected:
        stated = manifest.get("claim")
        level = stated.get("level") if isinstance(stated, dict) else None
        if isinstance(stated, dict) and level == claim.level.value:
            differ = sorted(k for k in {*expected, *stated} if expected.get(k) != stated.get(k))
            said = f"the manifest's claim ({level}) differs from the one the results give in {', '.join(differ[:3])}"
        else:
            said = f"the manifest states claim {level!r}, the results give {claim.level}"
        problems.append(Problem("claim", said))
    return problems


def unchecked_fields(run: RunResults) -> tuple[str, ...]:
    """What a verified answer rests on that verify cannot check, named on its answer line: the plan's
    target and configuration (labels of the run), the dates (consistent with the traces, see _check_dates,
    but on no trusted clock) and the device records' own words (from getprop and pm on the device)."""
    if run.plan is None:
        return ()
    named = [f"target {console_text(run.plan.target)} and the run's configuration", "the dates"]
    fields = sorted({key for info in run.devices.values() for key in info} & set(DEVICE_WORDS))
    if fields:
        named.append("each device record's " + ", ".join(fields))
    return tuple(named)


# Device record fields that come from the device's own answers (getprop, pm, the probe binary's digest),
# which no trace re-derives; the rest are re-derived (pairs, control, discovery outcome, pointer width).
DEVICE_WORDS: Final = (
    "npu_feature", "abis", "fingerprint", "model", "manufacturer", "sdk", "probe_version", "personality", "policy",
    "capacity",
)  # fmt: skip


def verify_bundle(
    bundle: Path,
    scenario_root: Path = SCENARIO_ROOT,
    waivers_file: Path | None = None,
    trusted_key: Path | None = None,
) -> VerifyReport:
    trusted = signing.load_public_key(trusted_key) if trusted_key is not None else None
    waivers = load_waiver_file(waivers_file) if waivers_file is not None else ()
    corpus, catalogue = corpus_by_id(scenario_root)
    if waivers_file is not None:
        check_waiver_ids(waivers, catalogue, corpus, waivers_file)
    with tempfile.TemporaryDirectory(prefix="npuconf-verify-") as scratch:  # 0700: this user's alone
        return _verify(bundle, read_bundle(bundle, Path(scratch)), scenario_root, waivers_file, trusted, waivers,
                       corpus, catalogue)  # fmt: skip


def _verify(
    bundle: Path,
    members: Mapping[str, Member],
    scenario_root: Path,
    waivers_file: Path | None,
    trusted: Ed25519PublicKey | None,
    waivers: Sequence[Waiver],
    corpus: Mapping[str, Scenario],
    catalogue: Mapping[str, str],
) -> VerifyReport:
    manifest = _manifest(bundle, members)
    problems: list[Problem] = []
    signed = members.get(signing.SIGNATURE)
    signature = signed.data if signed is not None else None
    if trusted is not None:
        bad = signing.check(members[MANIFEST].data or b"", signature, trusted)
        if bad is not None:
            problems.append(Problem("signature", bad))
    problems.extend(_check_names(manifest, members))
    problems.extend(_check_files(manifest, {k: v for k, v in members.items() if k != signing.SIGNATURE}))
    problems.extend(_check_tree_hashes(manifest))
    if RESULTS_FILE not in members:
        raise BundleUnreadable(f"{bundle}: no results.jsonl in the bundle")
    basis = claim_basis(load_catalogue(), corpus.values())
    member = Path(RESULTS_FILE)  # problems name the bundle's member, never a copy
    try:
        records = parse_records(members[RESULTS_FILE].data or b"", member)
        run = load_results(member, records=records)
    except ResultsUnreadable as exc:
        raise BundleUnreadable(f"{bundle}: member results.jsonl: {exc.cause}") from None
    problems.extend(Problem("results", p) for p in problems_of(run))
    if run.plan is None:
        problems.append(Problem("results", "results.jsonl has no plan record"))
    elif manifest.get("run_id") != run.plan.run_id:
        problems.append(
            Problem("results", f"manifest run id {manifest.get('run_id')!r} is not the plan's {run.plan.run_id!r}")
        )
    devices = manifest.get("devices")
    if isinstance(devices, dict) and devices != device_fingerprints(run):
        problems.append(Problem("results", "the manifest's device fingerprints differ from results.jsonl"))
    problems.extend(_kit_problems(run, corpus, basis))
    problems.extend(_check_identity(run, manifest))
    problems.extend(_check_lost(run, records))
    problems.extend(_check_dates(run, records, manifest))
    coverage, cited = _check_coverage(run, records), _check_cited_clauses(records, corpus)
    derived, verdict_problems = _check_verdicts(run, corpus, catalogue, waivers)
    problems.extend([*coverage, *cited, *verdict_problems])
    dropped = sum(found.dropped for found in (coverage, cited, verdict_problems) if isinstance(found, _Capped))
    problems.extend(_check_reports(run, members))
    problems.extend(_check_claim(run, manifest, members))
    if dropped:
        problems.append(Problem("results", f"and {dropped} more problems of the same kinds, not listed"))
    tree_hashes = recorded_tree_hashes(manifest) or {}
    run_hashes = (
        (
            ("corpus hash", run.plan.corpus_hash, corpus_hash(scenario_root)),
            ("model hash", run.plan.model_hash, model_hash()),
        )
        if run.plan is not None
        else ()
    )
    return VerifyReport(
        bundle=bundle,
        run_id=run.run_id,
        results=sum(1 for r in run.results if r.recorded),
        devices=len(run.device_serials),
        rejudged=derived,
        problems=tuple(problems),
        claim=claim_of(run),
        fingerprints=tuple(device_fingerprints(run).items()),
        run_hashes=run_hashes,
        tree_hashes=tuple((str(k), str(v)) for k, v in tree_hashes.items()),
        signer=signing.signer(signature),
        signature_checked=trusted is not None and not any(p.kind == "signature" for p in problems),
        waivers=str(waivers_file) if waivers_file is not None else None,
        narrow_devices=tuple(s for s in run.device_serials if pointer_bits(run.devices.get(s, {})) == 32),
        pointer_64_only=len(narrow) if isinstance(narrow := basis.get("pointer_64_only"), list) else 0,
        unchecked=unchecked_fields(run),
    )
