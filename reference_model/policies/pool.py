"""The state every allocation policy shares (docs/model.md §7): blocks, free cache, arena holes.

A block is the memory one admitted buffer takes. It is keyed by the buffer handle once onAlloc
delivered it, and by ``#<submission id>`` before that. Pure values; the policies return new ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

KIB: Final = 1024
MIB: Final = 1024 * 1024

# Buffer types (ndk_probe/include/android/npumanager/buffer.h).
TYPE_MODEL_EXECUTABLE: Final = 1
TYPE_MODEL_WEIGHTS: Final = 2


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def round_down(n: int, to: int) -> int:
    return n // to * to


@dataclass(frozen=True, slots=True)
class Block:
    seq: int  # admission order
    size: int  # the size the request asked for
    charge: int  # bytes the block takes from its region
    region: str  # acl: "normal" / "huge"; caching: "main"; arena: "head" / "tail"
    start: int = 0  # arena: offset of the block in the arena


@dataclass(frozen=True, slots=True)
class Candidate:
    """A buffer the device may preempt now (held by the user, unmapped, no load in flight)."""

    key: str
    priority: int  # current priority: the numerically greatest value goes first
    seq: int
    block: Block


@dataclass(frozen=True, slots=True)
class Pool:
    capacity: int
    blocks: Mapping[str, Block]
    cache: tuple[int, ...] = ()  # caching: sizes of freed blocks kept for reuse (sorted)
    holes: tuple[Block, ...] = ()  # arena: released blocks not reclaimed yet
    reserved: int = 0  # the vnpu pressure=<bytes> reservation
    next_seq: int = 1
    # Submissions the policy decided at allocAsync, awaiting their onAlloc: id -> (admitted, why).
    decided: Mapping[int, tuple[bool, str]] = field(default_factory=dict)
    pressure_ok: bool | None = None  # the answer predicted for the vnpu pressure command in flight
    lost: str | None = None  # why exact prediction stopped (then the text's leniency applies)

    def key(self) -> tuple[object, ...]:
        return (tuple(sorted(self.blocks.items())), self.cache, self.holes, self.reserved, self.next_seq,
                tuple(sorted(self.decided.items())), self.pressure_ok, self.lost)


@dataclass(frozen=True, slots=True)
class Placement:
    """The answer of a policy to one request: the new pool, the block (None: ENOMEM), the buffers it
    preempted to make room, and a sentence that says why."""

    pool: Pool
    block: Block | None
    victims: tuple[str, ...]
    why: str


def with_block(pool: Pool, key: str, block: Block, **changes: object) -> Pool:
    blocks = dict(pool.blocks)
    blocks[key] = block
    return replace(pool, blocks=blocks, next_seq=pool.next_seq + 1, **changes)  # type: ignore[arg-type]


def without(pool: Pool, key: str) -> Pool:
    blocks = dict(pool.blocks)
    del blocks[key]
    return replace(pool, blocks=blocks)


def victim_order(cands: list[Candidate]) -> list[Candidate]:
    """The vnpu's victim order (docs/vnpu.md §7): greatest priority value first, then oldest admission."""
    return sorted(cands, key=lambda c: (-c.priority, c.seq))
