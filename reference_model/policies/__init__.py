"""The vnpu's allocation policies as the model knows them (docs/model.md §7, docs/vnpu.md §6).

``budget`` is judged by allocation.py itself. The policies here (``acl``, ``caching``, ``arena``) predict,
where a vnpu profile declares them, exactly which allocations succeed, which fail with ENOMEM and which
buffers the device preempts. Each policy's arithmetic is its own module; this one connects them to the
model state. Pure Python, no I/O.

The policy state (a ``Pool``) follows the buffers lazily: before each decision, blocks of buffers that
stopped counting (freed and unmapped, preempted, or whose allocation failed after admission) are
released. Every policy releases a freed block and a preempted one alike, so the order in which those
happened between two decisions does not change the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Final

from ..caps import EXACT_POLICIES
from ..state import Attrs, Buffer, State, Submission, evolve
from ..threads import MAIN, has_pending
from . import acl, arena, caching
from .pool import Candidate, Placement, Pool, victim_order

POLICIES: Final = EXACT_POLICIES


def declared(policy: str | None, capacity: int | None) -> str | None:
    """The policy the model predicts exactly, or None (budget, or nothing declared)."""
    return policy if policy in POLICIES and capacity is not None else None


def total_bytes(name: str | None, capacity: int) -> int:
    """All the memory a device with this policy and capacity can hand out: ``acl`` adds its huge-page pool.
    Every policy charges a block at least its size, so buffers whose sizes add up to more cannot all hold
    memory at once."""
    return capacity + acl.huge_capacity(capacity) if name == "acl" else capacity


def _pool(s: State, capacity: int) -> Pool:
    return s.pool if s.pool is not None else Pool(capacity, {})


def release(name: str, pool: Pool, key: str) -> Pool:
    if name == "caching":
        return caching.release(pool, key)
    if name == "arena":
        return arena.release(pool, key)
    blocks = dict(pool.blocks)
    del blocks[key]
    return replace(pool, blocks=blocks)


def _counts(key: str, bufs: Mapping[str, Buffer], subs: Mapping[int, Submission]) -> bool:
    if key.startswith("#"):
        return int(key[1:]) in subs
    b = bufs.get(key)
    return b is not None and not b.preempted and not (b.freed and b.maps == 0)


def sync(name: str, pool: Pool, s: State) -> Pool:
    for key in sorted(pool.blocks):
        if not _counts(key, s.bufs, s.subs):
            pool = release(name, pool, key)
    return pool


def candidates(pool: Pool, bufs: Mapping[str, Buffer], region: str | None = None) -> list[Candidate]:
    """Buffers the vnpu may preempt: delivered, not freed, not preempted, unmapped, no load in flight."""
    out = []
    for key, blk in pool.blocks.items():
        b = bufs.get(key)
        if b is None or b.freed or b.preempted or b.maps > 0 or b.loads > 0:
            continue
        if region is None or blk.region == region:
            out.append(Candidate(key, b.priority, blk.seq, blk))
    return out


def unsettled(pool: Pool, bufs: Mapping[str, Buffer], fresh: tuple[int, ...] = ()) -> str | None:
    """Why the buffers the vnpu may preempt are not known exactly, or None. The vnpu counts a buffer
    from the moment its onAlloc starts (and again once its load finished), which the trace shows only
    when the callback runs: with an onAlloc or onLoad still outstanding, a choice of victims is not
    predicted (the aosp-2026 personality also preempts such buffers)."""
    for key in pool.blocks:
        if key.startswith("#") and int(key[1:]) not in fresh:
            return "an admitted buffer's onAlloc was still outstanding when victims were chosen"
    for b in bufs.values():
        if b.loads > 0 and not b.freed and not b.preempted:
            return "a load was still outstanding when victims were chosen"
    return None


def place(name: str, pool: Pool, key: str, a: Attrs, cands: list[Candidate]) -> Placement:
    if name == "acl":
        return acl.place(pool, key, a.size)
    if name == "caching":
        return caching.place(pool, key, a.size, a.priority, cands)
    return arena.place(pool, key, a.size, a.type)


def _preempt(bufs: dict[str, Buffer], keys: tuple[str, ...] | list[str]) -> None:
    """The policy's victims are preempted from now on (map and load get ENOENT) and may get their one
    onPreempt. It is not owed by the first settle, as for ``vnpu preempt=<buffer>``: the probe's settle
    does not wait for onPreempt, and a scenario cannot know how many victims to await."""
    for k in keys:
        bufs[k] = evolve(bufs[k], preempted=True, preemptable=True)


def _unordered(s: State) -> str | None:
    """Why the order of this decision against other threads' calls is unknown, or None."""
    if s.strand != MAIN:
        return f"a decision on thread {s.strand}: its order against the other threads' calls is not known"
    if has_pending(s):
        return "a decision while calls of other threads were in flight"
    return None


def _decidable(name: str, capacity: int, s: State) -> tuple[State, Pool | None]:
    """The pool synced for a decision at ``s``, or None (and ``s`` loosened) when prediction has stopped,
    now or before (a decision whose order against other threads is unknown stops it)."""
    pool = _pool(s, capacity)
    if pool.lost is None and (why := _unordered(s)) is not None:
        pool = replace(pool, lost=why)
        s = evolve(s, pool=pool)
    if pool.lost is not None:
        return _loosen(s), None
    return s, sync(name, pool, s)


def submitted(name: str, capacity: int, s: State, made: tuple[int, ...],
              applies: Callable[[Submission], bool | None]) -> State:
    """allocAsync decided these submissions in list order (the vnpu decides inside the call).
    ``applies`` says whether the policy decides a submission (a valid request of a supported pair), or
    None when the model cannot tell (then prediction stops for the rest of the scenario)."""
    s, synced = _decidable(name, capacity, s)
    if synced is None:
        return s
    pool = synced
    bufs = dict(s.bufs)
    decided = dict(pool.decided)
    for sid in made:
        sub = s.subs[sid]
        verdict = applies(sub)
        if verdict is None:
            pool = replace(pool, lost=f"the outcome of the {sub.named()} is not predictable")
            break
        if not verdict:
            continue
        pl = place(name, pool, f"#{sid}", sub.attrs, candidates(pool, bufs))
        why = unsettled(pool, bufs, made) if pl.victims or (pl.block is None and name == "caching") else None
        if why is not None:
            pool = replace(pool, lost=why)
            break
        pool = pl.pool
        decided[sid] = (pl.block is not None, pl.why)
        _preempt(bufs, pl.victims)
    out = evolve(s, pool=replace(pool, decided=decided), bufs=bufs)
    return _loosen(out) if pool.lost is not None else out


def decision(s: State, sid: int) -> tuple[bool, str] | None:
    if s.pool is None or s.pool.lost is not None:
        return None
    return s.pool.decided.get(sid)


def delivered(s: State, sid: int, handle: str | None) -> Pool | None:
    """onAlloc answered submission ``sid``: an admitted block follows its buffer. A failed answer leaves
    the block under the submission's key, and the next sync releases it (the vnpu releases memory of an
    admitted allocation that fails later)."""
    pool = s.pool
    if pool is None or (sid not in pool.decided and f"#{sid}" not in pool.blocks):
        return pool
    decided = dict(pool.decided)
    decided.pop(sid, None)
    blocks = dict(pool.blocks)
    if handle is not None and f"#{sid}" in blocks:
        blocks[handle] = blocks.pop(f"#{sid}")
    return replace(pool, decided=decided, blocks=blocks)


def _over(name: str, pool: Pool) -> tuple[Pool, bool]:
    cap, res = pool.capacity, pool.reserved
    if name == "acl":
        return pool, acl.used(pool) + res > cap
    if name == "arena":
        return pool, arena.used(pool) + res > cap
    if caching.used(pool) + res > cap and pool.cache:
        pool = caching.collect(pool)
    return pool, caching.locked(pool) + res > cap


def pressure(name: str, capacity: int, s: State, reserved: int) -> State:
    """vnpu ``pressure=<bytes>``: reserve, then preempt victims in victim order while the policy's used
    bytes and the reservation exceed the capacity (caching cleans its cache first, each time)."""
    s, synced = _decidable(name, capacity, s)
    if synced is None:
        return s
    pool = replace(synced, reserved=reserved)
    bufs = dict(s.bufs)
    ok = True
    while True:
        pool, over = _over(name, pool)
        if not over:
            break
        why = unsettled(pool, bufs)
        if why is not None:
            return _loosen(evolve(s, pool=replace(pool, lost=why, pressure_ok=None), bufs=bufs))
        cands = candidates(pool, bufs, "normal" if name == "acl" else None)
        if not cands:
            ok = False
            break
        victim = victim_order(cands)[0]
        pool = release(name, pool, victim.key)
        _preempt(bufs, [victim.key])
    return evolve(s, pool=replace(pool, pressure_ok=ok), bufs=bufs)


def _loosen(s: State) -> State:
    """No exact prediction: every live unmapped buffer may be preempted by what the device does next."""
    bufs = {k: evolve(b, preemptable=True) if not (b.freed or b.preempted or b.preemptable) else b
            for k, b in s.bufs.items()}
    return evolve(s, bufs=bufs)


def lenient(s: State) -> bool:
    """A declared policy stopped predicting: the device may then preempt any unmapped buffer, as a
    device that declares nothing may."""
    return s.pool is not None and s.pool.lost is not None


def lose(s: State, capacity: int, why: str) -> State:
    pool = _pool(s, capacity)
    return _loosen(s if pool.lost is not None else evolve(s, pool=replace(pool, lost=why)))
