"""Plugin registration and the --npu-* options only, made from the kit's option table (host/options.py).
Fixtures live in conformance/conftest.py."""

from host.options import add_options, add_target_option
from host.targets.kinds import DEFAULT_KIND, KIND_NAMES
from reports.recorded.plan_options import PYTEST


def pytest_addoption(parser):
    group = parser.getgroup("npuconf", "npuconf conformance suite")
    add_target_option(
        group.addoption, "--npu-target", KIND_NAMES, f"where the probe runs (default: {DEFAULT_KIND})", DEFAULT_KIND
    )
    add_options(group.addoption, PYTEST, prefix="--npu-")
