"""The maps of the kit agree with the tree: docs/architecture.md names every module of every room of host/ and
reports/ and every module of the floor (and nothing that is not there), and the README and the packages'
docstrings (host/__init__.py, reports/__init__.py) name every room."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host"
REPORTS = ROOT / "reports"


def _rooms(top: Path) -> list[str]:
    return sorted(p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


# Files every package has, which no map needs to name.
IMPLIED = {"__init__.py", "__main__.py"}


def _layout_block(top: str) -> str:
    """The text of the ```<top>/ layout block of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(rf"```\n{top}/\n(.*?)```", text, re.S)
    assert block, f"docs/architecture.md has no ```{top}/ layout block"
    return block.group(1)


def _named_modules(text: str) -> set[str]:
    return set(re.findall(r"\b([a-z_]+\.py)\b", text))


def _architecture_map(top: str) -> dict[str, str]:
    """room -> the text of its entry in the <top>/ layout block of docs/architecture.md."""
    block = _layout_block(top)
    entries: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        head = re.match(r"  ([a-z_]+/)\s", line)
        if head:
            current = head.group(1).rstrip("/")
            entries[current] = line
        elif current and line.startswith("                "):
            entries[current] += " " + line.strip()
        else:
            current = ""
    return entries


def test_architecture_map_names_every_room_and_module_of_host_and_reports():
    for top in (HOST, REPORTS):
        entries = _architecture_map(top.name)
        assert sorted(entries) == _rooms(top)
        for room, text in entries.items():
            named = _named_modules(text)
            present = {p.name for p in (top / room).rglob("*.py") if "__pycache__" not in p.parts}
            missing = sorted(present - named - IMPLIED)
            stale = sorted(named - present)
            where = f"docs/architecture.md: {top.name}/{room}/"
            assert not missing, f"{where} does not name {', '.join(missing)}"
            assert not stale, f"{where} names {', '.join(stale)}, which is not there"


def test_readme_and_package_docstring_name_every_room():
    readme = (ROOT / "README.md").read_text().splitlines()
    for top in (HOST, REPORTS):
        row = next(line for line in readme if line.startswith(f"| `{top.name}/`"))
        docstring = (top / "__init__.py").read_text()
        for room in _rooms(top):
            assert f"`{room}/`" in row, f"README.md's {top.name}/ row does not name {room}/"
            assert f"`{room}`" in docstring, f"{top.name}/__init__.py does not name the room {room}"


def test_architecture_map_names_every_module_of_the_floor_and_nothing_beside_the_rooms_of_reports():
    present = {p.name for p in (ROOT / "floor").glob("*.py")} - IMPLIED
    named = _named_modules(_layout_block("floor"))
    where = "docs/architecture.md: floor/"
    assert not sorted(present - named), f"{where} does not name {sorted(present - named)}"
    assert not sorted(named - present), f"{where} names {sorted(named - present)}, which is not there"
    assert {p.name for p in REPORTS.glob("*.py")} == {"__init__.py"}, "reports/ holds its rooms, no module of its own"
    readme_rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `floor/`")]
    assert readme_rows, "README.md's layout table has no floor/ row"
