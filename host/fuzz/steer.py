"""Steering a campaign toward what it has not reached or judged yet (host.fuzz.coverage).

Each program the campaign runs is chosen among ``CANDIDATES`` programs of its index (variants 0, 1, ...:
each is generated on its own, so its id still regenerates it, host.fuzz.generate.program_id). A
candidate scores by its grammar cells: a cell no program ran counts most (novelty), and a cell counts by
the clauses x outcomes it goes with that the campaign judged rarely or never (promise). What a cell goes
with is learned from the programs judged so far, and before that taken from the corpus: the clauses cited
by the corpus scenarios whose steps reach the cell. With nothing reached and nothing judged (the
generator alone, offline) the choice follows novelty: the grammar is covered in fewer programs."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from reference_model.scenario import Scenario
from reference_model.vocabulary import Op

from ..suite import load_catalogue, load_corpus
from .cells import program_cells
from .coverage import SHOWN, Judged, Snapshot
from .generate import Drawn, draw
from .grammar import Cell

CANDIDATES: Final = 3
# Steps of a corpus scenario up to the first the caller's model refuses count for the prior; a cell that
# many scenarios reach says little of any one clause (its share of them is its weight).
Prior = Mapping[Cell, Mapping[str, float]]


class Scorer:
    """The weights of cells, from one snapshot of the coverage (Coverage.snapshot, taken once per batch)."""

    def __init__(self, snapshot: Snapshot, prior: Prior) -> None:
        self.reached = snapshot.reached
        self.judged = snapshot.judged
        self.together = snapshot.together
        self.prior = prior
        self.memo: dict[Cell, float] = {}

    def need(self, pair: Judged) -> float:
        return 1.0 / (1 + self.judged[pair])

    def weight(self, cell: Cell) -> float:
        found = self.memo.get(cell)
        if found is not None:
            return found
        runs = self.reached[cell]
        novelty = 1.0 / (1 + runs)
        # What the cell goes with, learned (the share of its programs that judged each pair) or, for the
        # clauses nothing demonstrated yet, from the corpus (a claim that fades as the cell runs without
        # them); each pair counts by how rarely it was judged.
        goes_with = {pair: n / runs for pair, n in self.together.get(cell, {}).items()} if runs else {}
        for clause, share in self.prior.get(cell, {}).items():
            if not self.judged[(clause, SHOWN)]:
                goes_with[(clause, SHOWN)] = max(share * novelty, goes_with.get((clause, SHOWN), 0.0))
        promise = sum(share * self.need(pair) for pair, share in goes_with.items()) / max(1, len(goes_with))
        self.memo[cell] = novelty + promise
        return novelty + promise

    def score(self, drawn: Drawn) -> float:
        return sum(self.weight(cell) for cell in drawn.cells)

    def choose(self, candidates: Sequence[Drawn]) -> Drawn:
        """The candidate that scores best (the first among equals)."""
        return max(candidates, key=self.score)


def choose(scorer: Scorer, seed: int, index: int, **capabilities: Any) -> Drawn:
    """Program ``index`` of the stream ``seed``: the best of its candidates (host.fuzz.generate.draw's
    ``capabilities``: vnpu_control, loads, pointer64, pair, unsupported, capacity)."""
    return scorer.choose([draw(seed, index, variant=variant, **capabilities) for variant in range(CANDIDATES)])


def corpus_prior(corpus: Sequence[Scenario]) -> Prior:
    """Cell -> clause -> the share of the corpus scenarios reaching the cell that cite the clause."""
    reaching: Counter[Cell] = Counter()
    citing: dict[Cell, Counter[str]] = {}
    for scenario in corpus:
        for cell in program_cells({"steps": list(_items(scenario))}):
            reaching[cell] += 1
            citing.setdefault(cell, Counter()).update(scenario.clauses)
    return {cell: {clause: n / reaching[cell] for clause, n in clauses.items()} for cell, clauses in citing.items()}


@functools.lru_cache(maxsize=1)
def kit_prior() -> Prior:
    """The prior of the kit's own corpus (read once per process)."""
    return corpus_prior(load_corpus(known_clauses=load_catalogue().ids()))


def _items(scenario: Scenario) -> Iterator[dict[str, Any]]:
    """A scenario's steps as program items (the YAML form): a parallel block one item."""
    block: list[list[dict[str, Any]]] | None = None
    for step in scenario.steps:
        if step.op is Op.PAR_BEGIN:
            block = []
            continue
        if step.op is Op.PAR_END:
            yield {"parallel": block or []}
            block = None
            continue
        item = {step.op.value: {name: _plain(value) for name, value in step.args}}
        if block is None:
            yield item
            continue
        thread = step.thread or 0
        while len(block) <= thread:
            block.append([])
        block[thread].append(item)


def _plain(value: Any) -> Any:
    """A parsed argument as the YAML form has it: tuples as lists, pairs of names and values as mappings."""
    if isinstance(value, tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(v) for v in value]
    return value
