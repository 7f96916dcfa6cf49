"""Loading the scenario corpus from conformance/scenarios/<chapter>/*.yaml (docs/formats.md §2)."""

from __future__ import annotations

import difflib
import functools
import hashlib
import pickle
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

import yaml

from floor.limits import limit, over
from floor.user_cache import cache_key, read_entry, source_fingerprint, write_entry
from reference_model.errors import ScenarioInvalid
from reference_model.scenario import SYMBOLIC_INTS, Scenario, parse_scenario
from reference_model.vocabulary import Op

from ..errors import UsageError
from .checkout import REPO_ROOT, SCENARIO_ROOT
from .safe_yaml import load_yaml_text, read_yaml_bytes

CACHE_NAMESPACE: Final = "corpus"


def _read(path: Path) -> bytes:
    """A scenario file's bytes; an unreadable or oversized file is ScenarioInvalid naming it."""
    try:
        return read_yaml_bytes(path)
    except OSError as exc:
        raise ScenarioInvalid(_display(path), None, "file", exc.strerror, "a readable file") from None
    except yaml.YAMLError as exc:
        raise _not_yaml(exc, _display(path)) from None


def _not_yaml(exc: yaml.YAMLError, source: str) -> ScenarioInvalid:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}" if mark is not None else "file"
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return ScenarioInvalid(source, None, where, problem, "valid YAML")


@functools.lru_cache(maxsize=1024)
def _parsed(raw: bytes, source: str, chapter: str, known_clauses: frozenset[str] | None) -> tuple[Scenario, ...]:
    """A scenario file's scenarios, parsed once per process for the same bytes: a run reads the corpus
    for its plan and again for the claim's facts, and parsing is most of a short run's fixed cost.
    Scenarios are frozen values, so sharing them is safe; an edited file has other bytes."""
    try:
        data = load_yaml_text(raw.decode("utf-8", errors="replace"), source)
    except yaml.YAMLError as exc:
        raise _not_yaml(exc, source) from None
    if isinstance(data, Mapping) and "scenarios" in data:
        items = data["scenarios"]
        if not isinstance(items, list) or not items:
            raise ScenarioInvalid(source, None, "scenarios", items, "a non-empty list of scenarios")
        return tuple(_bounded(parse_scenario(item, source, chapter, known_clauses)) for item in items)
    return (_bounded(parse_scenario(data, source, chapter, known_clauses)),)


def _bounded(scenario: Scenario) -> Scenario:
    """`scenario`, when the files its `file_new` steps make add up to at most limit `scenario_file_bytes`:
    each is at most 64 MiB (the scenario parser's bound), but 48 of them held 3 GiB of the host's memory
    (the probe's files are memory on the local target and on a virtual device)."""
    total = 0
    for step in scenario.steps:
        if step.op is Op.FILE_NEW:
            size = step.arg("size")
            total += SYMBOLIC_INTS.get(size, 0) if isinstance(size, str) else size if isinstance(size, int) else 0
    most = limit("scenario_file_bytes")
    if total > most:
        raise ScenarioInvalid(
            scenario.source, scenario.id, "steps", total,
            f"file_new sizes adding up to at most {most} bytes ({over('scenario_file_bytes', 'their sum')})",
        )  # fmt: skip
    return scenario


SCENARIO_LAYOUT = "<chapter>/<id>.yaml files under it (docs/formats.md §2)"


def check_scenario_root(root: Path) -> None:
    """A scenario directory that is missing, or a file, is a one-line usage error naming it."""
    if root.is_dir():
        return
    found = "is not a directory" if root.exists() or root.is_symlink() else "does not exist"
    raise UsageError(f"scenario directory {root}: {found}; expected a directory of {SCENARIO_LAYOUT}")


def load_corpus(root: Path = SCENARIO_ROOT, known_clauses: frozenset[str] | None = None) -> tuple[Scenario, ...]:
    """Every scenario under root, sorted by id; ids must be unique across the corpus.

    A corpus already parsed from the same bytes, by the same parser code, is taken from the user cache
    (floor/user_cache.py): parsing is most of a short run's fixed cost."""
    check_scenario_root(root)
    paths = sorted(root.glob("*/*.yaml"))
    if not paths:
        raise UsageError(f"scenario directory {root}: holds no scenario files; expected {SCENARIO_LAYOUT}")
    shown = _Display()
    files = [(path, shown(path), _read(path)) for path in paths]
    key = cache_key(
        _parser_fingerprint(),
        str(limit("yaml_nodes")),
        str(limit("scenario_file_bytes")),
        "\0".join(sorted(known_clauses)) if known_clauses is not None else "\1",
        *(part for path, source, raw in files for part in (source, path.parent.name, raw)),
    )
    cached = _RECENT.get(key) or _cached_corpus(key)
    if cached is not None:
        _remember(key, cached)
        return cached
    scenarios: list[Scenario] = []
    first_seen: dict[str, str] = {}
    for path, source, raw in files:
        for scenario in _parsed(raw, source, path.parent.name, known_clauses):
            if scenario.id in first_seen:
                raise ScenarioInvalid(
                    scenario.source,
                    scenario.id,
                    "id",
                    scenario.id,
                    f"an id not already used in {first_seen[scenario.id]}",
                )
            first_seen[scenario.id] = scenario.source
            scenarios.append(scenario)
    corpus = tuple(sorted(scenarios, key=lambda s: s.id))
    write_entry(CACHE_NAMESPACE, key, pickle.dumps(corpus, protocol=pickle.HIGHEST_PROTOCOL))
    _remember(key, corpus)
    return corpus


# The last corpora loaded in this process, by cache key: a run reads the corpus for its plan and again
# for the claim's facts (host/suite/basis.py).
_RECENT: dict[str, tuple[Scenario, ...]] = {}
RECENT_KEPT: Final = 4


def _remember(key: str, corpus: tuple[Scenario, ...]) -> None:
    _RECENT.pop(key, None)
    _RECENT[key] = corpus
    while len(_RECENT) > RECENT_KEPT:
        del _RECENT[next(iter(_RECENT))]


@functools.cache
def _parser_fingerprint() -> str:
    """What a parse result depends on besides the files: the parser's code, PyYAML's and Python's versions."""
    here = Path(__file__).parent
    code = [*sorted((REPO_ROOT / "reference_model").rglob("*.py")), here / "corpus.py", here / "safe_yaml.py"]
    return cache_key(source_fingerprint(p for p in code if "__pycache__" not in p.parts), yaml.__version__, sys.version)


def _cached_corpus(key: str) -> tuple[Scenario, ...] | None:
    """The corpus stored under `key`, when the cache holds one this user wrote (else None)."""
    data = read_entry(CACHE_NAMESPACE, key)
    if data is None:
        return None
    try:
        corpus = pickle.loads(data)
    except Exception:  # a truncated or outdated entry is a miss
        return None
    if not isinstance(corpus, tuple) or not all(isinstance(s, Scenario) for s in corpus):
        return None
    return corpus


def corpus_hash(root: Path = SCENARIO_ROOT) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.glob("*/*.yaml")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def select(
    scenarios: Iterable[Scenario], keyword: str | None, clauses: Iterable[str], scenario_ids: Iterable[str] = ()
) -> tuple[Scenario, ...]:
    """-k EXPR (substring terms joined by and/or/not, parentheses), --clause and --scenario (exact ids)
    filters, all of them applying at once."""
    wanted_clauses = frozenset(clauses)
    wanted_ids = frozenset(scenario_ids)
    chosen = []
    for scenario in scenarios:
        if wanted_ids and scenario.id not in wanted_ids:
            continue
        if wanted_clauses and not wanted_clauses & set(scenario.clauses):
            continue
        if keyword and not keyword_matches(keyword, scenario.id):
            continue
        chosen.append(scenario)
    return tuple(chosen)


def check_scenario_ids(scenario_ids: Sequence[str], scenarios: Iterable[Scenario], root: Path) -> None:
    """Every --scenario ID names a scenario under ``root``; the first that does not is a usage error
    suggesting the closest ids."""
    known = [s.id for s in scenarios]
    known_set = frozenset(known)
    for wanted in scenario_ids:
        if wanted in known_set:
            continue
        closest = difflib.get_close_matches(wanted, known, n=3)
        hint = f"; closest: {', '.join(closest)}" if closest else ""
        raise UsageError(f"--scenario {wanted}: no scenario with this id in {root}{hint}")


def keyword_matches(expression: str, name: str) -> bool:
    """Evaluate a pytest-style -k expression against one name, without eval()."""
    tokens = expression.replace("(", " ( ").replace(")", " ) ").split()
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise ValueError(f"-k {expression!r}: expression ends too early")
        position += 1
        return tokens[position - 1]

    def parse_or() -> bool:
        value = parse_and()
        while peek() == "or":
            take()
            value = parse_and() or value
        return value

    def parse_and() -> bool:
        value = parse_not()
        while peek() == "and":
            take()
            value = parse_not() and value
        return value

    def parse_not() -> bool:
        if peek() == "not":
            take()
            return not parse_not()
        token = take()
        if token == "(":
            value = parse_or()
            if take() != ")":
                raise ValueError(f"-k {expression!r}: missing ')'")
            return value
        if token in ("and", "or", ")"):
            raise ValueError(f"-k {expression!r}: unexpected {token!r}")
        return token in name

    result = parse_or()
    if position != len(tokens):
        raise ValueError(f"-k {expression!r}: unexpected {tokens[position]!r}")
    return result


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class _Display:
    """`_display` of the files of one corpus, resolving each chapter directory once (not every file)."""

    def __init__(self) -> None:
        self.cwd = Path.cwd().resolve()
        self.chapters: dict[Path, Path] = {}

    def __call__(self, path: Path) -> str:
        if path.is_symlink():
            return _display(path)
        chapter = self.chapters.get(path.parent)
        if chapter is None:
            chapter = self.chapters[path.parent] = path.parent.resolve()
        try:
            return str((chapter / path.name).relative_to(self.cwd))
        except ValueError:
            return str(path)
