"""A scratch copy of this checkout, as a user's fresh clone would be, and the doc commands to run in it."""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def tracked_files(root: Path = ROOT) -> list[str]:
    """The checkout's files as git knows them (tracked, plus new ones not ignored): a clone's files."""
    done = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    return sorted({name for name in done.stdout.decode().split("\0") if name})


def scratch_checkout(destination: Path, root: Path = ROOT) -> Path:
    """Copy the working tree's files (with uncommitted edits) to `destination`; .venv and build/ are
    symlinks to this checkout's, so nothing is installed or built again."""
    for name in tracked_files(root):
        source = root / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet in the index
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    (destination / ".venv").symlink_to(root / ".venv")
    (destination / "build").symlink_to(root / "build")
    return destination


def doc_command_lines(doc: Path) -> list[str]:
    """The command lines of a Markdown file's fenced sh blocks, continuations joined, comments dropped."""
    lines = []
    for block in re.findall(r"^```(?:sh|bash)\n(.*?)^```", doc.read_text(encoding="utf-8"), re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                lines.append(shlex.join(words))
    return lines


def doc_command(doc: Path, *words: str) -> list[str]:
    """The one fenced command line of `doc` that starts with `words` (fails when the doc lost it)."""
    wanted = list(words)
    found = [shlex.split(line) for line in doc_command_lines(doc)]
    matching = [argv for argv in found if argv[: len(wanted)] == wanted]
    assert matching, f"{doc.name}: no command line starting with {shlex.join(wanted)!r} in its sh blocks"
    return matching[0]
