"""Reading a waiver file given on the command line into the model's waiver values."""

from __future__ import annotations

from pathlib import Path

import yaml

from reference_model.errors import ScenarioInvalid
from reference_model.waivers import Waiver, parse_waivers

from ..errors import UsageError
from .safe_yaml import load_yaml_file


def load_waiver_file(path: Path) -> tuple[Waiver, ...]:
    try:
        data = load_yaml_file(path)
    except OSError as exc:
        raise UsageError(f"--waivers {path}: {exc.strerror}; expected a readable YAML waiver file") from None
    except yaml.YAMLError as exc:
        raise ScenarioInvalid(str(path), None, "file", str(exc).splitlines()[0], "valid YAML") from None
    return parse_waivers(data, str(path))
