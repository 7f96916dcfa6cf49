"""Target kinds are one seam (host/targets/kinds/): no module outside host/targets compares a value with a
kind's name, so a new kind is a module there and a line of `KINDS`, not a branch in every room."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from host.targets.kinds import KIND_NAMES, KINDS, own_options, target_kind
from reports.recorded.plan_options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("host", "reports", "conformance")
OWN_ROOM = ROOT / "host" / "targets"
NAMES = frozenset(KIND_NAMES)


def _names_in(node: ast.expr) -> Iterator[str]:
    """Kind names written as literals in a compared expression (also inside a tuple, list or set)."""
    if isinstance(node, ast.Constant) and node.value in NAMES:
        yield str(node.value)
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from _names_in(element)


def _comparisons(path: Path) -> Iterator[str]:
    """`line: compares with 'adb'` for each comparison, `in` test or match case on a kind's name."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                for name in _names_in(side):
                    yield f"{node.lineno}: compares with {name!r}"
        elif isinstance(node, ast.MatchValue):
            for name in _names_in(node.value):
                yield f"{node.lineno}: matches {name!r}"


def test_no_module_outside_host_targets_compares_a_kind_name():
    found = [
        line
        for room in ROOMS
        for path in sorted((ROOT / room).rglob("*.py"))
        if OWN_ROOM not in path.parents and "__pycache__" not in path.parts
        for line in (f"{path.relative_to(ROOT)}:{found}" for found in _comparisons(path))
    ]
    assert not found, "branch on the kind's members (host/targets/kinds/) instead:\n" + "\n".join(found)


def test_the_check_sees_comparisons_in_tests_and_match_cases(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('if target == "adb" or name in ("local", "x"):\n    pass\n'
                      'match t:\n    case "virtual":\n        pass\n')
    assert list(_comparisons(sample)) == ["1: compares with 'adb'", "1: compares with 'local'", "4: matches 'virtual'"]


def test_every_kind_is_found_by_its_name_and_owns_the_options_tagged_with_it():
    assert [target_kind(name) for name in KIND_NAMES] == list(KINDS)
    assert {o.target for o in OPTIONS} - {None} <= NAMES
    assert own_options("adb") == ("serials", "adb_servers")
