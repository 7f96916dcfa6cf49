"""Generated from ndk_probe/vocabulary.yaml by ndk_probe/tools/gen_vocabulary.py. DO NOT EDIT; change the source and regenerate."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

VOCABULARY_VERSION: Final = 4
VOCABULARY_HASH: Final = "0f0180732f5374e4"


class ArgKind(StrEnum):
    REQ = "req"
    BUF = "buf"
    COOKIE = "cookie"
    MAP = "map"
    FILE = "file"
    REQS = "reqs"
    BUFS = "bufs"
    I32 = "i32"
    I64 = "i64"
    U64 = "u64"
    PROT = "prot"
    MAPFLAGS = "mapflags"
    BOOL = "bool"
    ERRNO = "errno"
    FDSEL = "fdsel"
    BINDSEL = "bindsel"
    TEXT = "text"


class Op(StrEnum):
    REQ_CREATE = "req_create"
    REQ_FREE = "req_free"
    REQ_FREE_NULL = "req_free_null"
    REQ_SET_DEVICE = "req_set_device"
    REQ_SET_TYPE = "req_set_type"
    REQ_SET_SIZE = "req_set_size"
    REQ_SET_PRIORITY = "req_set_priority"
    REQ_SET_PROT = "req_set_prot"
    REQ_SET_COOKIE = "req_set_cookie"
    REQ_SET_ONALLOC = "req_set_onalloc"
    REQ_SET_ONALLOC_NULL_REQ = "req_set_onalloc_null_req"
    REQ_SET_ONPREEMPT = "req_set_onpreempt"
    REQ_SET_FILE = "req_set_file"
    IS_SUPPORTED = "is_supported"
    ALLOC = "alloc"
    BUF_FREE = "buf_free"
    BUF_MAP = "buf_map"
    BUF_UNMAP = "buf_unmap"
    BUF_SET_PRIORITY = "buf_set_priority"
    BUF_LOAD = "buf_load"
    COOKIE_NEW = "cookie_new"
    AWAIT_ALLOC = "await_alloc"
    AWAIT_LOAD = "await_load"
    AWAIT_PREEMPT = "await_preempt"
    BIND = "bind"
    MAP_WRITE = "map_write"
    MAP_READ = "map_read"
    MAP_PROT = "map_prot"
    MAP_GONE = "map_gone"
    FILE_NEW = "file_new"
    FILE_SEEK = "file_seek"
    FD_CHECK = "fd_check"
    AWAIT_CLOSED = "await_closed"
    VNPU = "vnpu"
    SLEEP_MS = "sleep_ms"
    PAR_BEGIN = "par_begin"
    PAR_END = "par_end"
    CB_ACTION = "cb_action"


@dataclass(frozen=True, slots=True)
class ArgSpec:
    name: str
    kind: ArgKind


@dataclass(frozen=True, slots=True)
class OpSpec:
    op: Op
    api: str | None
    args: tuple[ArgSpec, ...]


OPS: Final[dict[Op, OpSpec]] = {
    Op.REQ_CREATE: OpSpec(Op.REQ_CREATE, "ANpuManager_AllocRequest_create", (ArgSpec("req", ArgKind.REQ), )),
    Op.REQ_FREE: OpSpec(Op.REQ_FREE, "ANpuManager_AllocRequest_free", (ArgSpec("req", ArgKind.REQ), )),
    Op.REQ_FREE_NULL: OpSpec(Op.REQ_FREE_NULL, "ANpuManager_AllocRequest_free", ()),
    Op.REQ_SET_DEVICE: OpSpec(Op.REQ_SET_DEVICE, "ANpuManager_AllocRequest_setDeviceNumber", (ArgSpec("req", ArgKind.REQ), ArgSpec("device", ArgKind.I32), )),
    Op.REQ_SET_TYPE: OpSpec(Op.REQ_SET_TYPE, "ANpuManager_AllocRequest_setBufferType", (ArgSpec("req", ArgKind.REQ), ArgSpec("type", ArgKind.I32), )),
    Op.REQ_SET_SIZE: OpSpec(Op.REQ_SET_SIZE, "ANpuManager_AllocRequest_setSize", (ArgSpec("req", ArgKind.REQ), ArgSpec("size", ArgKind.I64), )),
    Op.REQ_SET_PRIORITY: OpSpec(Op.REQ_SET_PRIORITY, "ANpuManager_AllocRequest_setBufferPriority", (ArgSpec("req", ArgKind.REQ), ArgSpec("priority", ArgKind.I32), )),
    Op.REQ_SET_PROT: OpSpec(Op.REQ_SET_PROT, "ANpuManager_AllocRequest_setProtectionFlags", (ArgSpec("req", ArgKind.REQ), ArgSpec("prot", ArgKind.PROT), )),
    Op.REQ_SET_COOKIE: OpSpec(Op.REQ_SET_COOKIE, "ANpuManager_AllocRequest_setCookie", (ArgSpec("req", ArgKind.REQ), ArgSpec("cookie", ArgKind.COOKIE), ArgSpec("deleter", ArgKind.BOOL), )),
    Op.REQ_SET_ONALLOC: OpSpec(Op.REQ_SET_ONALLOC, "ANpuManager_AllocRequest_setOnAlloc", (ArgSpec("req", ArgKind.REQ), ArgSpec("set", ArgKind.BOOL), )),
    Op.REQ_SET_ONALLOC_NULL_REQ: OpSpec(Op.REQ_SET_ONALLOC_NULL_REQ, "ANpuManager_AllocRequest_setOnAlloc", ()),
    Op.REQ_SET_ONPREEMPT: OpSpec(Op.REQ_SET_ONPREEMPT, "ANpuManager_AllocRequest_setOnPreempt", (ArgSpec("req", ArgKind.REQ), ArgSpec("set", ArgKind.BOOL), )),
    Op.REQ_SET_FILE: OpSpec(Op.REQ_SET_FILE, "ANpuManager_AllocRequest_setFileSegmentToLoad", (ArgSpec("req", ArgKind.REQ), ArgSpec("fd", ArgKind.FDSEL), ArgSpec("file_offset", ArgKind.I64), ArgSpec("length", ArgKind.I64), ArgSpec("buffer_offset", ArgKind.I64), )),
    Op.IS_SUPPORTED: OpSpec(Op.IS_SUPPORTED, "ANpuManager_isSupported", (ArgSpec("reqs", ArgKind.REQS), )),
    Op.ALLOC: OpSpec(Op.ALLOC, "ANpuManager_allocAsync", (ArgSpec("reqs", ArgKind.REQS), )),
    Op.BUF_FREE: OpSpec(Op.BUF_FREE, "ANpuBuffer_free", (ArgSpec("bufs", ArgKind.BUFS), )),
    Op.BUF_MAP: OpSpec(Op.BUF_MAP, "ANpuBuffer_map", (ArgSpec("map", ArgKind.MAP), ArgSpec("buf", ArgKind.BUF), ArgSpec("length", ArgKind.U64), ArgSpec("prot", ArgKind.PROT), ArgSpec("flags", ArgKind.MAPFLAGS), ArgSpec("offset", ArgKind.I64), )),
    Op.BUF_UNMAP: OpSpec(Op.BUF_UNMAP, "ANpuBuffer_unmap", (ArgSpec("map", ArgKind.MAP), ArgSpec("offset", ArgKind.U64), ArgSpec("length", ArgKind.U64), )),
    Op.BUF_SET_PRIORITY: OpSpec(Op.BUF_SET_PRIORITY, "ANpuBuffer_setPriority", (ArgSpec("buf", ArgKind.BUF), ArgSpec("priority", ArgKind.I32), )),
    Op.BUF_LOAD: OpSpec(Op.BUF_LOAD, "ANpuBuffer_loadAsync", (ArgSpec("buf", ArgKind.BUF), ArgSpec("fd", ArgKind.FDSEL), ArgSpec("file_offset", ArgKind.I64), ArgSpec("length", ArgKind.I64), ArgSpec("buffer_offset", ArgKind.I64), ArgSpec("onload", ArgKind.BOOL), )),
    Op.COOKIE_NEW: OpSpec(Op.COOKIE_NEW, None, (ArgSpec("cookie", ArgKind.COOKIE), )),
    Op.AWAIT_ALLOC: OpSpec(Op.AWAIT_ALLOC, None, (ArgSpec("count", ArgKind.U64), ArgSpec("timeout_ms", ArgKind.U64), )),
    Op.AWAIT_LOAD: OpSpec(Op.AWAIT_LOAD, None, (ArgSpec("count", ArgKind.U64), ArgSpec("timeout_ms", ArgKind.U64), )),
    Op.AWAIT_PREEMPT: OpSpec(Op.AWAIT_PREEMPT, None, (ArgSpec("count", ArgKind.U64), ArgSpec("timeout_ms", ArgKind.U64), )),
    Op.BIND: OpSpec(Op.BIND, None, (ArgSpec("buf", ArgKind.BUF), ArgSpec("select", ArgKind.BINDSEL), )),
    Op.MAP_WRITE: OpSpec(Op.MAP_WRITE, None, (ArgSpec("map", ArgKind.MAP), ArgSpec("offset", ArgKind.U64), ArgSpec("length", ArgKind.U64), ArgSpec("seed", ArgKind.U64), )),
    Op.MAP_READ: OpSpec(Op.MAP_READ, None, (ArgSpec("map", ArgKind.MAP), ArgSpec("offset", ArgKind.U64), ArgSpec("length", ArgKind.U64), )),
    Op.MAP_PROT: OpSpec(Op.MAP_PROT, None, (ArgSpec("map", ArgKind.MAP), ArgSpec("offset", ArgKind.U64), ArgSpec("length", ArgKind.U64), )),
    Op.MAP_GONE: OpSpec(Op.MAP_GONE, None, (ArgSpec("map", ArgKind.MAP), ArgSpec("offset", ArgKind.U64), ArgSpec("length", ArgKind.U64), )),
    Op.FILE_NEW: OpSpec(Op.FILE_NEW, None, (ArgSpec("file", ArgKind.FILE), ArgSpec("size", ArgKind.U64), ArgSpec("seed", ArgKind.U64), )),
    Op.FILE_SEEK: OpSpec(Op.FILE_SEEK, None, (ArgSpec("file", ArgKind.FILE), ArgSpec("position", ArgKind.I64), )),
    Op.FD_CHECK: OpSpec(Op.FD_CHECK, None, (ArgSpec("file", ArgKind.FILE), )),
    Op.AWAIT_CLOSED: OpSpec(Op.AWAIT_CLOSED, None, (ArgSpec("file", ArgKind.FILE), ArgSpec("timeout_ms", ArgKind.U64), )),
    Op.VNPU: OpSpec(Op.VNPU, "vnpu_control", (ArgSpec("command", ArgKind.TEXT), )),
    Op.SLEEP_MS: OpSpec(Op.SLEEP_MS, None, (ArgSpec("ms", ArgKind.U64), )),
    Op.PAR_BEGIN: OpSpec(Op.PAR_BEGIN, None, (ArgSpec("threads", ArgKind.U64), )),
    Op.PAR_END: OpSpec(Op.PAR_END, None, ()),
    Op.CB_ACTION: OpSpec(Op.CB_ACTION, None, (ArgSpec("kind", ArgKind.TEXT), ArgSpec("action", ArgKind.TEXT), ArgSpec("count", ArgKind.U64), )),
}

ERRNO_NAMES: Final[frozenset[str]] = frozenset({
    "EPERM",
    "ENOENT",
    "ESRCH",
    "EINTR",
    "EIO",
    "ENXIO",
    "E2BIG",
    "EBADF",
    "EAGAIN",
    "ENOMEM",
    "EACCES",
    "EFAULT",
    "EBUSY",
    "EEXIST",
    "ENODEV",
    "EINVAL",
    "ENFILE",
    "EMFILE",
    "ENOSPC",
    "ESPIPE",
    "ERANGE",
    "EDEADLK",
    "ENOSYS",
    "EOVERFLOW",
    "EBADMSG",
    "ENOTSUP",
    "ECANCELED",
    "ECONNRESET",
    "ETIMEDOUT",
})


class Priority(IntEnum):
    """ANpuBuffer_Priority of buffer.h."""

    MIN = 0
    DEFAULT = 500
    MAX = 1000


class Type(IntEnum):
    """ANpuBuffer_Type of buffer.h."""

    UNKNOWN = 0
    MODEL_EXECUTABLE = 1
    MODEL_WEIGHTS = 2
    CACHE = 3
    AUXILIARY = 4


COOKIE_DELETERS: Final = 4
ISSUPPORTED_CANARY: Final = 16
TRACE_VERSION: Final = 2
PREEMPT_LATE_MS: Final = 100


class ProbeExit(IntEnum):
    OK = 0
    USAGE = 2
    BAD_PROGRAM = 3
    API_MISSING = 4


PROBE_LIST_LINES: Final[tuple[str, ...]] = (
    "vocabulary 4 0f0180732f5374e4",
    "op req_create ANpuManager_AllocRequest_create req:req",
    "op req_free ANpuManager_AllocRequest_free req:req",
    "op req_free_null ANpuManager_AllocRequest_free",
    "op req_set_device ANpuManager_AllocRequest_setDeviceNumber req:req device:i32",
    "op req_set_type ANpuManager_AllocRequest_setBufferType req:req type:i32",
    "op req_set_size ANpuManager_AllocRequest_setSize req:req size:i64",
    "op req_set_priority ANpuManager_AllocRequest_setBufferPriority req:req priority:i32",
    "op req_set_prot ANpuManager_AllocRequest_setProtectionFlags req:req prot:prot",
    "op req_set_cookie ANpuManager_AllocRequest_setCookie req:req cookie:cookie deleter:bool",
    "op req_set_onalloc ANpuManager_AllocRequest_setOnAlloc req:req set:bool",
    "op req_set_onalloc_null_req ANpuManager_AllocRequest_setOnAlloc",
    "op req_set_onpreempt ANpuManager_AllocRequest_setOnPreempt req:req set:bool",
    "op req_set_file ANpuManager_AllocRequest_setFileSegmentToLoad req:req fd:fdsel file_offset:i64 length:i64 buffer_offset:i64",
    "op is_supported ANpuManager_isSupported reqs:reqs",
    "op alloc ANpuManager_allocAsync reqs:reqs",
    "op buf_free ANpuBuffer_free bufs:bufs",
    "op buf_map ANpuBuffer_map map:map buf:buf length:u64 prot:prot flags:mapflags offset:i64",
    "op buf_unmap ANpuBuffer_unmap map:map offset:u64 length:u64",
    "op buf_set_priority ANpuBuffer_setPriority buf:buf priority:i32",
    "op buf_load ANpuBuffer_loadAsync buf:buf fd:fdsel file_offset:i64 length:i64 buffer_offset:i64 onload:bool",
    "op cookie_new - cookie:cookie",
    "op await_alloc - count:u64 timeout_ms:u64",
    "op await_load - count:u64 timeout_ms:u64",
    "op await_preempt - count:u64 timeout_ms:u64",
    "op bind - buf:buf select:bindsel",
    "op map_write - map:map offset:u64 length:u64 seed:u64",
    "op map_read - map:map offset:u64 length:u64",
    "op map_prot - map:map offset:u64 length:u64",
    "op map_gone - map:map offset:u64 length:u64",
    "op file_new - file:file size:u64 seed:u64",
    "op file_seek - file:file position:i64",
    "op fd_check - file:file",
    "op await_closed - file:file timeout_ms:u64",
    "op vnpu vnpu_control command:text",
    "op sleep_ms - ms:u64",
    "op par_begin - threads:u64",
    "op par_end -",
    "op cb_action - kind:text action:text count:u64",
)


PAGE_SIZE: Final = 4096
PROT_BITS: Final[dict[str, int]] = {"READ": 1, "WRITE": 2, "EXEC": 4}


@dataclass(frozen=True, slots=True)
class CbActionSpec:
    """A cb_action action: `word`, or `word` followed by a value of kind `value` (within min..max)."""

    word: str
    value: ArgKind | None
    min: int | None
    max: int | None


CB_ACTIONS: Final[tuple[CbActionSpec, ...]] = (
    CbActionSpec("none", None, None, None),
    CbActionSpec("free_buf", None, None, None),
    CbActionSpec("map_unmap", None, None, None),
    CbActionSpec("wait_return", None, None, None),
    CbActionSpec("new_request", None, None, None),
    CbActionSpec("set_priority_", ArgKind.I32, None, None),
    CbActionSpec("alloc_", ArgKind.REQ, None, None),
    CbActionSpec("sleep_", ArgKind.U64, 1, 9999),
    CbActionSpec("hold_", ArgKind.U64, 1, 9999),
)


@dataclass(frozen=True, slots=True)
class VnpuCommandSpec:
    """A vnpu control command `key=value`; `value`: target, u64, u32, errno or words."""

    key: str
    value: str
    words: tuple[str, ...]


VNPU_COMMANDS: Final[dict[str, VnpuCommandSpec]] = {
    "preempt": VnpuCommandSpec("preempt", "target", ()),
    "preempt_late": VnpuCommandSpec("preempt_late", "target", ()),
    "pressure": VnpuCommandSpec("pressure", "u64", ()),
    "delay_ms": VnpuCommandSpec("delay_ms", "u32", ()),
    "callback_thread": VnpuCommandSpec("callback_thread", "words", ('caller', 'other')),
    "fail_next": VnpuCommandSpec("fail_next", "errno", ()),
}

# The virtual NPU's allocation policies and personalities, the default first.
VNPU_POLICIES: Final[tuple[str, ...]] = ('budget', 'acl', 'caching', 'arena')
VNPU_PERSONALITIES: Final[tuple[str, ...]] = ('published', 'aosp-2026')


class EventKind(StrEnum):
    BEGIN = "begin"
    CALL = "call"
    RET = "ret"
    CB = "cb"
    CB_RETURN = "cb_return"
    DELETER = "deleter"
    SETTLE = "settle"
    END = "end"
    EXIT = "exit"
    API_MISSING = "api_missing"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A trace field: its JSON types (see vocabulary.yaml); optional: may be absent."""

    name: str
    types: tuple[str, ...]
    optional: bool


TRACE_EVENTS: Final[dict[EventKind, tuple[FieldSpec, ...]]] = {
    EventKind.BEGIN: (FieldSpec("scenario", ('str',), False), FieldSpec("trace", ('int',), True), FieldSpec("pid", ('int',), True), FieldSpec("t", ('int',), True), ),
    EventKind.CALL: (FieldSpec("step", ('int',), False), FieldSpec("op", ('str',), False), FieldSpec("args", ('object',), False), FieldSpec("th", ('str',), True), FieldSpec("in_cb", ('str',), True), FieldSpec("teardown", ('bool',), True), FieldSpec("t", ('int',), True), ),
    EventKind.RET: (FieldSpec("step", ('int',), False), FieldSpec("op", ('str',), False), FieldSpec("ret", ('int', 'null'), True), FieldSpec("errno", ('str', 'null'), True), FieldSpec("skipped", ('str',), True), FieldSpec("dur_ns", ('number',), True), FieldSpec("th", ('str',), True), FieldSpec("in_cb", ('str',), True), FieldSpec("t", ('int',), True), ),
    EventKind.CB: (FieldSpec("kind", ('str',), False), FieldSpec("cookie", ('str', 'null'), True), FieldSpec("error", ('int', 'str'), True), FieldSpec("buf", ('str', 'null'), True), FieldSpec("thread", ('str',), False), FieldSpec("th", ('str',), True), FieldSpec("cookie_deleted", ('bool',), True), FieldSpec("t", ('int',), True), ),
    EventKind.CB_RETURN: (FieldSpec("kind", ('str',), False), FieldSpec("cookie", ('str', 'null'), True), FieldSpec("th", ('str',), True), FieldSpec("t", ('int',), True), ),
    EventKind.DELETER: (FieldSpec("cookie", ('str', 'null'), True), FieldSpec("thread", ('str',), False), FieldSpec("th", ('str',), True), FieldSpec("fn", ('int',), True), FieldSpec("cookie_deleted", ('bool',), True), FieldSpec("t", ('int',), True), ),
    EventKind.SETTLE: (FieldSpec("what", ('str',), False), FieldSpec("reached", ('bool',), False), FieldSpec("expected", ('int',), True), FieldSpec("got", ('int',), True), FieldSpec("t", ('int',), True), ),
    EventKind.END: (FieldSpec("scenario", ('str',), False), FieldSpec("t", ('int',), True), ),
    EventKind.EXIT: (FieldSpec("scenario", ('str',), True), FieldSpec("status", ('str',), False), FieldSpec("code", ('int', 'null'), True), FieldSpec("signal", ('str', 'null'), True), FieldSpec("host", ('bool',), True), FieldSpec("reason", ('str',), True), FieldSpec("t", ('int',), True), ),
    EventKind.API_MISSING: (FieldSpec("symbols", ('list',), False), ),
}

RET_RESULTS: Final[dict[Op, tuple[FieldSpec, ...]]] = {
    Op.REQ_CREATE: (FieldSpec("null", ('bool',), True), ),
    Op.IS_SUPPORTED: (FieldSpec("results", ('list',), True), FieldSpec("canary", ('bool',), True), ),
    Op.ALLOC: (FieldSpec("blocked", ('bool',), True), ),
    Op.BUF_LOAD: (FieldSpec("blocked", ('bool',), True), ),
    Op.AWAIT_ALLOC: (FieldSpec("reached", ('bool',), True), FieldSpec("got", ('int',), True), ),
    Op.AWAIT_LOAD: (FieldSpec("reached", ('bool',), True), FieldSpec("got", ('int',), True), ),
    Op.AWAIT_PREEMPT: (FieldSpec("reached", ('bool',), True), FieldSpec("got", ('int',), True), ),
    Op.BIND: (FieldSpec("handle", ('str', 'null'), True), ),
    Op.MAP_READ: (FieldSpec("digest", ('str',), True), ),
    Op.MAP_PROT: (FieldSpec("mapped", ('bool',), True), FieldSpec("prot_all", ('int',), True), FieldSpec("prot_any", ('int',), True), ),
    Op.MAP_GONE: (FieldSpec("mapped", ('bool',), True), ),
    Op.FD_CHECK: (FieldSpec("closed", ('bool',), True), FieldSpec("position", ('int',), True), ),
    Op.AWAIT_CLOSED: (FieldSpec("closed", ('bool',), True), FieldSpec("position", ('int',), True), FieldSpec("waited_ms", ('int',), True), ),
}

CALLBACK_KINDS: Final[tuple[str, ...]] = ('alloc', 'load', 'preempt')
CALLBACK_THREADS: Final[tuple[str, ...]] = ('caller', 'other')
SETTLE_TARGETS: Final[tuple[str, ...]] = ('alloc', 'load', 'preempt', 'deleters')
EXIT_STATUSES: Final[tuple[str, ...]] = ('ok', 'code', 'signal', 'timeout', 'error')

TRACE_UNEMITTED: Final[dict[EventKind, str]] = {
    EventKind.API_MISSING: "written only when the implementation lacks API functions; the kit's vnpu exports them all",
}
