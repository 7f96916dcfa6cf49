"""The commands that work on recorded runs: rejudge, report --merge, store import, dashboard, bundle, verify.

`add_commands` adds their parsers to `npuconf`; `run_command` runs one. `record_run` is how
`npuconf run` fills the results store.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

from reference_model.errors import KitError
from reference_model.profiles import PROFILES
from reports import write_reports
from reports.store import DEFAULT_STORE, import_runs

from .hashes import checkout_hashes
from .results import run_results_path

COMMANDS: Final = frozenset({"rejudge", "store", "dashboard", "bundle", "verify"})


def add_commands(commands: argparse._SubParsersAction[Any], parser_class: type[argparse.ArgumentParser]) -> None:
    rejudge = commands.add_parser("rejudge", help="recompute a run's verdicts from its stored traces (no device)")
    rejudge.add_argument("dir", type=Path, help="a run directory (or its results.jsonl)")
    rejudge.add_argument("--profile", choices=sorted(PROFILES), help="spec profile (default: the run's own)")
    rejudge.add_argument("--waivers", type=Path, help="waiver file (default: keep the waivers the run recorded)")
    rejudge.add_argument("--out", type=Path, help="output directory (default: DIR/rejudge-<profile>/)")

    store = commands.add_parser("store", help="the results store (SQLite)")
    store_commands = store.add_subparsers(dest="store_command", required=True, parser_class=parser_class)
    store_import = store_commands.add_parser("import", help="import run directories (idempotent by run id)")
    store_import.add_argument("dirs", nargs="+", type=Path)
    store_import.add_argument(
        "--store", type=Path, default=DEFAULT_STORE, help=f"store file (default: {DEFAULT_STORE})"
    )

    dashboard = commands.add_parser("dashboard", help="write the dashboard of the results store")
    dashboard.add_argument("--store", type=Path, default=DEFAULT_STORE, help=f"store file (default: {DEFAULT_STORE})")
    dashboard.add_argument("--out", type=Path, help="output directory (default: the store's directory)")

    bundle = commands.add_parser("bundle", help="pack a run into a submission archive (tar.gz)")
    bundle.add_argument("dir", type=Path, help="a run directory")
    bundle.add_argument("--out", type=Path, help="archive path (default: DIR/<run-id>.bundle.tar.gz)")

    verify = commands.add_parser("verify", help="check a submission archive against this checkout")
    verify.add_argument("bundle", type=Path)


def run_command(args: argparse.Namespace) -> int:
    if args.command == "rejudge":
        return _rejudge(args)
    if args.command == "store":
        return _store_import(args)
    if args.command == "dashboard":
        return _dashboard(args)
    if args.command == "bundle":
        return _bundle(args)
    if args.command == "verify":
        return _verify(args)
    raise AssertionError(f"unhandled command {args.command}")


def default_store(out_dir: Path) -> Path:
    """The store a run records itself in: next to its output directory (out/npuconf.sqlite by default)."""
    return out_dir.parent / DEFAULT_STORE.name


def record_run(out_dir: Path, store: Path | None = None) -> Path | None:
    """Import a finished run into the results store; a store problem is a warning, never the run's failure."""
    path = store if store is not None else default_store(out_dir)
    try:
        import_runs(path, [out_dir], kit_hash=checkout_hashes()["kit"])
    except (KitError, OSError, sqlite3.Error) as exc:
        print(f"npuconf: warning: the run was not recorded in the results store {path}: {exc}", file=sys.stderr)
        return None
    return path


def _print_paths(paths: dict[str, Path]) -> None:
    for name, path in paths.items():
        print(f"{name}: {path}")


def _rejudge(args: argparse.Namespace) -> int:
    from .rejudge import rejudge

    outcome = rejudge(args.dir, args.profile, args.waivers, args.out)
    done = outcome.rejudged
    plan = done.run.plan
    before = plan.profile if plan else "?"
    print(f"rejudged {done.judged} traces of run {done.run.run_id} with {done.profile} (recorded with {before})")
    for problem in done.run.problems:
        print(f"problem: {problem}", file=sys.stderr)
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)
    for device, scenario in done.missing_scenarios:
        print(f"not in the corpus (verdict kept): {scenario} on {device}", file=sys.stderr)
    print(f"{len(done.changes)} verdict change{'' if len(done.changes) == 1 else 's'}")
    for change in done.changes:
        print(f"  {change.line()}")
    _print_paths(outcome.paths)
    return outcome.exit_code


def merge_command(dirs: list[Path], out: Path) -> int:
    """`npuconf report DIR... --merge OUT`: one results.jsonl and reports for several runs."""
    from reports.merge import merge_runs

    outcome = merge_runs(dirs, out)
    for problem in outcome.problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(
        f"merged {len(outcome.inputs)} runs into {outcome.run_id}: {outcome.results} results "
        f"({outcome.superseded} superseded)"
    )
    _print_paths({"results": outcome.path, **write_reports(outcome.path, out)})
    return 0


def _store_import(args: argparse.Namespace) -> int:
    for directory in args.dirs:
        run_results_path(directory)
    outcomes = import_runs(args.store, args.dirs)
    for outcome in outcomes:
        print(outcome.line())
    print(f"store: {args.store}")
    return 1 if any(o.status == "skipped" for o in outcomes) else 0


def _dashboard(args: argparse.Namespace) -> int:
    from reports.dashboard import write_dashboard

    out = args.out if args.out is not None else args.store.parent
    print(f"dashboard: {write_dashboard(args.store, out)}")
    return 0


def _bundle(args: argparse.Namespace) -> int:
    from .bundle import make_bundle

    outcome = make_bundle(args.dir, args.out)
    print(f"bundle: {outcome.path} (run {outcome.run_id}: {', '.join(outcome.files)})")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from .bundle import verify_bundle

    report = verify_bundle(args.bundle)
    if report.ok:
        print(
            f"bundle verifies: run {report.run_id}, {report.results} results on {report.devices} "
            f"device{'' if report.devices == 1 else 's'}, {report.rejudged} verdicts re-derived"
        )
        return 0
    print(f"bundle does not verify: {len(report.problems)} problem{'' if len(report.problems) == 1 else 's'}")
    for problem in report.problems:
        print(f"  {problem.line()}")
    return report.exit_code
