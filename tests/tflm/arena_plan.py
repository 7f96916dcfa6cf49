"""The planned head of an arena (TensorFlow Lite Micro's GreedyMemoryPlanner,
restated in docs/vnpu.md §6): which bytes a graph's temporary buffers need at most.

The vnpu's ``arena`` policy cannot plan (the NDK API carries no tensor lifetimes: its head is a stack,
reference_model/policies/arena.py). This module states the planning arithmetic the same policy family
uses when lifetimes are known, so that the kit can check its arena arithmetic against the real runtime
(test_tflm_arena.py): the high-water mark predicted here is the runtime's reported arena head.
Pure Python, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reference_model.policies.pool import round_up

ALIGN = 16


@dataclass(frozen=True, slots=True)
class GraphTensor:
    nbytes: int
    constant: bool = False  # has data in the model: never planned
    variable: bool = False


@dataclass(frozen=True, slots=True)
class GraphOp:
    inputs: tuple[int, ...]  # tensor indices; -1 for an absent optional input
    outputs: tuple[int, ...]
    scratch: tuple[int, ...] = ()  # bytes of the scratch buffers the kernel requests, in request order


@dataclass(frozen=True, slots=True)
class Planned:
    size: int  # rounded up to 16
    first: int  # inclusive scopes
    last: int


def planned_buffers(tensors: Sequence[GraphTensor], ops: Sequence[GraphOp], inputs: Sequence[int],
                    outputs: Sequence[int]) -> list[Planned]:
    """Planned buffers in insertion order: tensors by index (those without data, not variables, of
    non-zero size), then scratch buffers in request order. Scopes: subgraph inputs 0, operator i i+1;
    an input lives until its last consumer, an output from its producer, subgraph outputs to the end."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t in inputs:
        first[t] = last[t] = 0
    scratch: list[Planned] = []
    for i, op in enumerate(ops):
        scope = i + 1
        for t in op.inputs:
            if t >= 0:
                first.setdefault(t, scope)
                last[t] = max(last.get(t, scope), scope)
        for t in op.outputs:
            first.setdefault(t, scope)
            last[t] = max(last.get(t, scope), scope)
        scratch += [Planned(round_up(n, ALIGN), scope, scope) for n in op.scratch]
    final = len(ops)
    for t in outputs:
        last[t] = final
        first.setdefault(t, final)
    out = []
    for idx, tensor in enumerate(tensors):
        if tensor.constant or tensor.variable or tensor.nbytes == 0 or idx not in first:
            continue
        out.append(Planned(round_up(tensor.nbytes, ALIGN), first[idx], last[idx]))
    return out + scratch


def greedy_offsets(buffers: Sequence[Planned]) -> list[int]:
    """Offsets by the greedy rule: largest first (equal sizes: the later inserted first), each at the
    first gap among the already placed buffers whose lifetimes overlap its own, else after them."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, -i))
    offsets: dict[int, int] = {}
    placed: list[int] = []  # in ascending offset; equal offsets keep placement order
    for i in order:
        b = buffers[i]
        candidate = 0
        for j in placed:
            o = buffers[j]
            if o.last < b.first or o.first > b.last:
                continue
            if offsets[j] >= candidate + b.size:
                break
            candidate = max(candidate, offsets[j] + o.size)
        offsets[i] = candidate
        at = len(placed)
        for k, j in enumerate(placed):
            if offsets[j] > candidate:
                at = k
                break
        placed.insert(at, i)
    return [offsets[i] for i in range(len(buffers))]


def head_bytes(buffers: Sequence[Planned]) -> int:
    """The high-water mark: the bytes the arena's head reserves for the plan."""
    offs = greedy_offsets(buffers)
    return max((o + b.size for o, b in zip(offs, buffers, strict=True)), default=0)
