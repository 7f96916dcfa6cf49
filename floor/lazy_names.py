"""Package exports imported when first used (a module `__getattr__`, PEP 562), so that importing a package
for one light name does not load its heavy modules: `reports` for `safe_io` (every command), `host.targets`
for the local target (no adb code), `host.targets.virtual_device` for a device process."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: a name of `modules` is imported from its module (relative to the
    package) when first used, then kept in the package; any other name is an AttributeError."""

    def get(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return get
