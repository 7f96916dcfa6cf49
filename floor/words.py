"""Counts in words, for every line and page the kit prints: `1 divergence`, `2 divergences`."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """`n` and the noun that agrees with it (`plural` for irregular nouns; else `singular` + "s")."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
