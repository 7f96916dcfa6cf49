"""The adversarial suite's build helper and tables.

`interposer.c` is an implementation of buffer.h that forwards to the real libvnpu and changes one
behaviour, chosen with -DMUTATION=<name>. This module builds it (gcc, C11, -Wall -Wextra -Werror),
runs `npuconf run --target local --impl <lib>` on it and reads the verdicts back from the run's
results.jsonl and summary.json.

    python -m tests.adversarial.adversary            # every row, printed as the README's tables
    python -m tests.adversarial.adversary --clauses  # the README's per-sentence table
    python -m tests.adversarial.adversary M_COOKIE_48 L_SIZE0_OK
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("interposer.c")
BAD_VERDICTS = ("FAIL", "CRASH", "TIMEOUT", "ERROR", "NOT_EXECUTED")


@dataclass(frozen=True)
class Mutant:
    """A violation of the published text: the run must exit 1 with a FAIL naming `clause` (a CRASH naming it,
    for a mutant that makes the probe die: the clause of the step that died)."""

    klass: str
    mutation: str
    change: str
    clause: str
    verdict: str = "FAIL"
    args: tuple[str, ...] = ()  # extra `npuconf run` options
    # Further sentences the same run must name, each by a FAIL or CRASH of some scenario: the mutant breaks
    # them too, where their words are the most specific.
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Warned:
    """Allowed by the text but departing from reading `reading`: exit 0 with a WARN naming it."""

    klass: str
    mutation: str
    change: str
    reading: str
    args: tuple[str, ...] = ()  # extra `npuconf run` options
    # 0: conformant with warnings. 2 where the departure also keeps clauses from being demonstrated.
    exit_code: int = 0


@dataclass(frozen=True)
class Incomplete:
    """Allowed by the text, but what it refuses keeps the trace from showing a clause: the run must exit 2
    (incomplete) with no FAIL, and the claim must name each of `clauses` as not demonstrated (with
    `reading` among what stood in the way, when given)."""

    klass: str
    mutation: str
    change: str
    clauses: tuple[str, ...]
    reading: str | None = None
    args: tuple[str, ...] = ()  # extra `npuconf run` options


@dataclass(frozen=True)
class Legal:
    """A behaviour the published text allows: the run must exit 0 (WARN allowed, no FAIL)."""

    klass: str
    mutation: str
    change: str
    args: tuple[str, ...] = ()  # extra `npuconf run` options
    # 0: conformant. 2 (incomplete) where the variation legally keeps clauses from being demonstrated: a
    # device that refuses nearly every allocation is never called conformant, and never non-conformant.
    exit_code: int = 0
    # The correction this row checks needs no reading: no WARN may name one (the run may still warn for
    # other reasons only when this is False).
    no_warn: bool = False

    @property
    def name(self) -> str:
        return self.mutation + ("+" + "".join(self.args).lstrip("-") if self.args else "")


MUTANTS: tuple[Mutant, ...] = (
    Mutant("a", "M_MAP_ENOENT", "every map fails with ENOENT; onPreempt never delivered", "preempt-onpreempt-purpose"),
    Mutant(
        "a",
        "M_PREEMPT_IN_FREE",
        "onPreempt(cookie) inside ANpuBuffer_free for every buffer freed, mapped or not",
        "preempt-never-while-mapped",
    ),
    Mutant(
        "a",
        "M_PREEMPT_ON_FAILED",
        "onPreempt(cookie) after every failed onAlloc (no buffer was ever allocated)",
        "preempt-callback-on-forced-dealloc",
    ),
    Mutant(
        "b",
        "M_LIVE_CALLBACKS",
        "onAlloc/onPreempt read from the request at callback time (no snapshot)",
        "req-onpreempt-default-null",
    ),
    Mutant(
        "c", "M_FIRST_DELETER", "every cookie deleted with the first deleter ever received", "cookie-ownership-donated"
    ),
    Mutant("d", "M_SUPPORT_COUNT", "isSupported returns the number of supported requests", "support-returns"),
    Mutant(
        "d",
        "M_SUPPORT_BY_COOKIE",
        "a request carrying a non-NULL cookie is reported unsupported",
        "support-ignored-fields",
    ),
    Mutant(
        "d",
        "M_SUPPORT_TWICE_DIFFERS",
        "a request listed again in one isSupported call gets the opposite answer",
        "support-tests-requests",
    ),
    Mutant(
        "d",
        "M_SUPPORT_CANARY",
        "isSupported flips the byte after outIsSupported[requestsLen - 1]",
        "support-out-array-size",
    ),
    Mutant(
        "f", "M_COOKIE_48", "cookies given to callbacks and deleters keep only their low 48 bits", "cookie-raw-integer"
    ),
    Mutant("g", "M_CREATE_NULL", "ANpuManager_AllocRequest_create returns NULL", "req-create-returns-request"),
    Mutant(
        "h", "M_SETONALLOC_NULL_OK", "setOnAlloc(request, NULL) returns instead of crashing", "crash-setonalloc-null"
    ),
    Mutant("h", "M_NULL_REQUEST_OK", "setOnAlloc(NULL, onAlloc) returns instead of crashing", "req-request-not-null"),
    Mutant(
        "i",
        "M_DELETE_AT_FREE",
        "cookie deleted inside ANpuBuffer_free although a late onPreempt may come",
        "cookie-borrowed-in-callbacks",
    ),
    Mutant("o", "M_FD_LEAK", "owned file descriptors are never closed", "load-fd-ownership"),
    Mutant("r", "M_ERRNUM_NEGATIVE", "onAlloc and onLoad errors delivered negated (-ENOMEM)", "alloc-errornum-iff-buf"),
    Mutant("s", "M_FREE_COUNT", "ANpuBuffer_free returns the number of buffers freed", "free-returns"),
    Mutant("s", "M_PRIORITY_OLD", "setPriority returns the buffer's previous priority", "priority-set-returns"),
    Mutant("s", "M_UNMAP_AFTER_FREE", "a freed buffer's unmap works but returns -1 EINVAL", "unmap-returns"),
    Mutant("t", "M_COOKIE_PLUS1", "callbacks get the cookie plus one", "cookie-snapshot-at-alloc"),
    Mutant(
        "r", "M_LOAD_ZERO_TO_EOF", "a loadAsync of length 0 loads to the end of the file", "load-length-nonnegative"
    ),
    Mutant(
        "r",
        "M_SUPPORT_CACHED",
        "isSupported answers each request with its first answer, however the request changed",
        "alloc-unsupported-fails",
    ),
    Mutant("r", "M_MAP_ROUND_DOWN", "map and unmap lengths rounded down to whole pages", "map-args-like-mmap"),
    Mutant("r", "M_MAP_IGNORE_PROT", "every mapping made readable and writable", "map-prot-param-subset"),
    Mutant("r", "M_FIRST_SIZE", "only the first setSize of a request counts", "req-size-bytes"),
    Mutant(
        "r",
        "M_PREEMPT_UNDER_LOCK",
        "onPreempt runs under a lock every API function takes: a call made in it never returns",
        "cookie-shared-refcounted",
    ),
    Mutant(
        "6",
        "M_PREEMPT_PRIVATE_MAPPED",
        "preempt=<buffer> preempts a buffer whose only mappings are MAP_PRIVATE (onPreempt, maps ENOENT)",
        "preempt-never-while-mapped",
    ),
    Mutant(
        "8",
        "M_LOAD_PRIVATE_MAPPED",
        "a loadAsync into a buffer whose only mappings are MAP_PRIVATE loads and succeeds",
        "load-no-existing-mapping",
    ),
    Mutant(
        "10",
        "M_PARTIAL_UNMAP_WHOLE",
        "unmapping part of a mapping unmaps all of it: reading the rest kills the probe",
        "unmap-args-like-munmap",
        verdict="CRASH",
    ),
    Mutant("r", "M_FIRST_DEVICE", "only the first setDeviceNumber of a request counts", "req-device-negative-einval"),
    Mutant("r", "M_FIRST_TYPE", "only the first setBufferType of a request counts", "req-type-unknown-einval"),
    Mutant("r", "M_FIRST_PROT", "only the first setProtectionFlags of a request counts", "map-maps-buffer"),
    Mutant(
        "r",
        "M_FIRST_SEGMENT",
        "only the first setFileSegmentToLoad of a request counts",
        "load-on-alloc-reported-by-onalloc",
    ),
    Mutant("r", "M_FIRST_ONPREEMPT", "only the first setOnPreempt of a request counts", "req-onpreempt-default-null"),
    Mutant(
        "r",
        "M_FIRST_PRIORITY",
        "only the first setBufferPriority of a request counts (capacity declared: no spontaneous preemption)",
        "priority-request-range",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "w",
        "M_LOAD_OFFSET_FROM_POSITION",
        "loadAsync loads from the descriptor's current position instead of fileOffset",
        "load-file-offset",
    ),
    Mutant(
        "w",
        "M_LOAD_PAST_LENGTH",
        "a loadAsync whose length is no page multiple loads on to the end of the page",
        "load-length-nonnegative",
    ),
    Mutant(
        "w",
        "M_DEFAULT_PROT_RW",
        "a request that never set its protection allocates PROT_READ | PROT_WRITE",
        "req-prot-default-read",
    ),
    Mutant(
        "w",
        "M_REQUEST_RECYCLED",
        "a new request is a freed one with all its fields (its cookie cleared)",
        "req-prot-default-read",
    ),
    Mutant("z", "M_FREE_NULL_CRASH", "AllocRequest_free(NULL) dies", "req-free-null-noop", verdict="CRASH"),
    Mutant("z", "M_DEFAULT_DEVICE_ZERO", "a new request's device is 0", "req-device-default-negative"),
    Mutant("z", "M_DEFAULT_TYPE_VALID", "a new request's type is MODEL_EXECUTABLE", "req-type-default-unknown"),
    Mutant(
        "z",
        "M_DEFAULT_PRIORITY_MAX",
        "a new request's priority is ANPUBUFFER_PRIORITY_MAX",
        "req-priority-default",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_COOKIES_SWAPPED",
        "the first two requests of an allocAsync answered under each other's cookies",
        "cookie-identify-request",
    ),
    Mutant(
        "z", "M_COOKIE_DEREF", "setCookie reads a byte through the cookie", "cookie-not-dereferenced", verdict="CRASH"
    ),
    Mutant("z", "M_NO_DELETER", "deleters are never called", "cookie-deleter-called"),
    Mutant("z", "M_NO_NULL_DELETER", "the deleter is not called for a NULL cookie", "cookie-deleter-null-cookie"),
    Mutant(
        "z",
        "M_NULL_DELETER_STALE",
        "a cookie set with a NULL deleter is deleted with the last deleter seen",
        "cookie-null-deleter-nothing",
    ),
    Mutant(
        "z",
        "M_REPLACE_KEEPS_OLD",
        "setCookie with a new cookie never deletes the one it replaces",
        "cookie-replace-deletes-previous",
    ),
    Mutant("z", "M_CLEAR_KEEPS_OLD", "setCookie(NULL, NULL) never deletes the cookie it clears", "cookie-clear"),
    Mutant(
        "z",
        "M_DEFAULT_COOKIE_NONNULL",
        "callbacks of a request that never had a cookie get the request's address",
        "cookie-default-null",
    ),
    Mutant(
        "z",
        "M_LIVE_COOKIE",
        "callbacks get the cookie the request holds at callback time",
        "cookie-later-changes-no-effect",
        also=("alloc-snapshot-cookie-example",),
    ),
    Mutant("z", "M_DOUBLE_ONALLOC_ON_ERROR", "a failed onAlloc is delivered twice", "alloc-one-callback-per-request"),
    Mutant(
        "z",
        "M_DROP_ONALLOC",
        "the failed onAlloc of a request not yet freed is never delivered",
        "alloc-callback-on-completion",
    ),
    Mutant(
        "z",
        "M_FREE_CANCELS_PENDING",
        "the onAlloc of a request freed before its answer is never delivered",
        "alloc-free-request-after-call",
    ),
    Mutant(
        "z",
        "M_ALLOC_TAKES_REQUEST",
        "allocAsync frees the requests it forwarded: their next use dies",
        "alloc-no-request-ownership",
        verdict="CRASH",
    ),
    Mutant(
        "z",
        "M_ALLOC_WITHOUT_ONALLOC_OK",
        "allocAsync of a list holding a request without onAlloc returns, answering none",
        "crash-alloc-without-onalloc",
    ),
    Mutant(
        "z",
        "M_LIVE_FIELDS",
        "a buffer granted after its request became invalid is answered EINVAL instead",
        "alloc-snapshot",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_REQUEST_BOUNDS_REFUSED",
        "requests of priority MIN or MAX refused with EINVAL",
        "priority-range-inclusive",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_MINUS_ONE_FD_FAILS",
        "a request given fd -1 explicitly refused with EBADF",
        "req-file-fd-default",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_IGNORED_OFFSET_CHECKED",
        "a request given fd -1 and a negative fileOffset refused with EINVAL",
        "req-file-offset-ignored",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_IGNORED_LENGTH_CHECKED",
        "a request given fd -1 and a negative segmentLength refused with EINVAL",
        "req-file-length-nonnegative",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_IGNORED_BOFF_CHECKED",
        "a request given fd -1 and a negative bufferOffset refused with EINVAL",
        "req-file-buffer-offset-nonnegative",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_PROT_NONE_REQUEST_REFUSED",
        "a request whose protection was set to PROT_NONE refused with EINVAL",
        "req-prot-values",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_FREE_LIST_REFUSED",
        "ANpuBuffer_free of more than one buffer refused with EINVAL",
        "free-each-allocated-buffer",
    ),
    Mutant(
        "z",
        "M_FREE_AFTER_ONPREEMPT_FAILS",
        "ANpuBuffer_free of a buffer whose onPreempt ran returns -1 (ENOENT)",
        "preempt-must-still-free",
    ),
    Mutant(
        "z",
        "M_SUPPORT_ERR_NO_ERRNO",
        "isSupported of more than 8 requests returns -1 with errno 0",
        "support-error-returns",
    ),
    Mutant(
        "z",
        "M_ASKED_REQUEST_FROZEN",
        "changing or freeing a request isSupported answered for dies",
        "support-modify-after-return",
        verdict="CRASH",
    ),
    Mutant(
        "z",
        "M_SETTER_WHILE_PENDING_ABORTS",
        "a setter on a request whose allocation is pending dies",
        "alloc-elements-modify-after-return",
        verdict="CRASH",
    ),
    Mutant("z", "M_REQUEST_FD_LEAK", "descriptors handed to requests are never closed", "req-file-fd-ownership"),
    Mutant("z", "M_LOAD_NOTHING", "loadAsync answers onLoad(0) and loads nothing", "load-async"),
    Mutant(
        "z",
        "M_ONLOAD_FOR_ALLOC",
        "a load at allocation also calls the last onLoad given to loadAsync",
        "load-callback-not-alloc",
    ),
    Mutant(
        "z",
        "M_CLEARED_COOKIE_STAYS",
        "callbacks of a request whose cookie was cleared get the cleared cookie",
        "cookie-callback-null-if-unset",
    ),
    Mutant("z", "M_BUFFER_REUSED", "the second buffer granted by one allocAsync is the first one again", "alloc-async"),
    Mutant(
        "z", "M_SEGMENT_IGNORED", "the file segment of a request is never loaded", "load-on-alloc-reported-by-onalloc"
    ),
    Mutant(
        "z",
        "M_FREED_MAPPED_KEPT",
        "ANpuBuffer_free of mapped buffers returns 0 and keeps their memory past the last unmap",
        "free-memory-after-last-unmap",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "M_FREED_MEMORY_KEPT",
        "ANpuBuffer_free of unmapped buffers returns 0 and keeps their memory",
        "free-indicates-not-needed",
        args=("--capacity", "268435456"),
    ),
    Mutant(
        "z",
        "L_SUPPORTED_EIO",
        "every other valid supported request fails with EIO, the capacity declared",
        "alloc-supported-may-fail",
        args=("--capacity", "268435456"),
    ),
    Mutant("z", "M_MAP_PROT_UNCHECKED", "a map wider than the request's protection is granted", "map-prot-subset"),
    Mutant("z", "M_MAP_FAIL_NO_ERRNO", "a failed map leaves errno 0", "map-returns"),
    Mutant(
        "z",
        "M_PREEMPTED_MAP_EINVAL",
        "a map of a preempted buffer fails with EINVAL",
        "map-after-preempt-enoent",
        also=("preempt-map-enoent",),
    ),
    Mutant(
        "z",
        "M_MAP_AFTER_CB_SUCCEEDS",
        "a map of a buffer whose onPreempt came returns fresh anonymous memory",
        "preempt-map-fails-after-callback",
    ),
    Mutant(
        "z",
        "M_WINDOW_MAP_SUCCEEDS",
        "a map of a preempted buffer whose onPreempt has not run yet returns fresh anonymous memory",
        "map-preempt-window-enoent",
    ),
    Mutant(
        "z",
        "M_FREE_REFUSED_MAPPED",
        "ANpuBuffer_free of a mapped buffer refused with EBUSY",
        "free-mapping-valid-after-free",
    ),
    Mutant(
        "z",
        "M_FREE_PREEMPTED_FAILS",
        "ANpuBuffer_free of a preempted buffer returns -1 (ENOENT), freeing nothing",
        "free-even-if-preempted",
    ),
    Mutant(
        "z",
        "M_FREED_MAPPING_REVOKED",
        "ANpuBuffer_free makes the buffer's mappings inaccessible",
        "free-mapping-valid-after-free",
        verdict="CRASH",
    ),
    Mutant(
        "z",
        "M_UNMAP_AFTER_FREE_ABORTS",
        "unmapping a mapping of a freed buffer dies",
        "free-unmap-allowed-after-free",
        verdict="CRASH",
    ),
    Mutant("z", "M_UNMAP_NOOP", "unmap returns 0 and leaves the mapping", "unmap-unmaps"),
    Mutant(
        "z",
        "M_PRIORITY_SET_IGNORED",
        "setPriority returns 0 and changes nothing",
        "priority-set",
        args=("--capacity", "268435456"),
    ),
    Mutant("z", "M_PRIORITY_BOUNDS_REFUSED", "setPriority(MIN or MAX) refused with EINVAL", "priority-set-range"),
    Mutant("z", "M_PRIORITY_NO_ERRNO", "setPriority's refusals return -1 with errno left 0", "priority-set-returns"),
    Mutant("z", "M_FREE_EMPTY_NO_ERRNO", "ANpuBuffer_free of an empty list returns -1 with errno left 0",
           "free-returns"),
    Mutant(
        "z",
        "M_LOAD_MOVES_POSITION",
        "loadAsync leaves the descriptor's position after the segment",
        "load-position-unchanged",
    ),
    Mutant(
        "z",
        "M_LOAD_IGNORES_BUFFER_OFFSET",
        "loadAsync loads at the buffer's start, whatever bufferOffset",
        "load-buffer-offset-nonnegative",
    ),
    Mutant("z", "M_DOUBLE_ONLOAD", "a successful onLoad is delivered twice", "load-callback-on-done"),
    Mutant("z", "M_DROP_ONLOAD", "a failed load's onLoad is never delivered", "load-onload-invoked"),
    Mutant("z", "M_ONLOAD_ERROR_NULL_BUF", "a failed load's onLoad gets buf NULL", "load-callback-same-buf"),
    Mutant("z", "M_ONLOAD_NULL_COOKIE", "onLoad gets cookie NULL", "load-callback-cookie"),
    Mutant("z", "M_ONLOAD_ERRNUM_MINUS1", "a failed load's onLoad gets errorNum -1", "load-callback-errornum"),
    Mutant("z", "M_LOAD_NULL_ONLOAD_OK", "loadAsync with onLoad NULL returns", "crash-load-onload-null"),
    Mutant("z", "M_MAP_SHORT_REFUSED", "a map shorter than a page refused with EINVAL", "map-maps-buffer"),
    Mutant("z", "M_MAP_WRITE_DROPPED", "a map asking PROT_WRITE made without it (read-only pages)",
           "map-args-like-mmap"),
    Mutant("z", "M_FREE_BUSY_NO_ERRNO", "ANpuBuffer_free refused while a load of one of its buffers runs, errno left 0",
           "free-returns"),
    Mutant("z", "M_FREE_BUSY_ANY_LOAD", "ANpuBuffer_free refused with EBUSY while any load runs, another buffer's too",
           "free-each-allocated-buffer"),
    Mutant("z", "M_DELETER_TWICE", "every deleter called twice", "cookie-deleter-called"),
    Mutant("z", "M_DELETER_NULL", "every deleter called with NULL, not with its cookie", "cookie-null-deleter-nothing"),
    Mutant("z", "M_PREEMPT_COOKIE_PLUS1", "onPreempt gets the cookie plus one (other callbacks the right one)",
           "cookie-snapshot-at-alloc"),
    Mutant("z", "M_LATE_ONPREEMPT_TWICE", "an onPreempt coming after the buffer was freed is delivered twice",
           "preempt-callback-on-forced-dealloc"),
    Mutant("z", "M_DELETE_AT_MAPPED_FREE", "ANpuBuffer_free of a mapped buffer runs its cookie's deleter, though a "
           "request or another buffer still holds the cookie", "cookie-ownership-donated"),
    Mutant("z", "M_FREED_MAPPING_ZEROED", "ANpuBuffer_free zero-fills the first page of each of the buffer's mappings",
           "free-mapping-valid-after-free"),
    Mutant(
        "z",
        "M_SIZE_64M_EIO",
        "a valid request of exactly 64 MiB refused with EIO, a broken size class (capacity declared: it fits)",
        "alloc-supported-may-fail",
        args=("--capacity", "268435456"),
    ),
    Mutant("z", "M_DELETE_AT_LAST_UNMAP", "the last unmap of a freed buffer runs its cookie's deleter, though "
           "another buffer still holds the cookie", "cookie-borrowed-in-callbacks"),
    # A device that forgets a buffer it preempted unseen: the preemption a load shows owes the onPreempt
    # (the cookie must outlive it), and the sibling still holding the cookie is named where its deletion
    # came first.
    Mutant(
        "n",
        "M_PREEMPT_FORGOTTEN",
        "any buffer silently preempted before each loadAsync, its onPreempt never delivered; its free runs the "
        "cookie's deleter at once, whatever else holds the cookie",
        "preempt-onpreempt-purpose",
        also=("cookie-borrowed-in-callbacks",),
    ),
    Mutant(
        "z",
        "M_ONPREEMPT_AFTER_MAPPED_FREE",
        "ANpuBuffer_free of a mapped buffer runs its cookie's deleter, then its onPreempt",
        "cookie-borrowed-in-callbacks",
    ),
    # With a declared capacity only vnpu commands preempt (docs/model.md §3): the map that finds a silently
    # preempted buffer gone then contradicts the mapping the text promises.
    Mutant(
        "n",
        "L_SILENT_PREEMPT_LOAD",
        "a buffer without onPreempt preempted silently before each loadAsync, with the capacity declared",
        "map-maps-buffer",
        args=("--capacity", "268435456"),
    ),
)

# Allowed by the words of the text, departing from one of the kit's readings of silent text
# (docs/model.md §4, docs/oracle.md): the run must exit 0 and a WARN must name the reading.
WARNED: tuple[Warned, ...] = (
    # Equivalent to a request of size 0 granted a page (L_SIZE0_OK): the text allows size 0 either answer.
    Warned("z", "M_DEFAULT_SIZE_PAGE", "a new request's size is one page", "R4"),
    # The legal rows of the readings that have no departure of their own above: each must warn by its reading.
    Warned("z", "L_CALLER_THREAD", "every onAlloc (also successes) inside allocAsync on the caller's thread", "R1"),
    Warned("z", "L_SUPPORT_INVALID_TRUE", "isSupported says true for an invalid device or type", "R5"),
    Warned("z", "L_MAP_LIMIT", "at most 2 live mappings per buffer, ENOMEM beyond", "R6"),
    Warned("z", "L_PRIORITY_MAPPED_BUSY", "setPriority refused (EBUSY) while the buffer is mapped", "R10"),
    Warned("q", "L_MAP_ONE", "at most 1 live mapping per buffer, ENOMEM beyond", "R6"),
    Warned(
        "a",
        "W_PREEMPT_IN_FREE_UNMAPPED",
        "onPreempt(cookie) inside ANpuBuffer_free for every unmapped buffer freed",
        "R13",
    ),
    # Every onAlloc comes before allocAsync returns: nothing can happen between the return and the onAlloc, so
    # the sentences about that interval (the snapshot, modifying or freeing the request) stay undemonstrated.
    Warned(
        "e",
        "W_BLOCKING_ALLOC",
        "allocAsync returns only after its onAllocs ran on another thread (<= 1 s)",
        "R14",
        exit_code=2,
    ),
    Warned("e", "W_BLOCKING_LOAD", "loadAsync returns only after its onLoad ran on another thread (<= 1 s)", "R14"),
    Warned("u", "W_LOAD_EIO", "every other valid loadAsync answered EIO", "R8"),
    Warned("u", "W_PRIORITY_RANGE_OK", "out-of-range priorities clamped and accepted (request and setPriority)", "R4"),
    Warned("u", "W_NEG_LENGTH_OK", "a negative segmentLength loads nothing and succeeds", "R17"),
    Warned("u", "W_PROT_NONE_REFUSED", "a PROT_NONE map refused with EINVAL", "R18"),
    Warned("u", "W_PRIORITY_NO_RAISE", "setPriority refuses to raise a buffer's priority (EPERM)", "R19"),
    Warned("u", "W_FREE_BUSY_LOADING", "ANpuBuffer_free refused with EBUSY while a load of the buffer runs", "R20"),
    Warned(
        "u",
        "W_ALLOC_BUSY_OVERLAP",
        "an allocAsync begun while another thread's runs refuses its valid requests with EBUSY (capacity "
        "declared, so no other failure is allowed)",
        "R21",
        args=("--capacity", "268435456"),
    ),
    # The first request goes to the device at once; the others, decided after another thread's call began,
    # are refused: the earlier call's submissions overlapped too (R21), though its first answer came before.
    Warned(
        "u",
        "W_ALLOC_BUSY_DECIDED_LATE",
        "allocAsync sends its first request at once and decides the others 20 ms later, refusing them (EBUSY) "
        "when another thread's allocAsync began meanwhile (capacity declared)",
        "R21",
        args=("--capacity", "268435456"),
    ),
    Warned("u", "W_BAD_FD_NO_FILE", 'a request fd that is neither valid nor -1 means "no file"', "R22"),
    Warned("u", "W_LOAD_BAD_FD_OK", "loadAsync of a negative descriptor answered onLoad(0)", "R22"),
    Warned("u", "W_MAP_EXEC_REFUSED", "a map asking PROT_EXEC refused with EACCES", "R23"),
    # An error delivered inside a later allocAsync, not its own: no immediately detected error (R1).
    Warned(
        "q",
        "W_ERROR_AT_NEXT_ALLOC",
        "a failed onAlloc held until the next allocAsync and run inside it on the caller's thread (or 50 ms)",
        "R1",
    ),
    Warned(
        "q",
        "W_SUPPORT_LARGE_TRUE",
        "isSupported says true for a request of 1 MiB or more of a valid pair it lacks (the allocation fails)",
        "R5",
    ),
)

# Allowed by the words of the text, but what they refuse keeps the traces from demonstrating clauses: a
# refusal is never counted as the behaviour it kept from happening.
INCOMPLETE: tuple[Incomplete, ...] = (
    Incomplete(
        "x",
        "I_SEGMENT_REFUSED",
        "every valid request with a file segment answered ENOMEM (no capacity declared: allowed)",
        ("load-on-alloc-reported-by-onalloc", "req-file-segment"),
    ),
    Incomplete(
        "x",
        "I_LOAD_OFFSET_EIO",
        "every loadAsync with a nonzero fileOffset answered EIO",
        ("load-file-offset",),
        reading="R8",
    ),
)

LEGAL: tuple[Legal, ...] = (
    Legal("-", "M_NONE", "pass-through: every call, callback and deleter forwarded unchanged"),
    Legal(
        "-",
        "M_NONE",
        "pass-through with the vnpu's capacity declared: the capacity clauses judged through the interposer",
        ("--capacity", "268435456"),
    ),
    Legal("j", "L_ERRNO_RANGE", "out-of-range priority refused with ERANGE, invalid prot bits with ENOTSUP"),
    Legal("k", "L_SIZE0_OK", "a request of size 0 is granted a buffer"),
    # A refused valid request demonstrates nothing of what would have followed: scenarios whose first allocation
    # is refused show none of their buffer clauses, and the run retried ends incomplete, never conformant.
    Legal("l", "L_SUPPORTED_EIO", "every other valid supported request fails with EIO", exit_code=2),
    Legal(
        "m",
        "L_SUPPORT_BY_SIZE",
        "requests above 32 KiB unsupported (isSupported false, allocation ENOSPC); 4 and 8 KiB supported",
    ),
    # Every load meets a preempted buffer (ENOENT): the bytes a load puts in place are never shown.
    Legal(
        "n",
        "L_SILENT_PREEMPT_LOAD",
        "a buffer without onPreempt is preempted silently before each loadAsync",
        exit_code=2,
    ),
    Legal(
        "o",
        "L_FDS_AT_FREE",
        "owned fds closed at ANpuBuffer_free (loads) and when the last buffer of a "
        "request's submissions is released (segments)",
    ),
    Legal(
        "o",
        "L_FDS_AFTER_FREE",
        "the same descriptors closed on another thread 5 ms after ANpuBuffer_free returned",
    ),
    Legal("o", "L_FDS_LATE", "the same, 300 ms after ANpuBuffer_free returned (a busy worker thread)"),
    Legal("p", "L_ENOMEM_PRESSURE", "at most 4 KiB of live buffers: ENOMEM beyond", exit_code=2),
    Legal("q", "L_CALLER_THREAD", "every onAlloc (also successes) inside allocAsync on the caller's thread"),
    Legal("q", "L_SUPPORT_INVALID_TRUE", "isSupported true for a request with an invalid device or type"),
    Legal("q", "L_PRIORITY_MAPPED_BUSY", "setPriority refused with EBUSY while the buffer is mapped"),
    Legal("q", "L_MAP_LIMIT", "at most 2 live mappings per buffer, ENOMEM beyond"),
    Legal("q", "L_MAP_PAST_END_EINVAL", "a map reaching past the buffer's last page refused with EINVAL"),
    Legal("q", "L_PRIORITY_PREEMPTED_ENOENT", "setPriority of a buffer whose onPreempt ran refused with ENOENT"),
    Legal(
        "q",
        "L_SEGMENT_CLIPPED",
        "a request segment running past the end of its file or of the buffer loads the bytes that exist and fit",
    ),
    Legal(
        "q",
        "L_LOAD_STARTS_LATE",
        "a loadAsync reaches the device 50 ms after it returned: a map made meanwhile is granted, the load then "
        "fails on it",
    ),
    Legal(
        "q",
        "L_MAP_RETURNS_LATE",
        "ANpuBuffer_map returns 20 ms after the real library answered: a callback may run before it returns",
    ),
    # The preemption a load shows owes the onPreempt, but nothing bounds when while the cookie it would carry
    # lives (docs/model.md §4, R9): a device keeping both for ever is not told from a late one.
    Legal(
        "n",
        "L_PREEMPTED_COOKIE_KEPT",
        "a buffer with onPreempt preempted silently before each loadAsync; the onPreempt never comes and the cookie "
        "is never deleted, so it still may",
        exit_code=2,
    ),
    Legal("v", "L_SUPPORT_E2BIG", "isSupported returns -1 with E2BIG for lists longer than 8"),
    Legal("v", "L_FREE_EMPTY_REFUSED", "ANpuBuffer_free of an empty list refused with EINVAL"),
    Legal("timing", "L_FRESH_THREAD", "every callback and deferrable deleter on a fresh thread"),
    Legal("timing", "L_RANDOM_DELAY", "every callback and deferrable deleter on a fresh thread after 0-3 ms"),
    Legal("timing", "L_REORDER", "the onAllocs of one allocAsync delivered in reverse order (fresh threads)"),
    # With the capacity declared: a later request's answer comes while an earlier one of the same call, which
    # the device may have admitted already, is still pending.
    Legal(
        "timing",
        "L_REORDER",
        "the same, with the vnpu's capacity declared: answers judged against the requests still pending",
        ("--capacity", "268435456"),
    ),
    Legal("y", "L_VICTIM_SMALLEST", "preempt=lowest takes the unmapped buffer of the smallest priority value"),
    Legal("y", "L_LATE_ONPREEMPT", "every onPreempt held until the application freed the buffer (or 300 ms)"),
    Legal("y", "L_LOAD_FREED_EIO", "a load whose buffer was freed before its onLoad is answered EIO", no_warn=True),
    Legal(
        "y",
        "L_SUPPORT_NO_SEGMENT",
        "requests with a file segment unsupported (isSupported false, allocation ENOSPC): the segment "
        "clauses stay undemonstrated",
        exit_code=2,
    ),
)


# Rows the kit does not judge as the issue asks yet, each with the reason found by running it (see the
# README). The tests expect these rows to fail (strict xfail): when the kit is fixed they pass, the
# xfail turns into a failure, and the entry must be removed.
KNOWN_GAPS: dict[str, str] = {}

# The testable sentences no MUTANTS row is expected to name, each with why: a permission (the text allows
# something and forbids nothing, so no implementation breaks it; the LEGAL rows named exercise it), a caller's
# duty (the device has nothing to break), or a sentence whose breach the trace can show only as another
# sentence's (subsumed, naming the rows that show it), or an equivalent mutant (no trace can tell it apart).
JUSTIFIED: dict[str, tuple[str, str]] = {
    "alloc-callback-thread": ("permission", "onAlloc on any thread: L_CALLER_THREAD (R1 warns), L_FRESH_THREAD"),
    "alloc-callback-any-thread": ("permission", "onAlloc on any thread: L_FRESH_THREAD, L_RANDOM_DELAY, L_REORDER"),
    "cookie-deleter-any-thread": ("permission", "deleters on any thread: L_FRESH_THREAD, L_RANDOM_DELAY"),
    "preempt-callback-any-thread": ("permission", "onPreempt on any thread: L_FRESH_THREAD, L_LATE_ONPREEMPT"),
    "preempt-after-free-race": ("permission", "onPreempt after the free: L_LATE_ONPREEMPT"),
    "preempt-window-before-callback": (
        "permission",
        "a window between the preemption and onPreempt: L_LATE_ONPREEMPT; what the window forbids is "
        "map-preempt-window-enoent's (M_WINDOW_MAP_SUCCEEDS)",
    ),
    "map-must-unmap": ("duty", "the application's duty to unmap; the device's side is unmap-unmaps"),
    "free-success-buffer-must-be-freed": (
        "duty",
        "the application's duty to free; a device refusing the free is named by free-each-allocated-buffer "
        "(M_FREE_LIST_REFUSED), free-even-if-preempted and preempt-must-still-free",
    ),
    "req-free-destroys": (
        "subsumed",
        "a request free that keeps its cookie shows only as the deleter never called: cookie-deleter-called "
        "(M_NO_DELETER)",
    ),
    "req-create-default-state": (
        "subsumed",
        "each field's default has its own sentence and row: M_DEFAULT_DEVICE_ZERO, M_DEFAULT_TYPE_VALID, "
        "M_DEFAULT_PRIORITY_MAX, M_DEFAULT_PROT_RW, M_DEFAULT_COOKIE_NONNULL, M_FIRST_ONPREEMPT",
    ),
    "crash-alloc-onalloc-null": (
        "subsumed",
        "the callback type's restatement of the NULL onAlloc rule: M_SETONALLOC_NULL_OK (crash-setonalloc-null), "
        "M_ALLOC_WITHOUT_ONALLOC_OK (crash-alloc-without-onalloc)",
    ),
    "req-file-segment": (
        "subsumed",
        "a segment ignored shows as the buffer's bytes when onAlloc came, the sentence of the load at allocation: "
        "load-on-alloc-reported-by-onalloc (M_SEGMENT_IGNORED, M_FIRST_SEGMENT)",
    ),
    "alloc-list-modify-after-return": (
        "subsumed",
        "an implementation that reads the list after allocAsync returned answers under another request's "
        "cookie (the probe reverses the list): cookie-identify-request (M_COOKIES_SWAPPED)",
    ),
    "req-size-default-zero": (
        "equivalent",
        "size 0 may be granted or refused (R4): a default of one page is a size-0 request granted a page; "
        "M_DEFAULT_SIZE_PAGE warns R4",
    ),
}


def testable_clauses() -> list[tuple[str, str]]:
    """(id, testability) of every clause of the catalogue the kit judges, in catalogue order."""
    import yaml

    catalogue = yaml.safe_load((ROOT / "conformance" / "clauses.yaml").read_text(encoding="utf-8"))
    return [(c["id"], c["testability"]) for c in catalogue["clauses"] if c["testability"] != "not-testable"]


def killers(clause: str) -> list[Mutant]:
    """The MUTANTS rows that must be named by `clause` (as their clause or among `also`), known gaps aside."""
    return [m for m in MUTANTS if (m.clause == clause or clause in m.also) and m.mutation not in KNOWN_GAPS]


def real_library() -> Path:
    """The libvnpu of the host build (`npuconf probe build`), made here when missing or stale."""
    from host.probe import DEFAULT_BUILD_DIR, current_build

    return current_build(ROOT / DEFAULT_BUILD_DIR).vnpu.resolve()


def build(mutation: str, out_dir: Path, real_lib: Path) -> Path:
    """Compiles interposer.c for one mutation; returns the shared library."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"lib{mutation.lower()}.so"
    command = [
        "gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-shared", "-fPIC",
        "-I", str(ROOT / "ndk_probe" / "include"),
        f"-DMUTATION={mutation}", f'-DREAL_LIB="{real_lib}"',
        "-o", str(lib), str(SOURCE), "-ldl", "-lpthread",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building {mutation} failed:\n{done.stderr}")
    return lib


@dataclass
class Outcome:
    exit_code: int
    summary_exit: int | None
    counts: Counter[str]
    # scenario -> (verdict, clause of the divergence or None, message)
    bad: dict[str, tuple[str, str | None, str]] = field(default_factory=dict)
    warned: dict[str, str] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)  # the claim's clauses not demonstrated -> why
    stdout: str = ""
    stderr: str = ""

    def failing(self, clause: str, verdict: str = "FAIL") -> list[str]:
        """Scenarios whose `verdict` (FAIL, or CRASH: the clause of the step that died) names `clause`."""
        return sorted(s for s, (v, c, _) in self.bad.items() if v == verdict and c == clause)

    def warning(self, reading: str) -> list[str]:
        """Scenarios whose WARN names `reading` (the reason lists "R<n> (sentence)")."""
        return sorted(s for s, reason in self.warned.items() if f"{reading} (" in reason)

    def clauses(self) -> Counter[str]:
        return Counter(c or verdict for verdict, c, _ in self.bad.values())

    def describe(self) -> str:
        lines = [f"exit {self.exit_code} (summary {self.summary_exit}), {dict(self.counts)}"]
        lines += [f"  {v} {s} [{c}] {m[:200]}" for s, (v, c, m) in sorted(self.bad.items())]
        if self.stderr.strip():
            lines.append("stderr: " + self.stderr.strip()[-800:])
        return "\n".join(lines)


def run_kit(lib: Path, out_dir: Path, *extra: str, timeout: float = 900) -> Outcome:
    """`npuconf run --target local --impl lib` on the whole corpus (or `extra` filters), with 16 probe
    processes: the scenarios a mutant leaves waiting for a callback that never comes overlap (a run is
    bound by those waits: L_SUPPORTED_EIO took 55 s with 4, 21 s with 8, 11 s with 16, same verdicts)."""
    done = subprocess.run(
        [sys.executable, "-m", "host", "run", "--target", "local", "--impl", str(lib), "--out", str(out_dir),
         "--store", str(out_dir.parent / "store.sqlite"), "-j", "16", "-q", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    outcome = Outcome(done.returncode, None, Counter(), stdout=done.stdout, stderr=done.stderr)
    summary = out_dir / "summary.json"
    if summary.is_file():
        data = json.loads(summary.read_text(encoding="utf-8"))
        outcome.summary_exit = data["exit_code"]
        for gap in data["claim"]["not_demonstrated"]:
            outcome.gaps.update(dict.fromkeys(gap["clauses"], gap["why"]))
    results = out_dir / "results.jsonl"
    if not results.is_file():
        return outcome
    with results.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record.get("kind") != "result":
                continue
            verdict = record["verdict"]
            outcome.counts[verdict] += 1
            divergence = record.get("divergence") or {}
            if verdict in BAD_VERDICTS:
                message = divergence.get("message") or record.get("reason") or ""
                outcome.bad[record["scenario"]] = (verdict, divergence.get("clause"), message)
            elif verdict == "WARN":
                outcome.warned[record["scenario"]] = record.get("reason") or divergence.get("message") or ""
    return outcome


def clause_table(work: Path, real_lib: Path) -> None:
    """Prints the README's per-sentence table from a real run of every row that must name a clause."""
    runs: dict[tuple[str, tuple[str, ...]], Outcome] = {}
    print("| clause | testability | mutants | scenarios naming it (FAIL or CRASH) |")
    print("|---|---|---|---|")
    for clause, testability in testable_clauses():
        rows = killers(clause)
        if not rows:
            kind, why = JUSTIFIED[clause]
            print(f"| `{clause}` | {testability} | {kind} | {why} |")
            continue
        cells = []
        for m in rows:
            key = (m.mutation, m.args)
            if key not in runs:
                lib = build(m.mutation, work / m.mutation, real_lib)
                runs[key] = run_kit(lib, work / m.mutation / f"run{len(runs)}", *m.args)
            named = sorted({*runs[key].failing(clause), *runs[key].failing(clause, "CRASH")})
            shown = ", ".join(f"`{n}`" for n in named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
            cells.append((f"`{m.mutation}`" + (" " + " ".join(m.args) if m.args else ""), shown or "**none**"))
        print(
            f"| `{clause}` | {testability} | {'<br>'.join(c for c, _ in cells)} | {'<br>'.join(n for _, n in cells)} |"
        )
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    if argv == ["--clauses"]:
        with tempfile.TemporaryDirectory(prefix="npuconf-adversary-") as tmp:
            clause_table(Path(tmp), real_library())
        return 0
    wanted = set(argv)
    real_lib = real_library()
    with tempfile.TemporaryDirectory(prefix="npuconf-adversary-") as tmp:
        work = Path(tmp)
        print("| class | mutation | expected clause | exit | scenarios FAIL naming it | other non-PASS |")
        print("|---|---|---|---|---|---|")
        for m in MUTANTS:
            if wanted and m.mutation not in wanted:
                continue
            o = run_kit(build(m.mutation, work / m.mutation, real_lib), work / m.mutation / "run", *m.args)
            others = {k: v for k, v in o.clauses().items() if k != m.clause}
            print(
                f"| {m.klass} | `{m.mutation}` | `{m.clause}` | {o.exit_code} | {len(o.failing(m.clause, m.verdict))} "
                f"| {', '.join(f'{k} x{v}' for k, v in sorted(others.items())) or '-'} |"
            )
            sys.stdout.flush()
        print()
        print("| class | mutation | expected reading | exit | scenarios WARN naming it | non-PASS |")
        print("|---|---|---|---|---|---|")
        for w in WARNED:
            if wanted and w.mutation not in wanted:
                continue
            o = run_kit(build(w.mutation, work / w.mutation, real_lib), work / w.mutation / "run", *w.args)
            bad = ", ".join(f"{k} x{n}" for k, n in sorted(o.clauses().items()))
            print(
                f"| {w.klass} | `{w.mutation}` | {w.reading} | {o.exit_code} | {len(o.warning(w.reading))} "
                f"| {bad or '-'} |"
            )
            sys.stdout.flush()
        print()
        print("| class | mutation | expected clauses not demonstrated | exit | named | non-PASS |")
        print("|---|---|---|---|---|---|")
        for i in INCOMPLETE:
            if wanted and i.mutation not in wanted:
                continue
            o = run_kit(build(i.mutation, work / i.mutation, real_lib), work / i.mutation / "run", *i.args)
            bad = ", ".join(f"{k} x{n}" for k, n in sorted(o.clauses().items()))
            named = sum(1 for c in i.clauses if c in o.gaps)
            print(
                f"| {i.klass} | `{i.mutation}` | {', '.join(i.clauses)} | {o.exit_code} | {named} of {len(i.clauses)} "
                f"| {bad or '-'} |"
            )
            sys.stdout.flush()
        print()
        print("| class | variation | exit | PASS | WARN | non-PASS |")
        print("|---|---|---|---|---|---|")
        for v in LEGAL:
            if wanted and v.mutation not in wanted:
                continue
            o = run_kit(build(v.mutation, work / v.name, real_lib), work / v.name / "run", *v.args)
            bad = ", ".join(f"{k} x{n}" for k, n in sorted(o.clauses().items()))
            options = " " + " ".join(v.args) if v.args else ""
            print(
                f"| {v.klass} | `{v.mutation}`{options} | {o.exit_code} | {o.counts['PASS']} | {o.counts['WARN']} "
                f"| {bad or '-'} |"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
