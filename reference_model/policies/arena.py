"""Policy ``arena``: TensorFlow Lite Micro's single arena (restated in docs/vnpu.md §6).

- One arena of ``capacity`` bytes, its end rounded down to 16. Alignment is 16 everywhere.
- The tail holds persistent memory (model weights and executables): it grows down from the end; each
  block moves the tail down by its size and rounds it down to 16.
- The head holds the rest (cache and auxiliary buffers): it grows up from the start in blocks rounded up
  to 16.
- A block fails when it would cross the other end, or when head + (end - tail) + the pressure
  reservation would exceed the capacity.
- Both ends are stacks: a released block (freed and unmapped, or preempted) becomes a hole, and holes
  are reclaimed only from the top of their stack (the most recent end). Memory below a live block stays
  taken.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from .pool import (
    TYPE_MODEL_EXECUTABLE,
    TYPE_MODEL_WEIGHTS,
    Block,
    Placement,
    Pool,
    round_down,
    round_up,
    with_block,
    without,
)

ALIGN: Final = 16


def end(pool: Pool) -> int:
    return round_down(pool.capacity, ALIGN)


def _all(pool: Pool, region: str) -> list[Block]:
    return [b for b in (*pool.blocks.values(), *pool.holes) if b.region == region]


def head(pool: Pool) -> int:
    return max((b.start + b.charge for b in _all(pool, "head")), default=0)


def tail(pool: Pool) -> int:
    return min((b.start for b in _all(pool, "tail")), default=end(pool))


def used(pool: Pool) -> int:
    return head(pool) + end(pool) - tail(pool)


def is_tail(type_: int) -> bool:
    return type_ in (TYPE_MODEL_EXECUTABLE, TYPE_MODEL_WEIGHTS)


def release(pool: Pool, key: str) -> Pool:
    """The block becomes a hole; holes at the top of either stack are reclaimed."""
    holes = [*pool.holes, pool.blocks[key]]
    pool = without(pool, key)
    while True:
        h, t = head(replace(pool, holes=tuple(holes))), tail(replace(pool, holes=tuple(holes)))
        top = [b for b in holes if (b.region == "head" and b.start + b.charge == h and b.charge > 0)
               or (b.region == "tail" and b.start == t and b.charge > 0)]
        if not top:
            break
        for b in top:
            holes.remove(b)
    return replace(pool, holes=tuple(sorted(holes, key=lambda b: b.seq)))


def place(pool: Pool, key: str, size: int, type_: int) -> Placement:
    h, t, u, res, cap = head(pool), tail(pool), used(pool), pool.reserved, pool.capacity
    where = f"head {h}, tail {t}, {res} reserved, arena {cap}"
    if is_tail(type_):
        start = round_down(t - size, ALIGN) if size <= t else -1
        charge = t - start
        if start < h or u + charge + res > cap:
            return Placement(pool, None, (),
                             f"policy arena: {size} persistent bytes do not fit below the tail ({where})")
        blk = Block(pool.next_seq, size, charge, "tail", start)
        return Placement(with_block(pool, key, blk), blk, (),
                         f"policy arena: {size} persistent bytes at tail offset {start} ({where})")
    charge = round_up(size, ALIGN)
    if h + charge > t or u + charge + res > cap:
        return Placement(pool, None, (), f"policy arena: {size} bytes do not fit above the head ({where})")
    blk = Block(pool.next_seq, size, charge, "head", h)
    return Placement(with_block(pool, key, blk), blk, (),
                     f"policy arena: {size} bytes at head offset {h} ({where})")
