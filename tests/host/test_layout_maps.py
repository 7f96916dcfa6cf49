"""The maps of the harness agree with the tree: docs/decisions.md names every module of every room of
host/ (and nothing that is not there), and the README and host/__init__.py name every room."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host"
ROOMS = sorted(p.name for p in HOST.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
# Files every package has, which no map needs to name.
IMPLIED = {"__init__.py", "__main__.py"}


def _decisions_map() -> dict[str, str]:
    """room -> the text of its entry in the host/ layout block of docs/decisions.md."""
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    block = re.search(r"```\nhost/\n(.*?)```", text, re.S)
    assert block, "docs/decisions.md has no ```host/ layout block"
    entries: dict[str, str] = {}
    current = ""
    for line in block.group(1).splitlines():
        head = re.match(r"  ([a-z_]+/)\s", line)
        if head:
            current = head.group(1).rstrip("/")
            entries[current] = line
        elif current and line.startswith("                "):
            entries[current] += " " + line.strip()
        else:
            current = ""
    return entries


def test_decisions_map_names_every_room_and_module_of_host():
    entries = _decisions_map()
    assert sorted(entries) == ROOMS
    for room, text in entries.items():
        named = set(re.findall(r"\b([a-z_]+\.py)\b", text))
        present = {p.name for p in (HOST / room).rglob("*.py") if "__pycache__" not in p.parts}
        missing = sorted(present - named - IMPLIED)
        stale = sorted(named - present)
        assert not missing, f"docs/decisions.md: host/{room}/ does not name {', '.join(missing)}"
        assert not stale, f"docs/decisions.md: host/{room}/ names {', '.join(stale)}, which is not there"


def test_readme_and_package_docstring_name_every_room():
    readme_row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `host/`"))
    docstring = (HOST / "__init__.py").read_text()
    for room in ROOMS:
        assert f"`{room}/`" in readme_row, f"README.md's host/ row does not name {room}/"
        assert f"`{room}`" in docstring, f"host/__init__.py does not name the room {room}"
