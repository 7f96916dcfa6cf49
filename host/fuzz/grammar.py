"""The grammar of fuzz programs: every operation of the vocabulary x the argument classes the text
distinguishes x the contexts a call is made in.

A cell is (op, context, class). The ops are those of ndk_probe/vocabulary.yaml that call the API
(`api` names a public function) and the probe's observation steps (what a caller looks at after an
effect: bytes read back, a mapping's effective protection, what is left mapped, the descriptor's
position). The classes of an op are the values its arguments take that the text tells apart: valid,
each boundary, each invalid kind the text names, NULL where _Nullable, zero, odd, unaligned, multi-page,
huge, and the repetitions (a setter called again, after the request's submission, isSupported after a
change, an object used again after a failure). A step of a program has one context and may have several
classes (a 4097-byte private mapping is `length=unaligned` and `flags=private`). host.fuzz.cells
names the cells of a program's steps; `ALLOWED` is every cell a caller may make, which the generator must
reach (tests/fuzz/test_fuzz_grammar.py) and `npuconf fuzz --coverage` reports against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from reference_model.vocabulary import OPS, Op

MAIN: Final = "main"
THREAD: Final = "thread"  # a thread of a parallel block
CONCURRENT: Final = "concurrent"  # a thread of a parallel block while another thread calls the same function
IN_ONALLOC: Final = "in_onalloc"  # from inside a callback (cb_action)
IN_ONLOAD: Final = "in_onload"
IN_ONPREEMPT: Final = "in_onpreempt"
AFTER_FREE: Final = "after_free"  # on a mapping whose buffer was freed
DURING_LOAD: Final = "during_load"  # on a buffer whose load is in flight
PREEMPT_WINDOW: Final = "preempt_window"  # on a buffer preempted whose onPreempt has not been seen yet
CONTEXTS: Final = (MAIN, THREAD, CONCURRENT, IN_ONALLOC, IN_ONLOAD, IN_ONPREEMPT, AFTER_FREE, DURING_LOAD,
                   PREEMPT_WINDOW)
IN_CALLBACK: Final = {"alloc": IN_ONALLOC, "load": IN_ONLOAD, "preempt": IN_ONPREEMPT}

# The repetitions, a class of every request setter.
AGAIN: Final = "again"  # called before on the same request
AFTER_SUBMIT: Final = "after_submit"  # the request was submitted (allocAsync) before
# A documented crash (crashes chapter): a program's last step.
DEATH: Final = "death"


@dataclass(frozen=True, slots=True)
class OpGrammar:
    """One op's classes, and the contexts other than main with the classes made there."""

    op: Op
    classes: tuple[str, ...]
    contexts: Mapping[str, tuple[str, ...]]


def _setter(op: Op, *classes: str) -> OpGrammar:
    return OpGrammar(op, (*classes, AGAIN, AFTER_SUBMIT), {THREAD: (classes[0],), CONCURRENT: (classes[0],)})


def _in_callbacks(*classes: str) -> dict[str, tuple[str, ...]]:
    return {context: classes for context in IN_CALLBACK.values()}


def _threads(*classes: str) -> dict[str, tuple[str, ...]]:
    return {THREAD: classes, CONCURRENT: classes}


PRIORITY_CLASSES: Final = ("valid", "min", "max", "below", "above")
# Outside main a step counts by its first class only (host.fuzz.cells): a context lists those.
GRAMMAR: Final[tuple[OpGrammar, ...]] = (
    OpGrammar(Op.REQ_CREATE, ("fresh", "after_other_freed"),
              {**_threads("fresh", "after_other_freed"), **_in_callbacks("fresh")}),
    OpGrammar(Op.REQ_FREE, ("live", AFTER_SUBMIT), {**_threads("live", AFTER_SUBMIT), **_in_callbacks("live")}),
    OpGrammar(Op.REQ_FREE_NULL, ("null",), {}),
    _setter(Op.REQ_SET_DEVICE, "pair", "negative", "unsupported", "other"),
    _setter(Op.REQ_SET_TYPE, "pair", "unknown", "unsupported", "other"),
    _setter(Op.REQ_SET_SIZE, "page", "pages", "odd", "short", "zero", "negative", "huge"),
    OpGrammar(Op.REQ_SET_PRIORITY, (*PRIORITY_CLASSES, AGAIN, AFTER_SUBMIT), _threads("valid", "min", "max")),
    _setter(Op.REQ_SET_PROT, "read_write", "read", "none", "write", "exec", "invalid_bits"),
    OpGrammar(Op.REQ_SET_COOKIE, ("object", "null", "integer", "integer_64", "no_deleter", "integer_again", AGAIN,
                                  AFTER_SUBMIT),
              {**_threads("object"), **_in_callbacks("null")}),
    OpGrammar(Op.REQ_SET_ONALLOC, ("set", AGAIN, AFTER_SUBMIT, DEATH), _threads("set")),
    OpGrammar(Op.REQ_SET_ONALLOC_NULL_REQ, (DEATH,), {}),
    _setter(Op.REQ_SET_ONPREEMPT, "set", "null"),
    _setter(Op.REQ_SET_FILE, "segment", "zero_length", "odd_length", "file_offset", "buffer_offset", "no_file",
            "no_file_ignored", "negative_length", "past_buffer"),
    OpGrammar(Op.IS_SUPPORTED, ("one", "several", "twice_listed", "invalid", "unsupported", "after_change",
                                "empty", "many"), _threads("one")),
    OpGrammar(Op.ALLOC, ("one", "several", "twice_listed", "invalid", "unsupported", "after_failure", "empty",
                         DEATH), {**_threads("one"), **_in_callbacks("one")}),
    OpGrammar(Op.BUF_FREE, ("one", "several", "empty", "mapped", "preempted"),
              {**_threads("one"), DURING_LOAD: ("one", "several"), PREEMPT_WINDOW: ("one", "several"),
               **_in_callbacks("one")}),
    OpGrammar(Op.BUF_MAP, ("length=page", "length=pages", "length=unaligned", "length=short", "length=zero",
                           "length=past_end", "offset=page", "offset=unaligned", "prot=read", "prot=read_write",
                           "prot=none", "prot=exec", "prot=wider", "flags=shared", "flags=private",
                           "buffer=preempted", "after_failure"),
              {**_threads("length=page"), DURING_LOAD: ("length=page", "length=pages"),
               PREEMPT_WINDOW: ("buffer=preempted",), **_in_callbacks("length=page")}),
    OpGrammar(Op.BUF_UNMAP, ("whole", "partial", "unaligned_length", "short_length", "unaligned_offset"),
              {**_threads("whole"), AFTER_FREE: ("whole", "partial"), **_in_callbacks("whole")}),
    OpGrammar(Op.BUF_SET_PRIORITY, (*PRIORITY_CLASSES, "mapped", "preempted"),
              {**_threads("valid", "min", "max"), DURING_LOAD: PRIORITY_CLASSES, PREEMPT_WINDOW: PRIORITY_CLASSES,
               **_in_callbacks("valid")}),
    OpGrammar(Op.BUF_LOAD, ("whole", "part", "zero_length", "odd_length", "file_offset", "position_moved",
                            "buffer_offset", "negative_length", "bad_fd", "mapped", "after_failure", DEATH),
              {**_threads("whole"), DURING_LOAD: ("whole", "part")}),
    # What a caller looks at after an effect.
    OpGrammar(Op.MAP_READ, ("whole_buffer", "range", "odd_range"),
              {**_threads("whole_buffer", "range"), AFTER_FREE: ("whole_buffer", "range")}),
    OpGrammar(Op.MAP_WRITE, ("range", "odd_range"), {AFTER_FREE: ("range",)}),
    OpGrammar(Op.MAP_PROT, ("whole",), {}),
    OpGrammar(Op.MAP_GONE, ("whole",), {}),
    OpGrammar(Op.FD_CHECK, ("after_load", "after_segment"), {}),
)
BY_OP: Final[Mapping[Op, OpGrammar]] = {g.op: g for g in GRAMMAR}
# The cells that need a capability of the device (host.fuzz.generate's arguments), by that capability.
NEEDS: Final[Mapping[str, frozenset[tuple[str, str]]]] = {
    "pointer64": frozenset({("req_set_cookie", "integer_64")}),
    "unsupported": frozenset({(str(op), "unsupported") for op in (Op.REQ_SET_DEVICE, Op.REQ_SET_TYPE,
                                                                   Op.IS_SUPPORTED, Op.ALLOC)}),
}
# Ops and contexts that need vnpu control (preemption) or loads.
CONTROL_CONTEXTS: Final = frozenset({IN_ONPREEMPT, PREEMPT_WINDOW})
CONTROL_CLASSES: Final = frozenset({"buffer=preempted", "preempted"})
LOAD_OPS: Final = frozenset({Op.BUF_LOAD, Op.REQ_SET_FILE, Op.FD_CHECK})
LOAD_CONTEXTS: Final = frozenset({IN_ONLOAD, DURING_LOAD})

Cell = tuple[str, str, str]  # op, context, class


def api_ops() -> frozenset[Op]:
    """Every op of the vocabulary that calls the public API (the 18 functions)."""
    return frozenset(op for op, spec in OPS.items() if spec.api is not None and spec.api.startswith("ANpu"))


def allowed(*, control: bool = True, loads: bool = True, pointer64: bool = True,
            unsupported: bool = True) -> frozenset[Cell]:
    """Every cell a program may have on a device with these capabilities (all of them by default)."""
    out: set[Cell] = set()
    for g in GRAMMAR:
        if not loads and g.op in LOAD_OPS:
            continue
        for context, classes in (("main", g.classes), *g.contexts.items()):
            if (not control and context in CONTROL_CONTEXTS) or (not loads and context in LOAD_CONTEXTS):
                continue
            for cls in classes:
                if not control and cls in CONTROL_CLASSES:
                    continue
                if (not pointer64 and (g.op, cls) in NEEDS["pointer64"]) or (
                        not unsupported and (g.op, cls) in NEEDS["unsupported"]):
                    continue
                out.add((str(g.op), context, cls))
    return frozenset(out)


ALLOWED: Final = allowed()
