"""`python -m host.targets.virtual_device`: one virtual device, listening on loopback for an adb server.

Prints `LISTENING <port> pid=<pid>` on stdout once it accepts connections, then nothing more.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .auth import AuthKeyError, DeviceAuth
from .identity import IdentityError, drop_privileges, private_identity
from .processes import become_subreaper, kill_descendants
from .profile import DeviceProfile, ProfileError
from .protocol import A_VERSION, A_VERSION_MIN, MAX_PAYLOAD
from .sandbox import Sandbox, SandboxError
from .server import DeviceConfig, serve

FORBIDDEN_PORTS = range(5555, 5586)  # a fresh adb server claims listeners there as emulators


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m host.targets.virtual_device", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback only)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--root", type=Path, required=True, help="sandbox directory (the device filesystem)")
    parser.add_argument("--profile", type=Path, help="device profile JSON (default: a vNPU for this host's ABI)")
    parser.add_argument("--name", default="virtual-1", help="ro.serialno of the default profile")
    parser.add_argument(
        "--auth-key", type=Path,
        help="adb public key (adbkey.pub) of the one adb server to accept; `-`: read it from stdin",
    )  # fmt: skip
    parser.add_argument("--max-payload", type=int, default=MAX_PAYLOAD)
    parser.add_argument("--protocol-version", type=lambda s: int(s, 0), default=A_VERSION)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v info, -vv every message")
    return parser.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    become_subreaper()  # what a shell command leaves in a session of its own stays this device's child
    profile = DeviceProfile.load(args.profile) if args.profile else DeviceProfile.default(args.name)
    identity = private_identity()  # held (with its claim) for as long as the device serves
    owner = identity.ids if identity is not None else None
    sandbox = Sandbox.create(args.root, owner, profile.stub_scripts())
    if args.auth_key is None:
        auth = None
    elif str(args.auth_key) == "-":  # the launcher writes it once the server's key exists
        auth = DeviceAuth.read(sys.stdin)
    else:
        auth = DeviceAuth.load(args.auth_key)
    if identity is not None:
        # Everything the device does from here on (sync, shell, its services) is done as the device's
        # own uid, so whoever reaches it gains nothing root or any other device has, whatever race it
        # wins between a path check and an open.
        drop_privileges(*identity.ids)
        sandbox = Sandbox(sandbox.root, owner=None)
    config = DeviceConfig(
        profile=profile,
        sandbox=sandbox,
        version=max(A_VERSION_MIN, args.protocol_version),
        max_payload=args.max_payload,
        trace_messages=args.verbose >= 2,
        auth=auth,
    )
    server = await serve(config, args.host, args.port)
    port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"LISTENING {port} pid={os.getpid()}", flush=True)
    async with server:
        await stop.wait()
    kill_descendants()  # nothing a shell on this device started outlives it, setsid or not
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print("virtual device: listens on loopback only", file=sys.stderr)
        return 2
    if args.port in FORBIDDEN_PORTS:
        print(f"virtual device: port {args.port} is in 5555-5585 (adb servers claim those)", file=sys.stderr)
        return 2
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s vdev[%(process)d] %(message)s")
    try:
        return asyncio.run(amain(args))
    except (ProfileError, SandboxError, AuthKeyError, IdentityError, OSError) as exc:
        print(f"virtual device: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
