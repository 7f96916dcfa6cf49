"""The `npuconf` command line (DESIGN §6). User errors print one line and exit 3; no tracebacks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from reference_model.errors import KitError
from reference_model.verdicts import RunExit, Verdict

from .errors import InfraError, UsageError
from .progress import Progress
from .results import run_results_path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(int(RunExit.USAGE), f"npuconf: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="npuconf", description="Conformance kit for the Android NDK NPU buffer API (API 37)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the conformance suite and write the reports")
    run.add_argument(
        "--target",
        choices=["local", "virtual", "adb"],
        help="where the probe runs (default: attached adb devices if any on the default adb server, else virtual)",
    )
    run.add_argument("--devices", type=int, default=1, help="virtual target: number of virtual devices")
    run.add_argument("--serial", action="append", default=[], help="adb target: only this device (repeatable)")
    run.add_argument(
        "--adb-server", action="append", default=[], metavar="HOST:PORT", help="adb target: an adb server (repeatable)"
    )
    run.add_argument("--resume", type=Path, metavar="DIR", help="run what DIR's plan has not run yet, into DIR")
    run.add_argument("--impl", type=Path, help="local target: a Linux library exporting the 18 functions")
    run.add_argument("--profile", choices=["published-37", "aosp-2026"], default="published-37")
    run.add_argument("--personality", choices=["published", "aosp-2026"], default="published", help="vnpu personality")
    run.add_argument("--policy", choices=["budget"], default="budget", help="vnpu allocation policy")
    run.add_argument(
        "--capacity", type=int, help="capacity in bytes: the vnpu's, or declared for --impl and adb devices"
    )
    run.add_argument("--waivers", type=Path, help="waiver file (YAML)")
    run.add_argument("-k", dest="keyword", help="only scenarios whose id matches this expression")
    run.add_argument("--clause", action="append", default=[], help="only scenarios citing this clause (repeatable)")
    run.add_argument("--out", type=Path, help="output directory (default: out/<run-id>/)")
    run.add_argument("--scenarios", type=Path, help="scenario directory (default: conformance/scenarios)")
    run.add_argument("--timeout-multiplier", type=float, default=1.0, help="scale every timeout (slow devices)")
    run.add_argument("-j", dest="jobs", type=int, default=1, help="probe processes per device")
    run.add_argument("--build-dir", type=Path, help="where the host probe build lives (default: build/probe)")
    run.add_argument("--cross", choices=["aarch64", "armhf"], help="local target: run a cross build under qemu-user")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    run.add_argument("--store", type=Path, help="results store to record the run in (default: next to the run dir)")

    probe = commands.add_parser("probe", help="build the probe")
    probe_commands = probe.add_subparsers(dest="probe_command", required=True, parser_class=_Parser)
    build = probe_commands.add_parser("build", help="build the probe and libvnpu (host), or the probe for an NDK ABI")
    build.add_argument("--build-dir", type=Path, help="build directory (default: build/probe or build/probe-<abi>)")
    build.add_argument("--sanitize", choices=["address,undefined", "thread"], help="sanitizer build (host)")
    build.add_argument("--ndk", type=Path, help="Android NDK root: build with its CMake toolchain file")
    build.add_argument("--abi", choices=["arm64-v8a", "armeabi-v7a", "x86", "x86_64"], help="NDK ABI")
    build.add_argument("--cross", choices=["aarch64", "armhf"], help="Linux cross build with Debian's cross compilers")

    clauses = commands.add_parser("clauses", help="the clause catalogue with coverage")
    clauses.add_argument("--json", action="store_true", help="machine-readable output")

    report = commands.add_parser("report", help="regenerate the reports of a run directory")
    report.add_argument("dirs", nargs="+", type=Path)
    report.add_argument("--merge", type=Path, metavar="OUT", help="also merge the runs into one run in OUT")
    from .reports_cmd import add_commands as add_report_commands

    add_report_commands(commands, _Parser)  # rejudge, store import, dashboard, bundle, verify

    virtual = commands.add_parser("virtual-device", help="start or stop virtual devices behind a private adb server")
    virtual_commands = virtual.add_subparsers(dest="virtual_command", required=True, parser_class=_Parser)
    start = virtual_commands.add_parser("start", help="start an adb server and N connected virtual devices")
    start.add_argument("--count", type=int, default=1, help="number of virtual devices")
    start.add_argument("--adb-port", type=int, help="port of the private adb server (default: a free port >= 15000)")
    start.add_argument("--state", type=Path, default=Path("out/virtual-devices.json"), help="state file")
    stop = virtual_commands.add_parser("stop", help="stop what `virtual-device start` started")
    stop.add_argument("--state", type=Path, default=Path("out/virtual-devices.json"), help="state file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "probe":
            return _probe_build(args)
        if args.command == "clauses":
            from .clauses_cmd import print_clauses

            return print_clauses(as_json=args.json)
        if args.command == "report":
            return _report(args)
        if args.command in ("rejudge", "store", "dashboard", "bundle", "verify"):
            from .reports_cmd import run_command

            return run_command(args)
        if args.command == "virtual-device":
            return _virtual_device(args)
    except InfraError as exc:
        print(f"npuconf: {exc}", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    except KitError as exc:
        print(f"npuconf: {exc}", file=sys.stderr)
        return int(RunExit.USAGE)
    except KeyboardInterrupt:
        print("npuconf: interrupted; results written so far are kept", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    raise AssertionError(f"unhandled command {args.command}")


def _run(args: argparse.Namespace) -> int:
    from .session import RunRequest, resume_run, start_run

    if args.jobs < 1:
        raise UsageError(f"-j {args.jobs}: expected a number of probe processes >= 1")
    if args.timeout_multiplier <= 0:
        raise UsageError(f"--timeout-multiplier {args.timeout_multiplier}: expected a positive number")
    if args.devices < 1:
        raise UsageError(f"--devices {args.devices}: expected a number of virtual devices >= 1")
    if args.devices != 1 and args.target not in (None, "virtual"):
        raise UsageError(f"--devices is for --target virtual, not --target {args.target}")
    request = RunRequest(
        target=args.target or "auto",
        devices=args.devices,
        serials=tuple(args.serial),
        adb_servers=tuple(args.adb_server),
        impl=args.impl,
        profile=args.profile,
        personality=args.personality,
        policy=args.policy,
        capacity=args.capacity,
        waivers=args.waivers,
        keyword=args.keyword,
        clauses=tuple(args.clause),
        out=args.out,
        timeout_multiplier=args.timeout_multiplier,
        jobs=args.jobs,
        build_dir=args.build_dir,
        scenarios=args.scenarios,
        cross=args.cross,
        store=args.store,
    )
    progress = None if args.quiet else Progress(sys.stderr)
    if args.resume is not None:
        outcome = resume_run(args.resume, progress.update if progress else None)
    else:
        outcome = start_run(request, progress.update if progress else None)
    if progress:
        progress.finish()
    counts = ", ".join(f"{v.value} {outcome.counts[v]}" for v in Verdict if outcome.counts[v])
    print(f"{outcome.answer}: {counts or 'nothing ran'}")
    for name, path in outcome.reports.items():
        print(f"{name}: {path}")
    return outcome.exit_code


def _probe_build(args: argparse.Namespace) -> int:
    from .build import build_for

    directory = build_for(
        args.ndk,
        args.abi,
        args.sanitize,
        args.build_dir,
        log=lambda line: print(line, file=sys.stderr),
        cross=args.cross,
    )
    print(directory)
    return 0


def _report(args: argparse.Namespace) -> int:
    from reports import write_reports

    for directory in args.dirs:
        results = run_results_path(directory)
        for name, path in write_reports(results, results.parent).items():
            print(f"{name}: {path}")
    if args.merge is not None:
        from .reports_cmd import merge_command

        return merge_command(args.dirs, args.merge)
    return 0


def _virtual_device(args: argparse.Namespace) -> int:
    from .virtual_device.fleet import read_state, start_fleet, stop_fleet

    state: Path = args.state
    if args.virtual_command == "start":
        if state.exists():
            raise UsageError(f"--state {state}: already exists; run `npuconf virtual-device stop` first")
        fleet = start_fleet(args.count, state.resolve().parent / (state.stem + ".d"), adb_port=args.adb_port)
        fleet.write_state(state)
        print(f"adb server 127.0.0.1:{fleet.server.port} (export ANDROID_ADB_SERVER_PORT={fleet.server.port})")
        for device in fleet.devices:
            print(device.adb_serial)
        print(f"state: {state}")
        return 0
    fleet = read_state(state)
    stop_fleet(fleet)
    state.unlink(missing_ok=True)
    print(f"stopped {len(fleet.devices)} virtual device(s) and the adb server on port {fleet.server.port}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
