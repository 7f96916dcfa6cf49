"""Several threads in one trace (formats §5 ``th``): strands, and calls whose effects are not placed yet.

A *strand* is where calls pair: a thread (``main``, ``t<k>``, ``w<N>``), or ``<th>/<depth>`` for a call a
callback makes inside another call of the same thread (``trace.read_events`` assigns them). Each strand
has at most one call in flight. The state keeps the in-flight call of the strand being judged in
``State.inflight`` and parks the others in ``State.parked``; chapter modules keep seeing one
``inflight``: the one of the event's strand.

A call on another strand than ``main`` takes effect at some instant between its ``call`` and its
``ret`` event, relative to the events of the other threads. Its call-time effects are therefore kept
*pending* (``Inflight.pending``) at its ``call`` event, and the judge (``interleaving.advance``) branches
before every event that reads the state: in one candidate per reachable combination the pending
effects of other strands are applied first (in any order; identical results merge), and the ``ret``
event applies what is still pending. Effects applied at ``ret`` time by the chapter modules (a map, a
setter) stay there. Calls on ``main`` outside parallel blocks are never pending, so a single-threaded
trace is judged exactly as before.
"""

from __future__ import annotations

from typing import Final

from .state import Inflight, State, evolve

MAIN: Final = "main"


def switch(s: State, strand: str) -> State:
    """The state with ``strand``'s in-flight call in ``inflight`` (the previous strand's parked)."""
    if s.strand == strand:
        return s
    parked = dict(s.parked)
    current = parked.pop(strand, None)
    if s.inflight is not None:
        parked[s.strand] = s.inflight
    return evolve(s, strand=strand, inflight=current, parked=tuple(sorted(parked.items())))


def has_pending(s: State) -> bool:
    return (s.inflight is not None and s.inflight.pending) or any(inf.pending for _, inf in s.parked)


def pending_strands(s: State) -> list[str]:
    """Strands whose call in flight has its call-time effects still to apply."""
    out = [strand for strand, inf in s.parked if inf.pending]
    if s.inflight is not None and s.inflight.pending:
        out.append(s.strand)
    return out


def inflights(s: State) -> list[tuple[str, Inflight]]:
    """Every call in flight, by strand."""
    out = list(s.parked)
    if s.inflight is not None:
        out.append((s.strand, s.inflight))
    return out


def deferred(step: int, op: str) -> Inflight:
    return Inflight(step, op, pending=True)


# Calls whose overlap with a call of the same op on another thread a chapter judges (allocation.R21).
OVERLAP_OPS: Final = frozenset({"alloc"})


def overlapping_calls(s: State, step: int, op: str) -> State:
    """``s`` at the ``call`` of ``step``: when another strand has a call of the same op in flight, both steps
    are recorded in ``State.overlaps`` (their intervals intersect, whatever the placement of effects)."""
    others = {inf.step for strand, inf in inflights(s) if inf.op == op and strand != s.strand}
    if not others:
        return s
    return evolve(s, overlaps=s.overlaps | others | {step})
