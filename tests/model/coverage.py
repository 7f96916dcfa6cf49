"""Which tests exercise which rule (conforming and non-conforming), checked by test_coverage.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

COVERED: dict[str, set[str]] = {}


def covers(*rules: str, good: bool = True, bad: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        for rule in rules:
            kinds = COVERED.setdefault(rule, set())
            if good:
                kinds.add("good")
            if bad:
                kinds.add("bad")
        return fn

    return mark
