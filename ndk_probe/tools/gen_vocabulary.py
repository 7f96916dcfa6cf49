#!/usr/bin/env python3
"""Generate the C and Python views of ndk_probe/vocabulary.yaml.

Usage: gen_vocabulary.py [--check]

With --check nothing is written; the exit status is 1 and the stale files are named when a
generated file differs from what the vocabulary produces now.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "ndk_probe" / "vocabulary.yaml"
C_HEADER = ROOT / "ndk_probe" / "gen" / "vocabulary.h"
PY_MODULE = ROOT / "reference_model" / "vocabulary.py"

BANNER = (
    "Generated from ndk_probe/vocabulary.yaml by ndk_probe/tools/gen_vocabulary.py. "
    "DO NOT EDIT; change the source and regenerate."
)


def vocabulary_hash(vocab: dict) -> str:
    """Hash of everything the probe and the host must agree on (ops, kinds, errno names)."""
    canonical = {
        "version": vocab["version"],
        "ops": [[op["name"], op["api"], [[a["name"], a["kind"]] for a in op["args"]]] for op in vocab["ops"]],
        "errnos": vocab["errnos"],
        "enums": vocab["enums"],
        "probe_constants": vocab["probe_constants"],
    }
    digest = hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()
    return digest[:16]


def list_lines(vocab: dict) -> list[str]:
    """The exact lines `npuconf-probe --list` prints; the host compares them with these."""
    lines = [f"vocabulary {vocab['version']} {vocabulary_hash(vocab)}"]
    for op in vocab["ops"]:
        args = " ".join(f"{a['name']}:{a['kind']}" for a in op["args"])
        lines.append(f"op {op['name']} {op['api'] or '-'}{(' ' + args) if args else ''}")
    return lines


def render_c(vocab: dict) -> str:
    kinds = list(vocab["arg_kinds"])
    ops = vocab["ops"]
    out = [f"/* {BANNER} */", "#ifndef NPUCONF_GEN_VOCABULARY_H", "#define NPUCONF_GEN_VOCABULARY_H", ""]
    out += ["#include <errno.h>", "#include <stddef.h>", ""]
    out.append(f"#define NPUCONF_VOCAB_VERSION {vocab['version']}")
    out.append(f'#define NPUCONF_VOCAB_HASH "{vocabulary_hash(vocab)}"')
    out.append(f"#define NPUCONF_MAX_OP_ARGS {max(len(op['args']) for op in ops)}")
    out.append("")
    out.append("enum npuconf_arg_kind {")
    out += [f"    ARG_{k.upper()}," for k in kinds]
    out.append("};")
    out.append("")
    out.append("enum npuconf_op {")
    out += [f"    OP_{op['name'].upper()}," for op in ops]
    out.append("    OP__COUNT")
    out.append("};")
    out.append("")
    out.append("struct npuconf_op_arg { const char *name; enum npuconf_arg_kind kind; };")
    out.append("struct npuconf_op_info {")
    out.append("    const char *name;")
    out.append("    const char *api; /* NULL for probe helpers */")
    out.append("    size_t nargs;")
    out.append("    struct npuconf_op_arg args[NPUCONF_MAX_OP_ARGS > 0 ? NPUCONF_MAX_OP_ARGS : 1];")
    out.append("};")
    out.append("")
    out.append("static const struct npuconf_op_info NPUCONF_OPS[OP__COUNT] = {")
    for op in ops:
        api = f'"{op["api"]}"' if op["api"] else "NULL"
        args = ", ".join(f'{{"{a["name"]}", ARG_{a["kind"].upper()}}}' for a in op["args"]) or "{NULL, ARG_TEXT}"
        out.append(f'    [OP_{op["name"].upper()}] = {{"{op["name"]}", {api}, {len(op["args"])}, {{{args}}}}},')
    out.append("};")
    out.append("")
    out.append("static const char *const NPUCONF_ARG_KIND_NAMES[] = {")
    out += [f'    "{k}",' for k in kinds]
    out.append("};")
    out.append("")
    out.append("struct npuconf_errno_name { int number; const char *name; };")
    out.append("static const struct npuconf_errno_name NPUCONF_ERRNOS[] = {")
    out += [f'    {{{e}, "{e}"}},' for e in vocab["errnos"]]
    out.append("};")
    out.append(f"#define NPUCONF_ERRNO_COUNT {len(vocab['errnos'])}")
    out.append("")
    for enum_name, members in vocab["enums"].items():
        out.append(f"/* {enum_name} */")
        out += [f"#define NPUCONF_{name} {value}" for name, value in members.items()]
    out.append("")
    for name, value in vocab["probe_constants"].items():
        out.append(f"#define NPUCONF_{name} {value}")
    out.append("")
    for code, value in vocab["probe_exit_codes"].items():
        out.append(f"#define PROBE_EXIT_{code} {value}")
    out.append("")
    out += render_c_trace(vocab)
    out.append("#endif")
    return "\n".join(out) + "\n"


FIELD_TYPES = ("int", "str", "bool", "null", "object", "list", "number")


def field_type(kind: str, name: str, spec: str) -> tuple[tuple[str, ...], bool]:
    """A schema type such as `int|null?` -> (its alternatives, whether the field may be absent)."""
    optional = spec.endswith("?")
    types = tuple(spec.removesuffix("?").split("|"))
    unknown = [t for t in types if t not in FIELD_TYPES]
    if unknown:
        raise SystemExit(f"vocabulary.yaml: field {name!r} of {kind!r}: unknown type {unknown[0]!r} "
                         f"(expected {', '.join(FIELD_TYPES)})")
    return types, optional


def cb_action_macro(word: str) -> str:
    """The C name of a cb_action word's bounds: `sleep_` -> NPUCONF_CB_SLEEP (then _MIN, _MAX)."""
    return f"NPUCONF_CB_{word.rstrip('_').upper()}"


def render_c_trace(vocab: dict) -> list[str]:
    """Page size, protection bits, the bounds of cb_action values and the trace's event kind names (the
    schema's C side)."""
    out = [f"#define NPUCONF_PAGE_SIZE {vocab['page_size']}", "#define NPUCONF_PROT_NONE 0"]
    out += [f"#define NPUCONF_PROT_{name} {bit}" for name, bit in vocab["prot_bits"].items()]
    out.append("")
    for word, spec in vocab["cb_actions"].items():
        for bound in ("min", "max"):
            if bound in spec:
                out.append(f"#define {cb_action_macro(word)}_{bound.upper()} {spec[bound]}")
    out.append("")
    out += [f'#define NPUCONF_EV_{kind.upper()} "{kind}"' for kind in vocab["trace_events"]]
    out.append(f"#define NPUCONF_EV__COUNT {len(vocab['trace_events'])}")
    out.append("")
    out += render_c_words(vocab)
    return out


def c_id(word: str) -> str:
    """A word as a C identifier's tail: `aosp-2026` -> AOSP_2026, `sleep_` -> SLEEP."""
    return word.rstrip("_").replace("-", "_").upper()


def _x_macro(name: str, entries: list[str]) -> list[str]:
    """An X-macro: the C side builds its enum and its word table from it, so a word added here that the
    code does not handle fails the build (an unhandled enum member, an undeclared handler)."""
    return [f"#define {name}(X) \\", *(f"    {entry} \\" for entry in entries[:-1]), f"    {entries[-1]}"]


def _choices(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


def render_c_words(vocab: dict) -> list[str]:
    """The words the probe and the vnpu read: cb_action words, vnpu commands and their word values, the
    vnpu's policies and personalities, each as an X-macro of (ID, "word")."""
    out = ["/* callback kinds: X(ID, \"kind\") */"]
    out += _x_macro("NPUCONF_CALLBACK_KINDS", [f'X({c_id(w)}, "{w}")' for w in vocab["trace_words"]["callback_kinds"]])
    out.append("")
    out.append("/* cb_action words: X(ID, \"word\"), the first what an unarmed callback does; a word ending in _ takes"
               " a value */")
    out += _x_macro("NPUCONF_CB_ACTIONS", [f'X({c_id(w)}, "{w}")' for w in vocab["cb_actions"]])
    out.append("")
    out.append("/* vnpu control commands: X(key) */")
    out += _x_macro("NPUCONF_VNPU_COMMANDS", [f"X({key})" for key in vocab["vnpu_commands"]])
    for key, value in vocab["vnpu_commands"].items():
        if isinstance(value, list):
            out += [f'#define NPUCONF_VNPU_{c_id(key)}_{c_id(w)} "{w}"' for w in value]
    out.append("")
    for table, macro in (("vnpu_policies", "NPUCONF_VNPU_POLICIES"),
                         ("vnpu_personalities", "NPUCONF_VNPU_PERSONALITIES")):
        words = vocab[table]
        out.append(f"/* {table}: X(ID, \"name\"), the default first */")
        out += _x_macro(macro, [f'X({c_id(w)}, "{w}")' for w in words])
        out.append(f'#define {macro}_CHOICES "{_choices(words)}"')
        out.append("")
    return out


def _field_specs(kind: str, fields: dict) -> str:
    specs = []
    for name, spec in fields.items():
        types, optional = field_type(kind, name, spec)
        specs.append(f"FieldSpec({json.dumps(name)}, {types!r}, {optional}), ")
    return "(" + "".join(specs) + ")"


def render_py_trace(vocab: dict) -> list[str]:
    """The trace schema, the grammars, the page size and the protection bits (the schema's Python side)."""
    out = ["", "", f"PAGE_SIZE: Final = {vocab['page_size']}"]
    bits = ", ".join(f'"{name}": {bit}' for name, bit in vocab["prot_bits"].items())
    out.append(f"PROT_BITS: Final[dict[str, int]] = {{{bits}}}")
    out += ["", "", "@dataclass(frozen=True, slots=True)", "class CbActionSpec:"]
    out.append('    """A cb_action action: `word`, or `word` followed by a value of kind `value` (within min..max)."""')
    out += ["", "    word: str", "    value: ArgKind | None", "    min: int | None", "    max: int | None", "", ""]
    out.append("CB_ACTIONS: Final[tuple[CbActionSpec, ...]] = (")
    for word, spec in vocab["cb_actions"].items():
        value = f"ArgKind.{spec['value'].upper()}" if spec.get("value") else "None"
        out.append(f"    CbActionSpec({json.dumps(word)}, {value}, {spec.get('min')}, {spec.get('max')}),")
    out += [")", "", "", "@dataclass(frozen=True, slots=True)", "class VnpuCommandSpec:"]
    out.append('    """A vnpu control command `key=value`; `value`: target, u64, u32, errno or words."""')
    out += ["", "    key: str", "    value: str", "    words: tuple[str, ...]", "", ""]
    out.append("VNPU_COMMANDS: Final[dict[str, VnpuCommandSpec]] = {")
    for key, value in vocab["vnpu_commands"].items():
        words = tuple(value) if isinstance(value, list) else ()
        out.append(f'    "{key}": VnpuCommandSpec("{key}", "{"words" if words else value}", {words!r}),')
    out += ["}", ""]
    out.append("# The virtual NPU's allocation policies and personalities, the default first.")
    out.append(f"VNPU_POLICIES: Final[tuple[str, ...]] = {tuple(vocab['vnpu_policies'])!r}")
    out.append(f"VNPU_PERSONALITIES: Final[tuple[str, ...]] = {tuple(vocab['vnpu_personalities'])!r}")
    out += ["", ""]
    out.append("class EventKind(StrEnum):")
    out += [f'    {kind.upper()} = "{kind}"' for kind in vocab["trace_events"]]
    out += ["", "", "@dataclass(frozen=True, slots=True)", "class FieldSpec:"]
    out.append('    """A trace field: its JSON types (see vocabulary.yaml); optional: may be absent."""')
    out += ["", "    name: str", "    types: tuple[str, ...]", "    optional: bool", "", ""]
    out.append("TRACE_EVENTS: Final[dict[EventKind, tuple[FieldSpec, ...]]] = {")
    for kind, fields in vocab["trace_events"].items():
        out.append(f"    EventKind.{kind.upper()}: {_field_specs(kind, fields)},")
    out += ["}", ""]
    out.append("RET_RESULTS: Final[dict[Op, tuple[FieldSpec, ...]]] = {")
    for op, fields in vocab["ret_results"].items():
        if op not in {o["name"] for o in vocab["ops"]}:
            raise SystemExit(f"vocabulary.yaml: ret_results names {op!r}, which is not an op")
        out.append(f"    Op.{op.upper()}: {_field_specs(op, fields)},")
    out += ["}", ""]
    for name, words in vocab["trace_words"].items():
        out.append(f"{name.upper()}: Final[tuple[str, ...]] = {tuple(words)!r}")
    out.append("")
    out.append("TRACE_UNEMITTED: Final[dict[EventKind, str]] = {")
    for kind, why in vocab["trace_unemitted"].items():
        if kind not in vocab["trace_events"]:
            raise SystemExit(f"vocabulary.yaml: trace_unemitted names {kind!r}, which is not an event kind")
        out.append(f"    EventKind.{kind.upper()}: {json.dumps(why)},")
    out.append("}")
    return out


def render_py(vocab: dict) -> str:
    out = [f'"""{BANNER}"""', "", "from __future__ import annotations", ""]
    out += ["from dataclasses import dataclass", "from enum import IntEnum, StrEnum", "from typing import Final", ""]
    out.append(f"VOCABULARY_VERSION: Final = {vocab['version']}")
    out.append(f'VOCABULARY_HASH: Final = "{vocabulary_hash(vocab)}"')
    out.append("")
    out.append("")
    out.append("class ArgKind(StrEnum):")
    out += [f'    {k.upper()} = "{k}"' for k in vocab["arg_kinds"]]
    out.append("")
    out.append("")
    out.append("class Op(StrEnum):")
    out += [f'    {op["name"].upper()} = "{op["name"]}"' for op in vocab["ops"]]
    out.append("")
    out.append("")
    out.append("@dataclass(frozen=True, slots=True)")
    out.append("class ArgSpec:")
    out.append("    name: str")
    out.append("    kind: ArgKind")
    out.append("")
    out.append("")
    out.append("@dataclass(frozen=True, slots=True)")
    out.append("class OpSpec:")
    out.append("    op: Op")
    out.append("    api: str | None")
    out.append("    args: tuple[ArgSpec, ...]")
    out.append("")
    out.append("")
    out.append("OPS: Final[dict[Op, OpSpec]] = {")
    for op in vocab["ops"]:
        args = "".join(f'ArgSpec("{a["name"]}", ArgKind.{a["kind"].upper()}), ' for a in op["args"])
        api = f'"{op["api"]}"' if op["api"] else "None"
        out.append(f"    Op.{op['name'].upper()}: OpSpec(Op.{op['name'].upper()}, {api}, ({args})),")
    out.append("}")
    out.append("")
    out.append("ERRNO_NAMES: Final[frozenset[str]] = frozenset({")
    out += [f'    "{e}",' for e in vocab["errnos"]]
    out.append("})")
    out.append("")
    for enum_name, members in vocab["enums"].items():
        py_name = enum_name.split("_", 1)[1]
        out.append("")
        out.append(f"class {py_name}(IntEnum):")
        out.append(f'    """{enum_name} of buffer.h."""')
        out.append("")
        prefix = "ANPUBUFFER_" + py_name.upper() + "_"
        out += [f"    {name.removeprefix(prefix)} = {value}" for name, value in members.items()]
        out.append("")
    out.append("")
    out += [f"{name}: Final = {value}" for name, value in vocab["probe_constants"].items()]
    out.append("")
    out.append("")
    out.append("class ProbeExit(IntEnum):")
    out += [f"    {code} = {value}" for code, value in vocab["probe_exit_codes"].items()]
    out.append("")
    out.append("")
    out.append("PROBE_LIST_LINES: Final[tuple[str, ...]] = (")
    out += [f"    {json.dumps(line)}," for line in list_lines(vocab)]
    out.append(")")
    out += render_py_trace(vocab)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    args = parser.parse_args(argv)
    vocab = yaml.safe_load(SOURCE.read_text())
    wanted = {C_HEADER: render_c(vocab), PY_MODULE: render_py(vocab)}
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python ndk_probe/tools/gen_vocabulary.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
