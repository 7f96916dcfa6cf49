"""What a conforming device answers to a fuzz program's arguments, as far as the caller can count on it.

The caller's model (host.fuzz.caller) uses these to know which allocations bring a buffer it may bind,
which mappings it may read through, and which commanded preemptions owe an onPreempt. Three answers:
``GRANTED`` (every conforming device grants it), ``REFUSED`` (the text makes it fail) and ``EITHER`` (the
text, or a reading of docs/model.md, allows both: the caller then relies on neither). A value the text
distinguishes is read here once; host.fuzz.cells names the same values as argument classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from reference_model.scenario import PAIR_REFERENCES
from reference_model.vocabulary import PAGE_SIZE, PROT_BITS, Priority

PAGE: Final = PAGE_SIZE
GRANTED: Final = "granted"
REFUSED: Final = "refused"
EITHER: Final = "either"

# A request field as far as the answer goes: the pair's value, an invalid one (negative device, UNKNOWN
# type: EINVAL), the unsupported pair's, or another number the device may or may not support.
PAIR: Final = "pair"
INVALID: Final = "invalid"
UNSUPPORTED: Final = "unsupported"
OTHER: Final = "other"
PRIORITY_RANGE: Final = (int(Priority.MIN), int(Priority.MAX))  # ANPUBUFFER_PRIORITY_MIN .. MAX, inclusive
PRIORITY_DEFAULT: Final = int(Priority.DEFAULT)
# Sizes up to this many bytes are granted on any device that grants the pair at all: far below the vnpu's
# default capacity, so that every buffer of a program without pressure fits at once.
CERTAIN_BYTES: Final = 16 * PAGE
VALID_PROT: Final = sum(PROT_BITS.values())


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def names_unsupported_pair(args: Any) -> bool:
    """Whether a step's arguments name the device or type of a pair the device does not support
    (`$unsupported.*`): its program requires `unsupported-pair`, as the scenario parser's table says."""
    return isinstance(args, dict) and any(
        isinstance(v, str) and PAIR_REFERENCES.get(v) == "unsupported-pair" for v in args.values())


def device_value(value: Any) -> str:
    if value == "$pair.device":
        return PAIR
    if value == "$unsupported.device":
        return UNSUPPORTED
    return INVALID if is_int(value) and value < 0 else OTHER


def type_value(value: Any) -> str:
    if value == "$pair.type":
        return PAIR
    if value == "$unsupported.type":
        return UNSUPPORTED
    return INVALID if value == 0 else OTHER


def prot_bits(value: Any) -> int:
    """The protection bits of a `prot` argument: NONE, a list of names, or an int (any bits)."""
    if value == "NONE":
        return 0
    if is_int(value):
        return int(value)
    if isinstance(value, list):
        return sum(PROT_BITS[str(v)] for v in value)
    raise ValueError(f"protection {value!r} is not one the fuzzer writes")


def prot_names(bits: int) -> frozenset[str]:
    return frozenset(name for name, bit in PROT_BITS.items() if bits & bit)


def priority_in_range(value: Any) -> bool:
    return is_int(value) and PRIORITY_RANGE[0] <= value <= PRIORITY_RANGE[1]


def last_page(offset: int, length: int) -> int:
    """The last page a byte range of ``length`` > 0 bytes touches."""
    return (offset + length - 1) // PAGE


def pages_of(offset: int, length: int) -> set[int]:
    """The pages a byte range touches (like mmap, a partial page counts whole); only for ranges known to
    lie within a buffer (a huge length would be a huge set)."""
    return set(range(offset // PAGE, last_page(offset, length) + 1))


def within(offset: int, length: int, pages: set[int]) -> bool:
    """Whether every page of the byte range (``length`` > 0) is among ``pages``."""
    first, last = offset // PAGE, last_page(offset, length)
    return last - first < len(pages) and all(p in pages for p in range(first, last + 1))


def request_answer(device: str, type_: str, size: int, prot_valid: bool, priority_ok: bool, segment: str,
                   pressure: bool, room: int | None = None) -> str:
    """allocAsync of a request with these fields (``segment``: none, fitting, or either). ``room``: with a
    declared capacity, the memory every conforming device still has (a request that fits is granted)."""
    if INVALID in (device, type_) or (device == type_ == UNSUPPORTED) or size < 0 or not prot_valid:
        return REFUSED
    fits = size <= CERTAIN_BYTES if room is None else -(-size // PAGE) * PAGE <= room
    certain = device == type_ == PAIR and size > 0 and fits and priority_ok and segment != EITHER and not pressure
    return GRANTED if certain else EITHER


def map_answer(args: Mapping[str, Any], pages: int, prot: frozenset[str], preempted: bool,
               surely_preempted: bool, loading: bool) -> str:
    """ANpuBuffer_map of a buffer of ``pages`` pages allocated with ``prot``, preempted (maybe or surely),
    with a load in flight or not."""
    if surely_preempted:
        return REFUSED  # ENOENT, also in the window before onPreempt (map-preempt-window-enoent)
    asked = prot_names(prot_bits(args["prot"]))
    if prot_bits(args["prot"]) & ~VALID_PROT:
        return EITHER
    if not asked <= prot:
        return REFUSED  # map-prot-subset: not a subset of the request's protection
    offset, length, flags = args["offset"], args["length"], args["flags"]
    if preempted or loading or not asked or "EXEC" in asked:
        # maybe preempted (pressure); during a load (R15), PROT_NONE (R18) and PROT_EXEC (R23) may be refused
        return EITHER
    if not is_int(offset) or offset < 0 or offset % PAGE or not is_int(length) or length <= 0:
        return EITHER  # answered like mmap
    if flags not in (["SHARED"], ["PRIVATE"]) or last_page(offset, length) >= pages:
        return EITHER  # mmap-style arguments outside the buffer: any answer
    return GRANTED
