"""A capacity declared with `npuconf run --capacity` (or a device's debug.npuconf.capacity) reaches the judge."""

from __future__ import annotations

from host.run import caps_from_info
from host.targets import declared_capacity


def test_declared_capacity_is_judged_without_vnpu_control():
    info = {"supported_pairs": [[0, 1]], "vnpu_control": False} | declared_capacity(1 << 20)
    caps = caps_from_info(info)
    assert caps.capacity_bytes == 1 << 20 and caps.policy == "budget"


def test_no_declaration_no_capacity():
    assert declared_capacity(None) == {}
    caps = caps_from_info({"supported_pairs": [[0, 1]], "vnpu_control": False, "capacity": 4096})
    assert caps.capacity_bytes is None  # a stray field is not a declaration
