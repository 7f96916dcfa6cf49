"""The device side's pure parts: message codec and checksum, service parsing, sandbox paths, profile."""

import pytest

from host.targets.virtual_device import DeviceProfile
from host.targets.virtual_device.protocol import (
    A_CNXN,
    A_WRTE,
    HEADER,
    Message,
    ProtocolError,
    checksum,
    decode_header,
    encode,
)
from host.targets.virtual_device.sandbox import Sandbox
from host.targets.virtual_device.shell import parse_service
from tests.adb.conftest import device_profile


def test_message_round_trip_and_checksum_rule():
    message = Message(A_WRTE, 7, 9, b"hello")
    with_sum = encode(message, with_checksum=True)
    without = encode(message, with_checksum=False)
    fields = HEADER.unpack(with_sum[: HEADER.size])
    assert fields == (A_WRTE, 7, 9, 5, checksum(b"hello"), A_WRTE ^ 0xFFFFFFFF)
    assert HEADER.unpack(without[: HEADER.size])[4] == 0
    assert with_sum[HEADER.size :] == b"hello"
    assert decode_header(with_sum[: HEADER.size], 1024) == (A_WRTE, 7, 9, 5)


def test_bad_magic_and_oversized_payload_are_protocol_errors():
    raw = bytearray(encode(Message(A_CNXN, 1, 2, b"x"), False)[: HEADER.size])
    raw[20] ^= 1
    with pytest.raises(ProtocolError, match="magic"):
        decode_header(bytes(raw), 1024)
    with pytest.raises(ProtocolError, match="exceeds"):
        decode_header(encode(Message(A_CNXN, 1, 2, b"x" * 20), False)[: HEADER.size], 10)


def test_service_strings():
    assert parse_service("shell:ls") == parse_service("shell:ls")
    raw = parse_service("shell:echo hi")
    assert raw is not None and raw.command == "echo hi" and not raw.v2 and raw.merge_stderr
    v2 = parse_service("shell,v2,TERM=xterm,raw:exit 3")
    assert v2 is not None and v2.v2 and v2.command == "exit 3" and not v2.merge_stderr
    assert parse_service("shell,v2:a:b").command == "a:b"
    assert parse_service("exec:cat x").merge_stderr
    assert parse_service("sync:") is None
    assert parse_service("shellfoo:x") is None


def test_paths_map_into_the_sandbox_for_sync_and_shell(tmp_path):
    box = Sandbox.create(tmp_path / "root")
    root = box.root
    assert box.to_host("/data/local/tmp/x") == root / "data/local/tmp/x"
    assert box.to_host("/sdcard/a") == box.to_host("/storage/emulated/0/a") == root / "sdcard/a"
    assert box.to_host("/data/../../etc/passwd") == root / "etc/passwd"
    assert box.to_host("/system/bin/sh") == root / "system/bin/sh"
    command = "cd /data/local/tmp && cat '/sdcard/f' /data/x2 NPUCONF=/data/y --x=/data/z /datafoo/a ./data/b $D/data/c"
    rewritten = box.rewrite_command(command)
    assert f"cd {root}/data/local/tmp " in rewritten
    assert f"'{root}/sdcard/f'" in rewritten
    assert f" {root}/data/x2 " in rewritten
    assert f"NPUCONF={root}/data/y" in rewritten and f"--x={root}/data/z" in rewritten
    assert " /datafoo/a ./data/b $D/data/c" in rewritten  # not device roots: left alone
    assert box.rewrite_command("ls /proc/self /dev/null") == "ls /proc/self /dev/null"


def test_profile_answers_getprop_and_pm_and_leaves_shell_syntax_to_the_shell():
    profile = device_profile("virtual-3", **{"ro.product.model": "m;$(touch x)"})
    assert profile.builtin("getprop ro.build.version.sdk") == ("37\n", 0)
    assert profile.builtin("getprop ro.product.model") == ("m;$(touch x)\n", 0)
    everything, status = profile.builtin("getprop")
    assert status == 0 and "[ro.serialno]: [virtual-3]\n" in everything
    assert profile.builtin("pm list features") == ("feature:android.hardware.npu\n", 0)
    assert profile.builtin("getprop x; echo y") is None
    assert profile.builtin("ls") is None
    assert DeviceProfile.from_json(profile.to_json()) == profile
