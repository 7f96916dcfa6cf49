"""The rule registry: every rule of the model cites the clause IDs of conformance/clauses.yaml it enforces.

A rule is a plain function decorated with ``@clause("id", ...)``; its docstring quotes the sentence
(``Spec: "..."``). The registry answers two questions: which rules cite a clause (coverage), and which
clauses a rule enforces (tests). Registration has no effect on the function itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_RULES: dict[str, tuple[str, ...]] = {}
_SHOWS: dict[str, tuple[str, ...]] = {}
CHAPTER_MODULES: Final = ("requests", "cookies", "allocation", "support", "mapping", "free", "priority", "loading",
                          "preemption", "crashes")


def clause(*ids: str) -> Callable[[F], F]:
    """Register the decorated function as a rule citing the given clause IDs."""
    if not ids:
        raise ValueError("a rule cites at least one clause")

    def register(fn: F) -> F:
        module = fn.__module__.rsplit(".", 1)[-1]
        _RULES[f"{module}.{fn.__name__}"] = tuple(ids)
        return fn

    return register


def shows(*ids: str) -> Callable[[F], F]:
    """Register the decorated function as saying what an observation demonstrates of the given clauses
    (State.shown): not a rule, it rejects nothing."""
    if not ids:
        raise ValueError("a demonstration names at least one clause")

    def register(fn: F) -> F:
        module = fn.__module__.rsplit(".", 1)[-1]
        _SHOWS[f"{module}.{fn.__name__}"] = tuple(ids)
        return fn

    return register


def demonstration_clauses() -> Mapping[str, tuple[str, ...]]:
    """Demonstration name (``module.function``) -> the clause IDs it may show."""
    _load_all()
    return dict(_SHOWS)


def rule_clauses() -> Mapping[str, tuple[str, ...]]:
    """Rule name (``module.function``) -> the clause IDs it cites."""
    _load_all()
    return dict(_RULES)


def cited_clauses() -> Mapping[str, tuple[str, ...]]:
    """Clause ID -> names of the rules citing it (sorted)."""
    _load_all()
    out: dict[str, list[str]] = {}
    for rule, ids in _RULES.items():
        for cid in ids:
            out.setdefault(cid, []).append(rule)
    return {cid: tuple(sorted(rules)) for cid, rules in sorted(out.items())}


def _load_all() -> None:
    # Importing the chapter modules registers their rules.
    for name in CHAPTER_MODULES:
        importlib.import_module(f"{__package__}.{name}")


@dataclass(frozen=True, slots=True)
class Reject:
    """A required behaviour the observation does not meet (a returned value, never an exception).

    clause: the clause ID violated; observed: what the trace shows; allowed: what the model accepts
    there; why: one sentence a report reader understands.
    """

    clause: str
    observed: str
    allowed: tuple[str, ...]
    why: str
