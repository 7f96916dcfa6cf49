"""No call circle among the vnpu C files, and only the public entry files resolve the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.probe.c_calls import VNPU_SOURCES, call_graph, circles, compile_object, symbols, vnpu_objects

pytestmark = pytest.mark.slow

# The NDK API and vnpu_control: the only files allowed to resolve the singleton (vnpu_dev).
PUBLIC_ENTRY_FILES = {
    "vnpu_api_alloc.c", "vnpu_api_buffer.c", "vnpu_api_load.c", "vnpu_api_request.c", "vnpu_control.c",
}


@pytest.fixture(scope="module")
def vnpu_objs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return vnpu_objects(tmp_path_factory.mktemp("vnpu-objects"))


def test_no_call_circle_among_vnpu_files(vnpu_objs: dict[str, Path]) -> None:
    graph = call_graph(vnpu_objs)
    assert len(graph) == len(list(VNPU_SOURCES.glob("*.c"))) > 10
    found = circles(graph)
    assert not found, "vnpu files call each other in a circle: " + "; ".join(" <-> ".join(c) for c in found)


def test_only_public_entries_resolve_the_device(vnpu_objs: dict[str, Path]) -> None:
    """The state is a parameter: internal files never call vnpu_dev()."""
    resolvers = {name for name, obj in vnpu_objs.items() if "vnpu_dev" in symbols(obj)[1]}
    assert resolvers and resolvers <= PUBLIC_ENTRY_FILES, sorted(resolvers - PUBLIC_ENTRY_FILES)


def test_circles_found_in_a_graph_with_one() -> None:
    graph = {"a.c": {"b.c"}, "b.c": {"c.c"}, "c.c": {"a.c", "d.c"}, "d.c": set(), "e.c": {"d.c"}}
    assert circles(graph) == [["a.c", "b.c", "c.c"]]
    graph["c.c"] = {"d.c"}
    assert circles(graph) == []


def test_call_graph_reads_symbol_tables(tmp_path: Path) -> None:
    """Two tiny files calling each other make a circle through the real compiler and nm."""
    (tmp_path / "ping.c").write_text("int pong(int);\nint ping(int n) { return n ? pong(n - 1) : 0; }\n")
    (tmp_path / "pong.c").write_text("int ping(int);\nint pong(int n) { return n ? ping(n - 1) : 1; }\n")
    (tmp_path / "leaf.c").write_text("int ping(int);\nint leaf(void) { return ping(3); }\n")
    out = tmp_path / "objects"
    out.mkdir()
    objects = {p.name: compile_object(p, out, []) for p in sorted(tmp_path.glob("*.c"))}
    graph = call_graph(objects)
    assert graph == {"leaf.c": {"ping.c"}, "ping.c": {"pong.c"}, "pong.c": {"ping.c"}}
    assert circles(graph) == [["ping.c", "pong.c"]]
