"""The generated C and Python views of the vocabulary must match their source."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_fresh():
    done = subprocess.run(
        [sys.executable, str(ROOT / "ndk_probe" / "tools" / "gen_vocabulary.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_check_reports_a_stale_file(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "ndk_probe" / "tools"))
    try:
        import gen_vocabulary
    finally:
        sys.path.pop(0)
    stale = tmp_path / "vocabulary.h"
    stale.write_text("/* old */\n")
    monkeypatch.setattr(gen_vocabulary, "C_HEADER", stale)
    monkeypatch.setattr(gen_vocabulary, "ROOT", tmp_path)
    monkeypatch.setattr(gen_vocabulary, "PY_MODULE", tmp_path / "vocabulary.py")
    (tmp_path / "vocabulary.py").write_text((ROOT / "reference_model" / "vocabulary.py").read_text())
    assert gen_vocabulary.main(["--check"]) == 1


def test_page_size_and_protection_bits_match_the_model():
    from reference_model import scenario, state
    from reference_model.vocabulary import PAGE_SIZE, PROT_BITS

    assert PAGE_SIZE == state.PAGE == scenario.SYMBOLIC_INTS["PAGE"]
    assert PROT_BITS == {"READ": state.PROT_READ, "WRITE": state.PROT_WRITE, "EXEC": state.PROT_EXEC}
    assert tuple(PROT_BITS) == scenario.PROT_NAMES
    header = (ROOT / "ndk_probe" / "gen" / "vocabulary.h").read_text()
    assert f"#define NPUCONF_PAGE_SIZE {PAGE_SIZE}\n" in header
    assert all(f"#define NPUCONF_PROT_{name} {bit}\n" in header for name, bit in PROT_BITS.items())


def test_cb_action_grammar_matches_the_scenario_reader_and_the_probe_parser():
    from reference_model.scenario import CB_ACTION, CB_KINDS
    from reference_model.vocabulary import CALLBACK_KINDS, CB_ACTIONS, ArgKind

    sys.path.insert(0, str(ROOT / "ndk_probe" / "tools"))
    try:
        from gen_vocabulary import cb_action_macro
    finally:
        sys.path.pop(0)

    assert CB_KINDS == CALLBACK_KINDS
    # The probe's parser takes its words from the header's X-macro (a word it does not handle fails the
    # build: -Wswitch over the generated enum), which --check keeps current.
    header = (ROOT / "ndk_probe" / "gen" / "vocabulary.h").read_text()
    examples = {ArgKind.I32: ["-5", "1000"], ArgKind.REQ: ["r0"]}
    for spec in CB_ACTIONS:
        if spec.value is None:
            values = [""]
        elif spec.min is not None and spec.max is not None:
            values = [str(spec.min), str(spec.max)]
            assert CB_ACTION.match(f"{spec.word}{spec.min - 1}") is None
            assert CB_ACTION.match(f"{spec.word}{spec.max + 1}") is None
            # The bounds reach the probe through the generated header, which --check keeps current.
            macro = cb_action_macro(spec.word)
            assert f"#define {macro}_MIN {spec.min}\n" in header and f"#define {macro}_MAX {spec.max}\n" in header
        else:
            values = examples[spec.value]
        for value in values:
            assert CB_ACTION.match(spec.word + value), spec.word + value
    assert CB_ACTION.match("explode") is None


def test_every_vnpu_command_is_documented_for_implementers():
    # The vnpu dispatches on the generated X-macro (a command without its handler fails the build); the
    # public header's comment is prose, written by hand.
    from reference_model.vocabulary import VNPU_COMMANDS

    header = (ROOT / "ndk_probe" / "include" / "npuconf" / "vnpu_control.h").read_text()
    for key in VNPU_COMMANDS:
        assert f" *   {key}=" in header, key
