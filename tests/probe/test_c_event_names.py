"""The probe's C names trace events only through the vocabulary: every event opens with trace_event_open
and an NPUCONF_EV_* name generated from ndk_probe/vocabulary.yaml, so no event name is spelled twice."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "ndk_probe" / "src"
# The one place that writes the "ev" key: trace_event_open in the trace writer.
OPENER = Path("probe") / "trace_writer.c"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_LITERAL_EVENT = re.compile(r'\\"ev\\"')  # `"{\"ev\":\"call\""`: an event opened by hand
_EV_KEY = re.compile(r'"ev"')  # jb_str(ev, "ev", ...): the key written outside the opener
_OPEN_WITH_LITERAL = re.compile(r'trace_event_open\s*\([^,()]*,\s*"')  # a name not from the vocabulary


def problems(rel: Path, text: str) -> list[str]:
    """Where `text` (the C file `rel`) names an event other than through trace_event_open(NPUCONF_EV_*)."""
    code = _COMMENT.sub("", text)
    found = [f"{rel}: opens an event in a string literal" for _ in _LITERAL_EVENT.finditer(code)]
    if rel != OPENER:
        found += [f'{rel}: writes the "ev" key itself' for _ in _EV_KEY.finditer(code)]
    found += [f"{rel}: passes trace_event_open a literal name" for _ in _OPEN_WITH_LITERAL.finditer(code)]
    return found


def test_every_event_is_opened_with_a_vocabulary_name() -> None:
    found = []
    for path in sorted(SOURCES.rglob("*.[ch]")):
        found += problems(path.relative_to(SOURCES), path.read_text())
    assert found == []
    assert "trace_event_open" in (SOURCES / OPENER).read_text()


def test_the_check_names_each_way_of_spelling_an_event() -> None:
    rel = Path("probe") / "teardown.c"
    assert problems(rel, 'jb_raw(&ev, "{\\"ev\\":\\"settle\\"");') == [f"{rel}: opens an event in a string literal"]
    assert problems(rel, 'jb_str(&ev, "ev", "settle");') == [f'{rel}: writes the "ev" key itself']
    assert problems(rel, 'trace_event_open(&ev, "settle");') == [f"{rel}: passes trace_event_open a literal name"]
    assert problems(rel, '/* {"ev":"settle"} */ trace_event_open(&ev, NPUCONF_EV_SETTLE);') == []
    assert problems(OPENER, 'jb_str(ev, "ev", name);') == []
