"""The kit's readings of silent text that can give WARN (docs/model.md §4).

A transition that accepts a behaviour the words of the text allow, but that departs from one of these
readings, tags the history with the reading's ID (the same tag set as AOSP discrepancy IDs: ``R<n>``
for readings, ``D<n>`` for discrepancies). A trace whose every history carries such a tag is WARN,
never FAIL. This table is the one list of reading IDs that can give WARN; docs/model.md quotes the sentence
each reads. Each reading also names the clauses whose sentences it reads (`clauses`): a WARN that needed
it is that clause's answer (reports/answers/clause_answers.py). Readings that produce no WARN (R2, R3, R7, R9, R11,
R12; R15 a map during a load, R16 the bytes of a load's range, which accept every behaviour the text leaves
open) are described there only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Reading:
    text: str  # the behaviour that departs from the reading (a WARN's reason quotes it)
    clauses: tuple[str, ...]  # the clauses of conformance/clauses.yaml whose sentences it reads


# The sentences about what the application may do between allocAsync's return and the onAlloc: an onAlloc that
# always came before the call returned (R1, R14) leaves them nothing to show, so those readings answer them too.
_BEFORE_RETURN: Final = ("alloc-elements-modify-after-return", "alloc-free-request-after-call", "alloc-snapshot",
                         "alloc-snapshot-cookie-example", "cookie-later-changes-no-effect")

READING_TABLE: Final[dict[str, Reading]] = {
    "R1": Reading("onAlloc delivered on the calling thread inside an API call (the text names only an immediately "
                  "detected error inside allocAsync)", ("alloc-callback-thread", "alloc-async", *_BEFORE_RETURN)),
    "R4": Reading("an invalid priority or protection refused with an errno other than EINVAL, an out-of-range "
                  "priority accepted, or a size 0 request allocated (the kit reads them as invalid fields, answered "
                  "like the ones the text names)",
                  ("req-prot-values", "priority-range-inclusive", "priority-request-range", "priority-set-range",
                   "req-size-bytes", "req-size-default-zero")),
    "R5": Reading("isSupported answered true for a request the kit reads as never supported (invalid device or "
                  "type, or a pair outside the ones discovered)", ("support-tests-requests",)),
    "R6": Reading("a valid mapping of a live, already mapped buffer refused (a limit on the number of mappings)",
                  ("map-maps-buffer",)),
    "R8": Reading("a valid, in-bounds loadAsync of a live, unmapped buffer answered with an error (the text "
                  "promises an onLoad when the load \"is done or has encountered an error\", not that it succeeds)",
                  ("load-callback-on-done",)),
    "R10": Reading("setPriority with a valid priority refused while the buffer is mapped", ("priority-set",)),
    "R13": Reading("onPreempt delivered on the calling thread inside ANpuBuffer_free for a buffer nothing showed "
                   "preempted (not the race the text describes)", ("preempt-after-free-race",)),
    "R14": Reading("allocAsync or loadAsync returned only after its callback had run on another thread (the "
                   "\"Asynchronously\" of the summary read as: returns before the outcome is delivered)",
                   ("alloc-async", "load-async", *_BEFORE_RETURN)),
    "R17": Reading("a negative segmentLength accepted (\"Must be non-negative\" is the caller's duty; the text "
                   "states no consequence)", ("req-file-length-nonnegative", "load-length-nonnegative")),
    "R18": Reading("a valid PROT_NONE mapping of a live, unmapped buffer refused (\"MAP_FAILED on error\" lists no "
                   "errors)", ("map-returns",)),
    "R19": Reading("setPriority with a valid priority refused with an errno other than EINVAL, e.g. a priority it "
                   "will not raise (\"-1 on error\" lists no errors)", ("priority-set-returns",)),
    "R20": Reading("ANpuBuffer_free refused while a load of one of its buffers is in flight (\"-1 on error\" lists "
                   "no errors; the buffers stay live and can be freed after the onLoad)", ("free-returns",)),
    "R21": Reading("a request refused that would otherwise be granted, while its allocAsync overlapped another "
                   "thread's (the text names no consequence for concurrent allocAsync calls)",
                   ("alloc-supported-may-fail",)),
    "R22": Reading("a request whose file descriptor is neither valid nor -1 allocated, or a loadAsync of a "
                   "descriptor that is not valid answered with success (\"Must be a valid file descriptor\" is the "
                   "caller's duty; the text states no consequence)",
                   ("req-file-fd-default", "load-fd-ownership")),
    "R23": Reading("a valid PROT_EXEC mapping of a live buffer allocated with PROT_EXEC refused (\"The arguments "
                   "are similar to mmap()\", and mmap() may refuse PROT_EXEC, e.g. for memory mounted noexec)",
                   ("map-args-like-mmap",)),
}
# Reading ID -> its text, and -> the clauses whose sentence it reads (docs/model.md §4 quotes each sentence).
READINGS: Final[dict[str, str]] = {rid: r.text for rid, r in READING_TABLE.items()}
READING_CLAUSES: Final[dict[str, tuple[str, ...]]] = {rid: r.clauses for rid, r in READING_TABLE.items()}
