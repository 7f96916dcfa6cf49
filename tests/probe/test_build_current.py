"""A probe build older than its sources is made again (or, for a cross build, refused naming the command):
a checkout updated without building again must not run the old probe and libvnpu against the new host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host.errors import UsageError
from host.probe import ProbeBuild, current_build
from host.probe.build import BUILD_INPUTS, BUILT_STAMP, PROBE_SOURCE

CROSS = "npuconf probe build --cross aarch64"


def newest_source() -> tuple[int, Path]:
    sources = [PROBE_SOURCE / name for name in BUILD_INPUTS]
    files = [p for s in sources for p in ([s] if s.is_file() else s.rglob("*")) if p.is_file()]
    return max((p.stat().st_mtime_ns, p) for p in files)


def fake_build(directory: Path, stamp_ns: int | None, binaries_ns: tuple[int, int]) -> ProbeBuild:
    """A build directory whose times say when it was made: its stamp, and its two binaries."""
    directory.mkdir(parents=True, exist_ok=True)
    build = ProbeBuild(directory)
    for path, ns in zip((build.probe, build.vnpu), binaries_ns, strict=True):
        path.write_bytes(b"\x7fELF")
        os.utime(path, ns=(ns, ns))
    if stamp_ns is not None:
        (directory / BUILT_STAMP).write_text("")
        os.utime(directory / BUILT_STAMP, ns=(stamp_ns, stamp_ns))
    return build


def test_a_source_newer_than_the_stamp_is_named(tmp_path: Path) -> None:
    changed, path = newest_source()
    after = changed + 10**9
    assert fake_build(tmp_path / "old", changed - 10**9, (after, after)).changed_source() == path
    assert fake_build(tmp_path / "new", after, (changed - 10**9, changed - 10**9)).changed_source() is None


def test_without_a_stamp_the_older_binary_dates_the_build(tmp_path: Path) -> None:
    changed, path = newest_source()
    before, after = changed - 10**9, changed + 10**9
    assert fake_build(tmp_path / "one-old", None, (after, before)).changed_source() == path
    assert fake_build(tmp_path / "both-new", None, (after, after)).changed_source() is None


def test_a_stale_cross_build_is_refused_naming_the_command(tmp_path: Path) -> None:
    changed, path = newest_source()
    fake_build(tmp_path, changed - 10**9, (changed, changed))
    with pytest.raises(UsageError) as refused:
        current_build(tmp_path, made_by=CROSS)
    assert str(refused.value) == f"the probe build in {tmp_path} is older than {path}; run `{CROSS}` again"
    with pytest.raises(UsageError) as missing:
        current_build(tmp_path / "none", made_by=CROSS)
    assert str(missing.value) == f"{tmp_path / 'none'}: no cross build there; run `{CROSS}` first"
    assert not (tmp_path / "none").exists()


def test_a_stale_host_build_is_made_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_dir = tmp_path / "probe"
    build = current_build(build_dir)
    assert "no probe build in" in capsys.readouterr().err
    assert build.exists() and build.changed_source() is None
    current_build(build_dir)  # current: nothing is built, nothing said
    assert capsys.readouterr().err == ""
    changed, path = newest_source()
    os.utime(build_dir / BUILT_STAMP, ns=(changed - 10**9, changed - 10**9))
    os.utime(build.probe, ns=(changed - 10**9, changed - 10**9))
    assert build.changed_source() == path
    current_build(build_dir)
    said = capsys.readouterr().err
    assert f"the probe build in {build_dir} is older than {path}: building it now" in said
    assert build.changed_source() is None
    assert build.probe.stat().st_mtime_ns > changed  # make ran: the probe, dated before, was linked again
