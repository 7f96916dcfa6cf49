"""Every "§N" the kit cites names a page of docs/ that has that numbered section, and every page a
comment, docstring or doc cites by its path is in the checkout (a bare file name is left alone: the
kit writes errata.md and the like)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CITING = (".py", ".md", ".c", ".h", ".yaml", ".j2", ".txt")
# "docs/formats.md §5", "formats.md §5", "formats §5"; then "§6", "§3–§5", "§3, §5" go on citing that page.
_NAMED = re.compile(r"(?:docs/)?([a-z_]+)(?:\.md)? § ?(\d+[a-z]?)")
_BARE = re.compile(r"§ ?(\d+[a-z]?)")
_LINK = re.compile(r"\]\(([a-z_]+)\.md")
_MD_PATH = re.compile(r"(?<![\w/.-])((?:\.\./)*(?:[\w-]+/)+[\w-]+\.md)\b")


def _sections(page: Path) -> set[str]:
    return {m.group(1) for line in page.read_text(encoding="utf-8").splitlines()
            if (m := re.match(r"#{2,4} (\d+[a-z]?)\.? ", line))}  # fmt: skip


def _citing_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split()
            if name.endswith(CITING) and not name.startswith("docs/history/")]  # fmt: skip


def _problems(path: Path, pages: dict[str, set[str]]) -> list[str]:
    found: list[str] = []
    is_doc = path.parent == DOCS
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        named = {m.start(2) - (2 if line[m.start(2) - 2:m.start(2)] == "§ " else 1): m.group(1)
                 for m in _NAMED.finditer(line) if m.group(1) in pages}  # fmt: skip
        page: str | None = None
        for m in _BARE.finditer(line):
            if m.start() in named:
                page = named[m.start()]
            elif is_doc:
                link = _LINK.match(line, m.end())
                page = link.group(1) if link else page or path.stem
            if page is None:
                found.append(f"{where}: §{m.group(1)} names no page of docs/")
            elif m.group(1) not in pages[page]:
                found.append(f"{where}: docs/{page}.md has no §{m.group(1)}")
        for m in _MD_PATH.finditer(line):
            name = m.group(1)
            placeholder = "_" in name.split("/")[0]  # out_dir/errata.md: a directory the user names
            if not placeholder and not any((base / name).is_file() for base in (path.parent, ROOT, DOCS)):
                found.append(f"{where}: {name} is not in the checkout")
    return found


def test_every_section_citation_names_a_section_that_exists():
    pages = {page.stem: _sections(page) for page in DOCS.glob("*.md")}
    problems = [p for path in _citing_files() for p in _problems(path, pages)]
    assert not problems, "\n".join(problems)
