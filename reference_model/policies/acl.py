"""Policy ``acl``: Ascend ACL's aclrtMalloc arithmetic (restated in docs/vnpu.md §6).

- Every block reserves round_up(size, 32) + 32 bytes and starts 64-byte aligned, so in a pool it takes
  round_up(round_up(size, 32) + 32, 64) bytes.
- Two pools, as under the default HUGE_FIRST policy: a request of at most 1 MiB takes normal pages; a
  larger one prefers the huge-page pool (2 MiB pages: its reservation rounded up to 2 MiB) and falls back
  to normal pages when the huge pool cannot hold it.
- The normal pool is the profile's ``capacity`` (minus the pressure reservation); the huge pool is an
  extra capacity / 8 bytes, rounded down to whole 2 MiB pages.
"""

from __future__ import annotations

from typing import Final

from .pool import MIB, Block, Placement, Pool, round_down, round_up, with_block

ALIGN: Final = 64
GRANULE: Final = 32
HUGE_PAGE: Final = 2 * MIB
HUGE_THRESHOLD: Final = 1 * MIB


def huge_capacity(capacity: int) -> int:
    return round_down(capacity // 8, HUGE_PAGE)


def reservation(size: int) -> int:
    return round_up(size, GRANULE) + GRANULE


def used(pool: Pool, region: str = "normal") -> int:
    return sum(b.charge for b in pool.blocks.values() if b.region == region)


def place(pool: Pool, key: str, size: int) -> Placement:
    base = reservation(size)
    huge_note = ""
    if size > HUGE_THRESHOLD:
        huge = round_up(base, HUGE_PAGE)
        huge_used, huge_cap = used(pool, "huge"), huge_capacity(pool.capacity)
        if huge_used + huge <= huge_cap:
            blk = Block(pool.next_seq, size, huge, "huge")
            return Placement(with_block(pool, key, blk), blk, (),
                             f"policy acl: {size} bytes take {huge} bytes of huge pages "
                             f"({huge_used} of {huge_cap} in use)")
        huge_note = f"; the huge pool cannot hold {huge} bytes ({huge_used} of {huge_cap} in use)"
    charge = round_up(base, ALIGN)
    normal = used(pool)
    if normal + pool.reserved + charge <= pool.capacity:
        blk = Block(pool.next_seq, size, charge, "normal")
        return Placement(with_block(pool, key, blk), blk, (),
                         f"policy acl: {size} bytes take {charge} bytes of normal pages "
                         f"({normal} in use + {pool.reserved} reserved of {pool.capacity}){huge_note}")
    return Placement(pool, None, (),
                     f"policy acl: {size} bytes need {charge} bytes of normal pages, "
                     f"{normal} in use + {pool.reserved} reserved of {pool.capacity}{huge_note}")
