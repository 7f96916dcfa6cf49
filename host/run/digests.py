"""The model's data digests: one memo for every judgement of this process, kept between runs in the
user cache (floor/user_cache.py), which computes in C the digests it has not kept.

Judging spends much of its time computing FNV-1a-64 digests of the data patterns a scenario reads
back, byte by byte in Python (reference_model/content.py), and every run of the corpus asks for the
same ranges, while a fuzz campaign asks for new ones all along. The judge takes the memo as an
argument (``MEMO``, passed by judging.judge_lines): it looks a digest up there and, where the memo
has none, computes and adds it. This memo answers such a lookup itself with the probe build's
libnpuconf_digest.so (ndk_probe/src/host/digest.c), loaded only when the file and its directory are
this user's (or root's) and no one else may write them, and used only once it has given the model's
own digests for a set of ranges; otherwise the model computes them.

Kept digests are stored as JSON (never code), named by the hash of the model module that defines
them, and read only when this user wrote them; every value is checked for shape before the memo
takes it.
"""

from __future__ import annotations

import ctypes
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

import reference_model.content as content
from floor.safe_io import shared_default
from floor.user_cache import cache_key, read_entry, write_entry

from ..probe import DEFAULT_BUILD_DIR, ProbeBuild

NAMESPACE: Final = "digests"
_U64: Final = 1 << 64
# Ranges the C digest must agree with the model on before the memo uses it: empty, one byte, blocks
# whole and cut, a seed past 255, a start past the pattern's 65,536-byte period, and sixteen spread over
# seeds, starts and lengths (a model changed anywhere in them is not masked by the C).
CHECKED: Final = ((0, 0, 0), (1, 0, 1), (9, 100, 5900), (255, 4095, 300), (300, 7, 513), (77, 65530, 20),
                  *((k * 37 % 1000, k * 4099 % 70000, k * 613 % 5000) for k in range(1, 17)))

NativeDigest = Callable[[int, int, int, int], int]  # (h, seed, first, count) -> h after those bytes


class NativeMemo(dict[content.Pieces, int]):
    """The digests kept (up to content.DIGESTS_KEPT), and the C digest for those not kept (KeyError where
    it is not to be had: the model computes them)."""

    def __init__(self, library: Path | None = None) -> None:
        super().__init__()
        self.library = library  # None: the kit's own probe build
        self._native: list[NativeDigest | None] = []  # empty until the library is first needed
        self._loading = threading.Lock()

    def __missing__(self, pieces: content.Pieces) -> int:
        native = self.native()
        if native is None or not all(0 <= value < 1 << 63 for piece in pieces for value in piece):
            raise KeyError(pieces)  # a negative start is the model's to compute: C's shift is not Python's
        h = content.FNV_OFFSET
        for seed, first, count in pieces:
            h = native(h, seed, first, count)
        if len(self) < content.DIGESTS_KEPT:
            self[pieces] = h
        return h

    def native(self) -> NativeDigest | None:
        with self._loading:
            if not self._native:
                self._native.append(load_native(self.library or ProbeBuild(DEFAULT_BUILD_DIR).digest))
            return self._native[0]


def load_native(path: Path) -> NativeDigest | None:
    """The C digest of ``path``, or None: no such file, not this user's alone, not loadable, or not the
    model's digest."""
    if not path.is_file() or shared_default(path) is not None:
        return None
    try:
        function = ctypes.CDLL(str(path)).npuconf_pattern_digest
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_uint64
    function.argtypes = [ctypes.c_uint64] * 4
    for seed, first, count in CHECKED:
        model = content.fnv1a64(content.pattern_bytes(seed, first, count))
        if function(content.FNV_OFFSET, seed, first, count) != model:
            return None
    return function


# The digests every judgement of this process shares.
MEMO: Final[content.DigestMemo] = NativeMemo()


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
