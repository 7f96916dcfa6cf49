"""Harness errors. All derive from reference_model.errors.KitError (the kit's one root)."""

from __future__ import annotations

from reference_model.errors import KitError
from reports.recorded.run_options import npuconf_command


class UsageError(KitError):
    """The user asked for something that cannot be done as asked (exit 3)."""


class InfraError(KitError):
    """The infrastructure failed around a scenario (probe missing, adb, push): verdict ERROR, never FAIL."""


class ProbeBuildError(InfraError):
    """The probe or the virtual NPU could not be built."""

    def __init__(self, command: str, output: str) -> None:
        self.command = command
        self.output = output
        lines = output.strip().splitlines()
        first_error = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "no output")
        super().__init__(f"probe build failed: `{command}`: {first_error.strip()}; run it by hand to see the full log")


class StaleProbe(InfraError):
    """The probe's op table is not the kit's: results from it would be meaningless."""

    def __init__(self, probe: str, probe_line: str, kit_line: str) -> None:
        self.probe = probe
        self.probe_line = probe_line
        self.kit_line = kit_line
        super().__init__(
            f"probe op table differs from the kit's ({probe}: {probe_line!r}, kit: {kit_line!r}): "
            f"rebuild the probe with `{npuconf_command('probe', 'build')}`"
        )


class RunInterrupted(KitError):
    """Ctrl-C during `npuconf run`: what was recorded, and how to go on (exit 2)."""

    def __init__(self, message: str, kept: int) -> None:
        self.kept = kept
        super().__init__(message)
