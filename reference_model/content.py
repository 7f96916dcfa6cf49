"""Buffer contents as the model knows them (docs/formats.md §5 data patterns).

A content value is a tuple of non-overlapping, sorted segments ``(start, end, seed, base, clauses)``:
byte ``x`` in ``[start, end)`` equals ``pattern(seed, x - base)``. Bytes outside every segment are
unknown (unconstrained): a fresh buffer, a failed load, a range a load was writing to. ``clauses`` is a
comma-separated list: the first is the clause that makes the bytes observable (named when a digest
disagrees), and all of them are demonstrated when a digest of the bytes agrees — except those marked
``~`` (NAMED_ONLY), which a disagreeing digest names but an agreeing one does not demonstrate.
"""

from __future__ import annotations

from typing import Final

Segment = tuple[int, int, int, int, str]
Content = tuple[Segment, ...]

# A digest's pieces, each (seed, first pattern position, byte count), in order.
Pieces = tuple[tuple[int, int, int], ...]

EMPTY: Final[Content] = ()
NAMED_ONLY: Final = "~"
FNV_OFFSET: Final = 0xCBF29CE484222325
FNV_PRIME: Final = 0x100000001B3
MASK64: Final = 0xFFFFFFFFFFFFFFFF


# Within a 256-byte block (k >> 8 fixed) the pattern is (k * 7) & 0xFF shifted by (seed * 131 + (k >> 8) * 13):
# one block per shift, so a range is sliced from them instead of computed byte by byte.
_BLOCKS: Final = tuple(bytes((shift + i * 7) & 0xFF for i in range(256)) for shift in range(256))


def pattern_bytes(seed: int, first: int, count: int) -> bytes:
    """The bytes the probe writes at pattern positions [first, first + count): at position k,
    (seed * 131 + k * 7 + (k >> 8) * 13) & 0xFF (formats §5)."""
    parts: list[bytes] = []
    k, end = first, first + count
    while k < end:
        within = k & 0xFF
        take = min(256 - within, end - k)
        parts.append(_BLOCKS[(seed * 131 + (k >> 8) * 13) & 0xFF][within : within + take])
        k += take
    return b"".join(parts)


def fnv1a64(data: bytes, h: int = FNV_OFFSET) -> int:
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def write(content: Content, start: int, end: int, seed: int, base: int, clause: str) -> Content:
    """Bytes [start, end) become pattern(seed, x - base)."""
    if end <= start:
        return content
    return _insert(_cut(content, start, end), (start, end, seed, base, clause))


def forget(content: Content, start: int, end: int) -> Content:
    """Bytes [start, end) become unknown."""
    if end <= start or not content:
        return content
    return _cut(content, start, end)


def prefix(content: Content, start: int, end: int, clause: str) -> Content:
    """The same bytes, with ``clause`` first among the clauses of [start, end): named when a digest there
    disagrees, and demonstrated with the others when one agrees."""
    if end <= start or not content:
        return content
    return _reshape(content, start, end, clause)


def expected_digest(content: Content, start: int, end: int, memo: DigestMemo) -> tuple[str, tuple[str, ...]] | None:
    """(16-hex FNV-1a-64 digest, clauses) of bytes [start, end) when every byte is known, else None. The
    clauses are those of the segments read, in order, as written (``~`` marks included): see named_clause
    and shown_clauses. ``memo``: the digests computed so far (``DigestMemo``)."""
    if end <= start:
        return f"{FNV_OFFSET:016x}", ()
    pieces: list[tuple[int, int, int]] = []
    pos = start
    clauses: dict[str, None] = {}
    for s, e, seed, base, cl in content:
        if e <= pos:
            continue
        if s > pos:
            return None
        take_end = min(e, end)
        pieces.append((seed, pos - base, take_end - pos))
        if cl:
            clauses.update(dict.fromkeys(cl.split(",")))
        pos = take_end
        if pos >= end:
            break
    if pos < end:
        return None
    return f"{_digest(tuple(pieces), memo):016x}", tuple(clauses)


# The digests computed so far, by pieces. FNV-1a is byte by byte, the most expensive step of judging a
# whole run, and the corpus asks for the same few ranges every run: the judge's caller owns the memo (a
# host may keep one across judgements and runs); the model only fills it, up to DIGESTS_KEPT entries.
DigestMemo = dict[Pieces, int]
DIGESTS_KEPT: Final = 65536


def named_clause(clauses: tuple[str, ...]) -> str:
    """The clause a disagreeing digest of bytes with these clauses names ("" when none)."""
    return clauses[0].lstrip(NAMED_ONLY) if clauses else ""


def shown_clauses(clauses: tuple[str, ...]) -> tuple[str, ...]:
    """The clauses an agreeing digest of bytes with these clauses demonstrates."""
    return tuple(c for c in clauses if not c.startswith(NAMED_ONLY))


def _digest(pieces: Pieces, memo: DigestMemo) -> int:
    try:
        return memo[pieces]  # a host's memo may also compute the digests it has not kept (dict.__missing__)
    except KeyError:
        pass
    h = FNV_OFFSET
    for seed, first, count in pieces:
        h = fnv1a64(pattern_bytes(seed, first, count), h)
    if len(memo) < DIGESTS_KEPT:
        memo[pieces] = h
    return h


def _cut(content: Content, start: int, end: int) -> Content:
    """The segments outside [start, end)."""
    return _reshape(content, start, end, None)


def _reshape(content: Content, start: int, end: int, clause: str | None) -> Content:
    """The segments split at ``start`` and ``end``: the parts inside dropped (``clause`` None) or kept with
    ``clause`` first among their clauses."""
    out: list[Segment] = []
    for seg in content:
        s, e, seed, base, cl = seg
        if e <= start or s >= end:
            out.append(seg)
            continue
        if s < start:
            out.append((s, start, seed, base, cl))
        if clause is not None:
            out.append((max(s, start), min(e, end), seed, base, ",".join(dict.fromkeys([clause, *cl.split(",")]))))
        if e > end:
            out.append((end, e, seed, base, cl))
    return tuple(out)


def _insert(content: Content, seg: Segment) -> Content:
    out = list(content)
    i = 0
    while i < len(out) and out[i][0] < seg[0]:
        i += 1
    out.insert(i, seg)
    return tuple(out)
