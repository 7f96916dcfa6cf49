"""`npuconf errata RUN... [--out DIR]`: the draft for the spec's owners (reports/renderers/errata.py), in HTML and
Markdown, from the runs given and the kit's own conformance/errata.yaml."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import yaml

from floor.safe_io import output_dir, write_text
from reference_model.readings import READING_TABLE
from reports.recorded.results import load_results
from reports.renderers.errata import (
    AtlasRule,
    Errata,
    ErrataSource,
    Proposal,
    build_errata,
    render_errata_html,
    render_errata_markdown,
)

from ..errors import UsageError
from ..suite import REPO_ROOT, load_catalogue, load_yaml_file
from .own_outputs import check_replaceable
from .run_dir import run_results_path

ERRATA_SOURCE: Final = REPO_ROOT / "conformance" / "errata.yaml"
ERRATA_HTML: Final = "errata.html"
ERRATA_MARKDOWN: Final = "errata.md"
# What each file says of itself in its first lines (errata.html.j2, reports/renderers/errata.py): an existing file
# without it is not replaced (own_outputs.py).
ERRATA_HTML_SIGNATURE: Final = b"<title>npuconf errata draft"
ERRATA_MARKDOWN_SIGNATURE: Final = b"# Errata draft: android/npumanager/buffer.h"
DEFAULT_DIR: Final = Path("out")


class ErrataSourceInvalid(UsageError):
    """conformance/errata.yaml is not what the kit ships: a broken checkout (exit 3)."""


def _text(entry: Mapping[str, object], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ErrataSourceInvalid(f"{ERRATA_SOURCE}: {where}.{key} is not a text")
    return " ".join(value.split())


def _ids(entry: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ErrataSourceInvalid(f"{ERRATA_SOURCE}: {where}.{key} is not a list of IDs")
    return tuple(value)


def _proposal(entry: object, where: str, known: frozenset[str], sentences: bool) -> Proposal:
    if not isinstance(entry, dict):
        raise ErrataSourceInvalid(f"{ERRATA_SOURCE}: {where} is not a mapping")
    clauses = _ids(entry, "sentences", where) if sentences else ()
    unknown = [c for c in clauses if c not in known]
    if unknown or (sentences and not clauses):
        raise ErrataSourceInvalid(f"{ERRATA_SOURCE}: {where}.sentences names no clause or an unknown one "
                                  f"({', '.join(unknown) or 'none given'})")
    return Proposal(clauses, _text(entry, "reading", where), _text(entry, "why", where), _text(entry, "aosp", where),
                    _ids(entry, "discrepancies", where), _text(entry, "proposed", where))


def errata_source(path: Path = ERRATA_SOURCE) -> ErrataSource:
    """The catalogue's quotes and conformance/errata.yaml, checked: every reading of the model that can give
    WARN has an entry, and every clause named is the catalogue's."""
    try:
        data = load_yaml_file(path)
    except (OSError, yaml.YAMLError) as exc:
        raise ErrataSourceInvalid(f"{path}: cannot read the kit's errata source ({exc})") from None
    if not isinstance(data, dict):
        raise ErrataSourceInvalid(f"{path}: not a mapping")
    quotes = dict(load_catalogue().quotes())
    known = frozenset(quotes)
    raw_readings = data.get("readings")
    raw_sentences = data.get("sentences")
    raw_atlas = data.get("atlas")
    if not isinstance(raw_readings, dict) or not isinstance(raw_sentences, dict) or not isinstance(raw_atlas, list):
        raise ErrataSourceInvalid(f"{path}: expected readings and sentences (mappings) and atlas (a list)")
    readings = {str(k): _proposal(v, f"readings.{k}", known, True) for k, v in raw_readings.items()}
    missing = sorted(set(READING_TABLE) - set(readings), key=lambda r: int(r[1:]))
    if missing:
        raise ErrataSourceInvalid(f"{path}: no entry for the reading(s) {', '.join(missing)} of the model")
    sentences = {}
    for key, value in raw_sentences.items():
        if key not in known:
            raise ErrataSourceInvalid(f"{path}: sentences.{key} is not a clause of the catalogue")
        sentences[str(key)] = _proposal(value, f"sentences.{key}", known, False)
    rules = []
    for index, rule in enumerate(raw_atlas):
        if not isinstance(rule, dict) or rule.get("sentence") not in known or not isinstance(rule.get("aspect"), str):
            raise ErrataSourceInvalid(f"{path}: atlas[{index}] needs an aspect and a sentence of the catalogue")
        rules.append(AtlasRule(str(rule["aspect"]), str(rule.get("question", "")), str(rule["sentence"])))
    others = data.get("not_sentences", {})
    if not isinstance(others, dict):
        raise ErrataSourceInvalid(f"{path}: not_sentences is not a mapping")
    return ErrataSource(quotes, readings, sentences, tuple(rules), {str(k): str(v) for k, v in others.items()})


def write_errata(runs: Sequence[Path], out_dir: Path) -> tuple[Errata, dict[str, Path]]:
    """The draft for the runs in `runs`, written as out_dir/errata.html and out_dir/errata.md."""
    paths = {"html": out_dir / ERRATA_HTML, "markdown": out_dir / ERRATA_MARKDOWN}
    for name, signature in (("html", ERRATA_HTML_SIGNATURE), ("markdown", ERRATA_MARKDOWN_SIGNATURE)):
        check_replaceable(paths[name], signature, "--out")
    loaded = [load_results(run_results_path(run)) for run in runs]
    errata = build_errata(errata_source(), loaded)
    output_dir(out_dir)
    write_text(paths["html"], render_errata_html(errata))
    write_text(paths["markdown"], render_errata_markdown(errata))
    return errata, paths


def default_dir(runs: Sequence[Path]) -> Path:
    """One run: its own directory (report.html links errata.html beside it); several: out/ (beside
    `npuconf spec`'s default page)."""
    return run_results_path(runs[0]).parent if len(runs) == 1 else DEFAULT_DIR


def errata_command(args: argparse.Namespace) -> int:
    runs: list[Path] = args.runs
    out = args.out if args.out is not None else default_dir(runs)
    errata, paths = write_errata(runs, out)
    needed = sum(1 for e in errata.readings if e.needed_on)
    print(f"errata: {len(errata.readings)} readings ({needed} needed by a device of these runs), "
          f"{len(errata.differing)} sentences where the devices differ")
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0
