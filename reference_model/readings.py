"""The kit's readings of silent text that can give WARN (docs/model.md §4).

A transition that accepts a behaviour the words of the text allow, but that departs from one of these
readings, tags the history with the reading's ID (the same tag set as AOSP discrepancy IDs: ``R<n>``
for readings, ``D<n>`` for discrepancies). A trace whose every history carries such a tag is WARN,
never FAIL. This table is the one list of reading IDs that can give WARN; docs/model.md quotes the sentence
each reads. Readings that produce no WARN (R2, R3, R7, R9, R11, R12; R15 a map during a load, R16 the bytes
of a load's range, which accept every behaviour the text leaves open) are described there only.
"""

from __future__ import annotations

from typing import Final

READINGS: Final[dict[str, str]] = {
    "R1": "onAlloc delivered on the calling thread inside an API call (the text names only an immediately "
          "detected error inside allocAsync)",
    "R4": "an invalid priority or protection refused with an errno other than EINVAL, an out-of-range priority "
          "accepted, or a size 0 request allocated (the kit reads them as invalid fields, answered like the "
          "ones the text names)",
    "R5": "isSupported answered true for a request the kit reads as never supported (invalid device or type, "
          "or a pair outside the ones discovered)",
    "R6": "a valid mapping of a live, already mapped buffer refused (a limit on the number of mappings)",
    "R8": "a valid, in-bounds loadAsync of a live, unmapped buffer answered with an error (the text promises "
          "an onLoad when the load \"is done or has encountered an error\", not that it succeeds)",
    "R10": "setPriority with a valid priority refused while the buffer is mapped",
    "R13": "onPreempt delivered on the calling thread inside ANpuBuffer_free for a buffer nothing showed "
           "preempted (not the race the text describes)",
    "R14": "allocAsync or loadAsync returned only after its callback had run on another thread (the "
           "\"Asynchronously\" of the summary read as: returns before the outcome is delivered)",
    "R17": "a negative segmentLength accepted (\"Must be non-negative\" is the caller's duty; the text states "
           "no consequence)",
    "R18": "a valid PROT_NONE mapping of a live, unmapped buffer refused (\"MAP_FAILED on error\" lists no errors)",
    "R19": "setPriority with a valid priority refused with an errno other than EINVAL, e.g. a priority it will "
           "not raise (\"-1 on error\" lists no errors)",
    "R20": "ANpuBuffer_free refused while a load of one of its buffers is in flight (\"-1 on error\" lists no "
           "errors; the buffers stay live and can be freed after the onLoad)",
    "R21": "a request refused that would otherwise be granted, while its allocAsync overlapped another thread's "
           "(the text names no consequence for concurrent allocAsync calls)",
    "R22": "a request whose file descriptor is neither valid nor -1 allocated (\"Must be a valid file descriptor, "
           "or -1\" is the caller's duty; the text states no consequence)",
}
