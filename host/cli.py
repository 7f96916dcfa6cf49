"""The `npuconf` command line: the parsers, and a dispatch to the room that does each command.

User errors print one line and exit 3; infrastructure errors exit 2; no tracebacks."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final, NoReturn, TextIO

from floor.safe_io import DISK_ERRNOS, OutputFailed, UnsafeOutput, console_text
from reference_model.errors import KitError
from reference_model.profiles import PROFILES
from reference_model.verdicts import RunExit
from reports.recorded.outputs import DEFAULT_STORE
from reports.recorded.plan_options import CROSS_TRIPLES, FUZZ, RUN
from reports.store.postgresql import is_postgresql_url

from .errors import InfraError, RunInterrupted
from .options import add_options, add_target_option, user_path
from .targets.kinds import DEFAULT_KIND, KIND_NAMES


def store_location(text: str) -> str:
    """--store: a postgresql:// URL untouched, a file path made absolute as user_path does."""
    return text if is_postgresql_url(text) else str(user_path(text))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(int(RunExit.USAGE), f"npuconf: error: {message}\n")


def _store_option(parser: argparse.ArgumentParser) -> None:
    """`--store` of the commands that read or fill the results store (`store import`, `dashboard`)."""
    parser.add_argument(
        "--store",
        metavar="PATH|URL",
        type=store_location,
        help=f"SQLite file or postgresql:// URL (default: {DEFAULT_STORE}, when only this user can write there)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="npuconf", description="Conformance kit for the Android NDK NPU buffer API (API 37)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run the conformance suite and write the reports")
    # The table's options default to None here, so `--resume` can tell what the user gave;
    # host/options.py fills in the real defaults after parsing.
    add_target_option(
        run.add_argument, "--target", KIND_NAMES,
        "where the probe runs (default: attached adb devices if any on the default adb server, else virtual)",
    )
    add_options(run.add_argument, RUN)
    run.add_argument(
        "--resume",
        type=user_path,
        metavar="DIR",
        help="run what DIR's plan has not run yet, into DIR (with --impl PATH when DIR came from another host)",
    )
    run.add_argument("--out", type=user_path, help="output directory (default: out/<run-id>/)")
    run.add_argument("--build-dir", type=user_path, help="where the host probe build lives (default: build/probe)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    run.add_argument(
        "--store",
        metavar="PATH|URL",
        type=store_location,
        help="results store to record the run in: an SQLite file or a postgresql:// URL (default: next to the run dir)",
    )

    fuzz = commands.add_parser("fuzz", help="random API programs judged by the model; divergences shrunk to scenarios")
    add_target_option(
        fuzz.add_argument, "--target", KIND_NAMES, f"where the probe runs (default: {DEFAULT_KIND}, unlike run)"
    )
    add_options(fuzz.add_argument, FUZZ)
    fuzz.add_argument("--seed", type=int, default=0, help="the program stream (default 0)")
    fuzz.add_argument(
        "--budget",
        default="60s",
        help="a time for the whole command, shrinking included (60s, 2m), or a number of programs (default 60s)",
    )
    fuzz.add_argument("--batch", type=int, default=50, help="programs per lane and round (default 50)")
    fuzz.add_argument(
        "--until-found",
        nargs="?",
        const="",
        metavar="SECONDS",
        help="stop once the first divergence is shrunk and written and a device fuzzed SECONDS (default 20) past "
        "its first divergence, where a defect may show under each sentence it breaks (still bounded by --budget)",
    )
    fuzz.add_argument(
        "--coverage",
        action="store_true",
        help="print what the campaign reached (op x context x class of the grammar, and the cells it missed) "
        "and the clauses x outcomes it judged",
    )
    fuzz.add_argument("--out", type=user_path, help="output directory (default: out/fuzz-<run-id>/)")
    fuzz.add_argument("--build-dir", type=user_path, help="where the host probe build lives (default: build/probe)")
    fuzz.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    probe = commands.add_parser("probe", help="build the probe")
    probe_commands = probe.add_subparsers(dest="probe_command", required=True, parser_class=_Parser)
    build = probe_commands.add_parser("build", help="build the probe and libvnpu (host), or the probe for an NDK ABI")
    build.add_argument(
        "--build-dir", type=user_path, help="build directory (default: build/probe or build/probe-<abi>)"
    )
    build.add_argument("--sanitize", choices=["address,undefined", "thread"], help="sanitizer build (host)")
    build.add_argument("--ndk", type=user_path, help="Android NDK root: build with its CMake toolchain file")
    build.add_argument("--abi", choices=["arm64-v8a", "armeabi-v7a", "x86", "x86_64"], help="NDK ABI")
    build.add_argument("--cross", choices=list(CROSS_TRIPLES), help="Linux cross build with Debian's cross compilers")

    clauses = commands.add_parser("clauses", help="the clause catalogue with coverage")
    clauses.add_argument("--json", action="store_true", help="machine-readable output")

    spec = commands.add_parser(
        "spec", help="the published header text, each sentence marked with its clause and its answer in the runs"
    )
    spec.add_argument("runs", nargs="*", type=user_path, metavar="RUN", help="run directories (none: coverage)")
    spec.add_argument("--out", type=user_path, metavar="FILE", help="the page to write (default: out/spec.html)")

    errata = commands.add_parser(
        "errata", help="a draft for the spec's owners: the sentences the runs needed a reading of or differ on"
    )
    errata.add_argument("runs", nargs="+", type=user_path, metavar="RUN", help="run directories")
    errata.add_argument(
        "--out", type=user_path, metavar="DIR",
        help="where errata.html and errata.md go (default: the run's directory; out/ for several runs)",
    )

    report = commands.add_parser("report", help="regenerate the reports of a run directory")
    report.add_argument("dirs", nargs="+", type=user_path)
    report.add_argument("--merge", type=user_path, metavar="OUT", help="also merge the runs into one run in OUT")
    report.add_argument(
        "--baseline", type=user_path, metavar="OLD", help="per clause: what newly fails, what was fixed since OLD"
    )
    report.add_argument(
        "--fail-on-new", action="store_true", help="with --baseline: exit 1 when some clause newly fails, else 0"
    )
    rejudge = commands.add_parser("rejudge", help="recompute a run's verdicts from its stored traces (no device)")
    rejudge.add_argument("dir", type=user_path, help="a run directory (or its results.jsonl)")
    rejudge.add_argument("--profile", choices=sorted(PROFILES), help="spec profile (default: the run's own)")
    rejudge.add_argument("--waivers", type=user_path, help="waiver file (default: keep the waivers the run recorded)")
    rejudge.add_argument(
        "--out",
        type=user_path,
        help="output directory, refused if it already holds results or reports (default: DIR/rejudge-<profile>/)",
    )

    store = commands.add_parser("store", help="the results store (SQLite file or PostgreSQL)")
    store_commands = store.add_subparsers(dest="store_command", required=True, parser_class=_Parser)
    store_import = store_commands.add_parser("import", help="import run directories (idempotent by run id)")
    store_import.add_argument("dirs", nargs="+", type=user_path)
    _store_option(store_import)

    dashboard = commands.add_parser("dashboard", help="write the dashboard of the results store")
    _store_option(dashboard)
    dashboard.add_argument(
        "--out", type=user_path, help="output directory (default: the store file's directory, or out/)"
    )

    bundle = commands.add_parser("bundle", help="pack a run into a submission archive (tar.gz)")
    bundle.add_argument("dir", type=user_path, help="a run directory")
    bundle.add_argument("--out", type=user_path, help="archive path (default: DIR/<run-id>.bundle.tar.gz)")
    bundle.add_argument("--sign", type=user_path, metavar="KEY", help="sign the manifest with this Ed25519 private key")

    verify = commands.add_parser("verify", help="check a submission archive against this checkout")
    verify.add_argument("bundle", type=user_path)
    verify.add_argument(
        "--waivers", type=user_path, help="waiver file to apply (waivers stored in the bundle are never trusted)"
    )
    verify.add_argument(
        "--trusted-key", type=user_path, metavar="PUB", help="require a signature by this Ed25519 public key"
    )

    virtual = commands.add_parser("virtual-device", help="start or stop virtual devices behind a private adb server")
    virtual_commands = virtual.add_subparsers(dest="virtual_command", required=True, parser_class=_Parser)
    start = virtual_commands.add_parser("start", help="start an adb server and N connected virtual devices")
    start.add_argument("--count", type=int, default=1, help="number of virtual devices")
    start.add_argument("--adb-port", type=int, help="listen on this loopback port, reachable by every local user "
                       "(default: a unix socket only this user can reach)")
    start.add_argument("--state", type=user_path, default="out/virtual-devices.json", help="state file")
    stop = virtual_commands.add_parser("stop", help="stop what `virtual-device start` started")
    stop.add_argument("--state", type=user_path, default="out/virtual-devices.json", help="state file")
    return parser


# command -> (module under host, function): imported only when the command runs, so `--help` stays fast.
_COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "run": ("host.run", "run_command"),
    "fuzz": ("host.fuzz", "fuzz_command"),
    "probe": ("host.probe", "probe_build_command"),
    "clauses": ("host.offline.commands", "clauses_command"),
    "spec": ("host.offline.spec", "spec_command"),
    "errata": ("host.offline.errata", "errata_command"),
    "report": ("host.offline.commands", "report_command"),
    "rejudge": ("host.offline.commands", "rejudge_command"),
    "store": ("host.offline.commands", "store_import_command"),
    "dashboard": ("host.offline.commands", "dashboard_command"),
    "bundle": ("host.offline.commands", "bundle_command"),
    "verify": ("host.offline.commands", "verify_command"),
    "virtual-device": ("host.targets.virtual_device", "virtual_device_command"),
}


class ConsoleStream(io.TextIOBase):
    """A console stream that shows terminal control characters from device strings as `\\xNN`.

    Device names, reasons and problems reach the console through it; `raw` is the stream underneath,
    for the progress line's own carriage return and erase sequence.
    """

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self.reader_gone = False

    def write(self, text: str) -> int:
        # A reader that went away (`npuconf run | head -1`) must not turn a finished run into a traceback
        # or change its exit code: the rest of the output is dropped.
        if not self.reader_gone:
            try:
                self.raw.write(console_text(text))
            except BrokenPipeError:
                self.reader_gone = True
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self.raw.flush()
            except BrokenPipeError:
                self.reader_gone = True

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        module, function = _COMMANDS[args.command]
        command: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), function)
    except KeyboardInterrupt:
        print("npuconf: interrupted before the command started: nothing was written", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ConsoleStream(stdout), ConsoleStream(stderr)
    try:
        with _terminate_as_interrupt():
            return _dispatch(command, args)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr
        with contextlib.suppress(BrokenPipeError, ValueError):
            stdout.flush()


def _interrupt(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job cancelled, a service stopped) ends a command as Ctrl-C does: what was measured is
    kept and the reports are written. Signal handlers belong to the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# The options whose value is a path the command writes to, by their argparse dest.
_OUTPUT_OPTIONS: Final = {"out": "--out", "merge": "--merge", "state": "--state"}


def _naming_the_option(exc: KitError, args: argparse.Namespace) -> str:
    """An output path the kit refuses (`/etc/passwd: passwd exists and is not a directory`) said with the
    option that gave it (`--out /etc/passwd: ...`), so the line says what to change."""
    text = str(exc)
    if isinstance(exc, UnsafeOutput):
        for dest, flag in _OUTPUT_OPTIONS.items():
            value = getattr(args, dest, None)
            if isinstance(value, Path) and text.startswith(f"{value}"):
                return f"{flag} {text}"
    return text


def _dispatch(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return command(args)
    except OutputFailed as exc:
        print(f"npuconf: {exc}", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    except (InfraError, RunInterrupted) as exc:
        print(f"npuconf: {exc}", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    except KitError as exc:
        print(f"npuconf: {_naming_the_option(exc, args)}", file=sys.stderr)
        return int(RunExit.USAGE)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        print(f"npuconf: {OutputFailed(exc.filename or '?', exc)}", file=sys.stderr)
        return int(RunExit.INCOMPLETE)
    except KeyboardInterrupt:
        print("npuconf: interrupted", file=sys.stderr)
        return int(RunExit.INCOMPLETE)


if __name__ == "__main__":
    sys.exit(main())
