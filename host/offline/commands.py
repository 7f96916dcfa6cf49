"""The console side of the commands that work on recorded runs: report (and --merge), rejudge, store
import, dashboard, bundle, verify. Each takes the parsed arguments, prints its answer and returns the
exit code; the work itself lives in the modules beside this one and in reports/."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

from floor.safe_io import shared_default
from reports.answers.baseline import BaselineComparison, compare_runs
from reports.answers.claim import claim_of, problems_of
from reports.recorded.merge import merge_runs
from reports.recorded.outputs import DEFAULT_STORE
from reports.recorded.results import load_results
from reports.renderers.dashboard import write_dashboard
from reports.renderers.run_reports import write_reports
from reports.store.runs import describe_location, import_runs, is_postgresql_url

from ..errors import UsageError
from ..run import print_answer
from .bundle import make_bundle
from .clauses import print_clauses
from .rejudge import rejudge
from .run_dir import run_results_path
from .verify import verify_bundle


def report_command(args: argparse.Namespace) -> int:
    """`npuconf report DIR... [--merge OUT]`: regenerate each run's reports, and merge them if asked."""
    if args.fail_on_new and args.baseline is None:
        raise UsageError("--fail-on-new needs --baseline OLD: the run to compare with")
    new = 0
    for directory in args.dirs:
        results = run_results_path(directory)
        comparison = baseline_comparison(args.baseline, results) if args.baseline is not None else None
        if args.fail_on_new and comparison is not None and not comparison.devices:
            raise UsageError(
                f"--baseline {args.baseline}: no device of {directory} is one of the baseline's, so nothing can be "
                "compared and nothing would fail; name a baseline run of the same devices"
            )
        paths = write_reports(results, results.parent, comparison)
        print(f"{directory}: {claim_of(load_results(results)).headline}")
        _print_paths(paths)
        if comparison is not None:
            for line in comparison.lines():
                print(line)
            new += comparison.new
    if args.merge is not None:
        return merge_command(args.dirs, args.merge)
    return 1 if args.fail_on_new and new else 0


def baseline_comparison(baseline: Path, results: Path) -> BaselineComparison:
    """What newly fails, what was fixed and what changed in the atlas since `baseline`."""
    old, new = load_results(run_results_path(baseline)), load_results(results)
    return compare_runs(old, new, old.run_id or str(baseline), new.run_id or str(results))


def _print_paths(paths: dict[str, Path]) -> None:
    for name, path in paths.items():
        print(f"{name}: {path}")


def rejudge_command(args: argparse.Namespace) -> int:
    outcome = rejudge(args.dir, args.profile, args.waivers, args.out)
    done = outcome.rejudged
    plan = done.run.plan
    before = plan.profile if plan else "?"
    print(f"rejudged {done.judged} traces of run {done.run.run_id} with {done.profile} (recorded with {before})")
    for problem in problems_of(done.run):
        print(f"problem: {problem}", file=sys.stderr)
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)
    for device, scenario in done.missing_scenarios:
        print(f"not in the corpus (verdict kept): {scenario} on {device}", file=sys.stderr)
    print(f"{len(done.changes)} verdict change{'' if len(done.changes) == 1 else 's'}")
    for change in done.changes:
        print(f"  {change.line()}")
    print(outcome.claim.headline)
    _print_paths(outcome.paths)
    return outcome.exit_code


def merge_command(dirs: list[Path], out: Path) -> int:
    """`npuconf report DIR... --merge OUT`: one results.jsonl and reports for several runs."""
    outcome = merge_runs(dirs, out)
    for problem in outcome.problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(
        f"merged {len(outcome.inputs)} runs into {outcome.run_id}: {outcome.results} results "
        f"({outcome.superseded} superseded)"
    )
    files = {"results": outcome.path, **write_reports(outcome.path, out)}
    merged = load_results(outcome.path)
    print_answer(claim_of(merged), Counter(r.verdict for r in merged.results), files)
    return 0  # as for `report DIR`: the reports were written; the answer is printed, not exited with


def default_store(given: str | None) -> str:
    """The store a command uses: the one named with --store, else out/npuconf.sqlite when only this user could
    have made what is there (a default in a directory other users can write is theirs to plant)."""
    if given is not None:
        return given
    problem = shared_default(Path(os.path.abspath(DEFAULT_STORE)))
    if problem is not None:
        raise UsageError(
            f"the default results store {DEFAULT_STORE} is not used: {problem}; name one with --store PATH|URL"
        )
    return str(DEFAULT_STORE)


def store_import_command(args: argparse.Namespace) -> int:
    args.store = default_store(args.store)
    for directory in args.dirs:
        run_results_path(directory)
    outcomes = import_runs(args.store, args.dirs)
    for outcome in outcomes:
        print(outcome.line())
    print(f"store: {describe_location(args.store)}")
    return 1 if any(o.status in ("skipped", "refused") for o in outcomes) else 0


def dashboard_command(args: argparse.Namespace) -> int:
    args.store = default_store(args.store)
    if args.out is not None:
        out = args.out
    else:
        out = Path("out") if is_postgresql_url(args.store) else Path(args.store).parent
    print(f"dashboard: {write_dashboard(args.store, out)}")
    return 0


def bundle_command(args: argparse.Namespace) -> int:
    outcome = make_bundle(args.dir, args.out, args.sign)
    print(f"bundle: {outcome.path} (run {outcome.run_id}: {', '.join(outcome.files)})")
    return 0


def verify_command(args: argparse.Namespace) -> int:
    report = verify_bundle(args.bundle, waivers_file=args.waivers, trusted_key=args.trusted_key)
    print(report.reason())
    for problem in report.problems[1:]:
        print(f"  {problem.line()}")
    device_count = f"{report.devices} device{'' if report.devices == 1 else 's'}"
    if report.ok:
        print(
            f"verified: run {report.run_id}, {report.results} results on {device_count}, {report.rejudged} verdicts "
            f"re-derived with this kit's corpus and model; claim {report.claim.level} "
            f"(verify exits {report.exit_code})"
        )
    else:  # a rejected bundle states no claim, not even the one its results would give
        print(f"checked: run {report.run_id}, {report.results} results on {device_count}; rejected, so no claim")
    for serial, fingerprint in report.fingerprints:
        print(f"  device {serial}: {fingerprint or '(no fingerprint recorded)'}")
    for name, recorded, current in report.run_hashes:
        here = "the same" if recorded == current else current
        print(f"  {name} {recorded or '(none recorded)'} (plan and reports; this checkout: {here})")
    for part, value in report.tree_hashes:
        print(f"  {part} tree hash {value[:16]} (manifest)")
    print(f"  waivers: {report.waivers or 'none (waivers stored in the bundle are not applied)'}")
    if report.signature_checked:
        print(f"  signed by the trusted key {report.signer}")
    signature = (
        "the signature names who packed it"
        if report.signature_checked
        else f"unsigned or signature not checked{f', names key {report.signer}' if report.signer else ''}"
    )
    print(f"cannot know: where the traces came from (a bundle is made by whoever ran the kit; {signature})")
    print(
        "cannot know: whether a device produced the traces: a hand-written trace the model accepts re-derives "
        "the same verdicts"
    )
    print(
        "cannot know: the device records (ABI, fingerprint, NPU feature, model): they are the "
        "submitter's word, and a claimed 32-bit ABI exempts the clauses only 64-bit pointers exercise"
    )
    return report.exit_code


def clauses_command(args: argparse.Namespace) -> int:
    return print_clauses(as_json=args.json)
