"""Plugin registration and the --npu-* options (DESIGN §6). Fixtures live in conformance/conftest.py."""


def pytest_addoption(parser):
    group = parser.getgroup("npuconf", "npuconf conformance suite")
    group.addoption("--npu-target", choices=["local"], default="local", help="Where the probe runs")
    group.addoption("--npu-impl", default=None, help="Local target: a Linux library exporting the 18 functions")
    group.addoption("--npu-profile", choices=["published-37", "aosp-2026"], default="published-37", help="Spec profile")
    group.addoption(
        "--npu-personality", choices=["published", "aosp-2026"], default="published", help="Virtual NPU personality"
    )
    group.addoption("--npu-timeout-multiplier", type=float, default=1.0, help="Scale every timeout")
