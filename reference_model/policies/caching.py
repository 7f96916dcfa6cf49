"""Policy ``caching``: ArrayFire's default memory manager (restated in docs/vnpu.md §6).

- Sizes are rounded up to the step, 1024 bytes.
- A freed block (freed and unmapped, or preempted) goes to a free cache under its rounded size; it still
  takes device memory.
- An allocation reuses a cached block of exactly its rounded size. On a miss it takes new memory when
  locked + cached + reserved + size fits the capacity. Otherwise the cache is cleaned (garbage
  collection: every cached block is released, also when the allocation then fails) and it retries.
- If it still does not fit, the pressure turns into preemption: buffers of a numerically greater
  priority value than the request (less important), in victim order, are preempted until it fits —
  only when they free enough, else nothing is preempted and the allocation fails with ENOMEM.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from .pool import Block, Candidate, Placement, Pool, round_up, victim_order, with_block, without

STEP: Final = 1024


def locked(pool: Pool) -> int:
    return sum(b.charge for b in pool.blocks.values())


def used(pool: Pool) -> int:
    return locked(pool) + sum(pool.cache)


def release(pool: Pool, key: str) -> Pool:
    blk = pool.blocks[key]
    pool = without(pool, key)
    return replace(pool, cache=tuple(sorted((*pool.cache, blk.charge))))


def collect(pool: Pool) -> Pool:
    return replace(pool, cache=())


def place(pool: Pool, key: str, size: int, priority: int, cands: list[Candidate]) -> Placement:
    r = round_up(size, STEP)
    if r in pool.cache:
        cache = list(pool.cache)
        cache.remove(r)
        blk = Block(pool.next_seq, size, r, "main")
        return Placement(with_block(pool, key, blk, cache=tuple(cache)), blk, (),
                         f"policy caching: {size} bytes reuse a cached block of {r} bytes")
    cap, res = pool.capacity, pool.reserved
    if used(pool) + res + r <= cap:
        blk = Block(pool.next_seq, size, r, "main")
        return Placement(with_block(pool, key, blk), blk, (),
                         f"policy caching: {size} bytes take {r} new bytes ({used(pool)} in use + {res} reserved "
                         f"of {cap})")
    cleaned = sum(pool.cache)
    pool = collect(pool)
    note = f" after cleaning {cleaned} cached bytes" if cleaned else ""
    if locked(pool) + res + r <= cap:
        blk = Block(pool.next_seq, size, r, "main")
        return Placement(with_block(pool, key, blk), blk, (),
                         f"policy caching: {size} bytes take {r} bytes{note}")
    need = locked(pool) + res + r - cap
    order = victim_order([c for c in cands if c.priority > priority])
    if sum(c.block.charge for c in order) < need:
        return Placement(pool, None, (),
                         f"policy caching: {size} bytes need {r}, {locked(pool)} locked + {res} reserved of {cap}"
                         f"{note}, and buffers less important than priority {priority} hold less than {need}")
    victims: list[str] = []
    for c in order:
        if locked(pool) + res + r <= cap:
            break
        pool = release(pool, c.key)
        victims.append(c.key)
    pool = collect(pool)
    blk = Block(pool.next_seq, size, r, "main")
    return Placement(with_block(pool, key, blk), blk, tuple(victims),
                     f"policy caching: {size} bytes take {r} bytes{note} by preempting {len(victims)} "
                     f"less important buffer(s)")
