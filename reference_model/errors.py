"""The kit's exception family: one root, facts in attributes, messages that say observed, expected and the fix."""

from __future__ import annotations


class KitError(Exception):
    """Root of every exception the kit raises on purpose."""


class ScenarioInvalid(KitError, ValueError):
    """A scenario file does not follow docs/formats.md §2.

    The message is one line: file, scenario, field, what was found and what was expected.
    """

    def __init__(self, source: str, scenario: str | None, field: str, found: object, expected: str) -> None:
        self.source = source
        self.scenario = scenario
        self.field = field
        self.found = found
        self.expected = expected
        where = f"{source}: scenario {scenario}" if scenario else source
        super().__init__(f"{where}: {field}: expected {expected}, found {found!r}")

    def __reduce__(self) -> tuple[type[ScenarioInvalid], tuple[str, str | None, str, object, str]]:
        return (type(self), (self.source, self.scenario, self.field, self.found, self.expected))


class ModelCrash(KitError):
    """A bug in the reference model: a state the model itself says cannot happen.

    If you see this, the kit is wrong, not the device: please file a bug with the scenario and trace.
    """


class Unjudgeable(KitError):
    """The trace cannot be judged: it contradicts the scenario it claims to run, or the scenario itself
    relies on undefined behaviour (a freed request, an unbound buffer). The verdict is ERROR, never FAIL.
    """

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(f"line {line}: {message}")

    def __reduce__(self) -> tuple[type[Unjudgeable], tuple[int, str]]:
        return (type(self), (self.line, self.message))
