"""The model's data digests: one memo for every judgement of this process, kept between runs in the
user cache (floor/user_cache.py).

Judging a whole run spends most of its time computing FNV-1a-64 digests of the data patterns a
scenario reads back, byte by byte in Python, and every run of the corpus asks for the same ranges.
The judge takes the memo as an argument (``MEMO``, passed by judging.judge_lines) and fills it.
They are stored as JSON (never code), named by the hash of the model module that defines them, and
read only when this user wrote them; every value is checked for shape before the memo takes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import reference_model.content as content
from floor.user_cache import cache_key, read_entry, write_entry

NAMESPACE: Final = "digests"
_U64: Final = 1 << 64
# The digests every judgement of this process shares (the judge fills it up to content.DIGESTS_KEPT).
MEMO: Final[content.DigestMemo] = {}


def _entry_name() -> str:
    return cache_key("model digests", Path(content.__file__).read_bytes())


def _pieces(value: object) -> content.Pieces | None:
    if not isinstance(value, list) or not value:
        return None
    pieces: list[tuple[int, int, int]] = []
    for piece in value:
        if not (isinstance(piece, list) and len(piece) == 3 and all(type(x) is int for x in piece)):
            return None
        seed, first, count = piece
        if not (0 <= seed < 256 and count > 0):
            return None
        pieces.append((seed, first, count))
    return tuple(pieces)


def load_digests() -> int:
    """Take into MEMO the digests an earlier run kept; how many were taken."""
    data = read_entry(NAMESPACE, _entry_name())
    if data is None:
        return 0
    try:
        rows = json.loads(data)
    except ValueError:
        return 0
    found: dict[content.Pieces, int] = {}
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, list) and len(row) == 2 and type(row[1]) is int and 0 <= row[1] < _U64:
            pieces = _pieces(row[0])
            if pieces is not None:
                found[pieces] = row[1]
    taken = 0
    for pieces, value in found.items():
        if len(MEMO) >= content.DIGESTS_KEPT:
            break
        MEMO.setdefault(pieces, value)
        taken += 1
    return taken


def save_digests(loaded: int) -> None:
    """Keep MEMO for the next run, when this run computed new digests."""
    if len(MEMO) <= loaded:
        return
    rows = [[[list(p) for p in pieces], value] for pieces, value in MEMO.items()]
    write_entry(NAMESPACE, _entry_name(), json.dumps(rows, separators=(",", ":")).encode())
