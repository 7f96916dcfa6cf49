/* Generated from ndk_probe/vocabulary.yaml by ndk_probe/tools/gen_vocabulary.py. DO NOT EDIT; change the source and regenerate. */
#ifndef NPUCONF_GEN_VOCABULARY_H
#define NPUCONF_GEN_VOCABULARY_H

#include <errno.h>
#include <stddef.h>

#define NPUCONF_VOCAB_VERSION 4
#define NPUCONF_VOCAB_HASH "0f0180732f5374e4"
#define NPUCONF_MAX_OP_ARGS 6

enum npuconf_arg_kind {
    ARG_REQ,
    ARG_BUF,
    ARG_COOKIE,
    ARG_MAP,
    ARG_FILE,
    ARG_REQS,
    ARG_BUFS,
    ARG_I32,
    ARG_I64,
    ARG_U64,
    ARG_PROT,
    ARG_MAPFLAGS,
    ARG_BOOL,
    ARG_ERRNO,
    ARG_FDSEL,
    ARG_BINDSEL,
    ARG_TEXT,
};

enum npuconf_op {
    OP_REQ_CREATE,
    OP_REQ_FREE,
    OP_REQ_FREE_NULL,
    OP_REQ_SET_DEVICE,
    OP_REQ_SET_TYPE,
    OP_REQ_SET_SIZE,
    OP_REQ_SET_PRIORITY,
    OP_REQ_SET_PROT,
    OP_REQ_SET_COOKIE,
    OP_REQ_SET_ONALLOC,
    OP_REQ_SET_ONALLOC_NULL_REQ,
    OP_REQ_SET_ONPREEMPT,
    OP_REQ_SET_FILE,
    OP_IS_SUPPORTED,
    OP_ALLOC,
    OP_BUF_FREE,
    OP_BUF_MAP,
    OP_BUF_UNMAP,
    OP_BUF_SET_PRIORITY,
    OP_BUF_LOAD,
    OP_COOKIE_NEW,
    OP_AWAIT_ALLOC,
    OP_AWAIT_LOAD,
    OP_AWAIT_PREEMPT,
    OP_BIND,
    OP_MAP_WRITE,
    OP_MAP_READ,
    OP_MAP_PROT,
    OP_MAP_GONE,
    OP_FILE_NEW,
    OP_FILE_SEEK,
    OP_FD_CHECK,
    OP_AWAIT_CLOSED,
    OP_VNPU,
    OP_SLEEP_MS,
    OP_PAR_BEGIN,
    OP_PAR_END,
    OP_CB_ACTION,
    OP__COUNT
};

struct npuconf_op_arg { const char *name; enum npuconf_arg_kind kind; };
struct npuconf_op_info {
    const char *name;
    const char *api; /* NULL for probe helpers */
    size_t nargs;
    struct npuconf_op_arg args[NPUCONF_MAX_OP_ARGS > 0 ? NPUCONF_MAX_OP_ARGS : 1];
};

static const struct npuconf_op_info NPUCONF_OPS[OP__COUNT] = {
    [OP_REQ_CREATE] = {"req_create", "ANpuManager_AllocRequest_create", 1, {{"req", ARG_REQ}}},
    [OP_REQ_FREE] = {"req_free", "ANpuManager_AllocRequest_free", 1, {{"req", ARG_REQ}}},
    [OP_REQ_FREE_NULL] = {"req_free_null", "ANpuManager_AllocRequest_free", 0, {{NULL, ARG_TEXT}}},
    [OP_REQ_SET_DEVICE] = {"req_set_device", "ANpuManager_AllocRequest_setDeviceNumber", 2, {{"req", ARG_REQ}, {"device", ARG_I32}}},
    [OP_REQ_SET_TYPE] = {"req_set_type", "ANpuManager_AllocRequest_setBufferType", 2, {{"req", ARG_REQ}, {"type", ARG_I32}}},
    [OP_REQ_SET_SIZE] = {"req_set_size", "ANpuManager_AllocRequest_setSize", 2, {{"req", ARG_REQ}, {"size", ARG_I64}}},
    [OP_REQ_SET_PRIORITY] = {"req_set_priority", "ANpuManager_AllocRequest_setBufferPriority", 2, {{"req", ARG_REQ}, {"priority", ARG_I32}}},
    [OP_REQ_SET_PROT] = {"req_set_prot", "ANpuManager_AllocRequest_setProtectionFlags", 2, {{"req", ARG_REQ}, {"prot", ARG_PROT}}},
    [OP_REQ_SET_COOKIE] = {"req_set_cookie", "ANpuManager_AllocRequest_setCookie", 3, {{"req", ARG_REQ}, {"cookie", ARG_COOKIE}, {"deleter", ARG_BOOL}}},
    [OP_REQ_SET_ONALLOC] = {"req_set_onalloc", "ANpuManager_AllocRequest_setOnAlloc", 2, {{"req", ARG_REQ}, {"set", ARG_BOOL}}},
    [OP_REQ_SET_ONALLOC_NULL_REQ] = {"req_set_onalloc_null_req", "ANpuManager_AllocRequest_setOnAlloc", 0, {{NULL, ARG_TEXT}}},
    [OP_REQ_SET_ONPREEMPT] = {"req_set_onpreempt", "ANpuManager_AllocRequest_setOnPreempt", 2, {{"req", ARG_REQ}, {"set", ARG_BOOL}}},
    [OP_REQ_SET_FILE] = {"req_set_file", "ANpuManager_AllocRequest_setFileSegmentToLoad", 5, {{"req", ARG_REQ}, {"fd", ARG_FDSEL}, {"file_offset", ARG_I64}, {"length", ARG_I64}, {"buffer_offset", ARG_I64}}},
    [OP_IS_SUPPORTED] = {"is_supported", "ANpuManager_isSupported", 1, {{"reqs", ARG_REQS}}},
    [OP_ALLOC] = {"alloc", "ANpuManager_allocAsync", 1, {{"reqs", ARG_REQS}}},
    [OP_BUF_FREE] = {"buf_free", "ANpuBuffer_free", 1, {{"bufs", ARG_BUFS}}},
    [OP_BUF_MAP] = {"buf_map", "ANpuBuffer_map", 6, {{"map", ARG_MAP}, {"buf", ARG_BUF}, {"length", ARG_U64}, {"prot", ARG_PROT}, {"flags", ARG_MAPFLAGS}, {"offset", ARG_I64}}},
    [OP_BUF_UNMAP] = {"buf_unmap", "ANpuBuffer_unmap", 3, {{"map", ARG_MAP}, {"offset", ARG_U64}, {"length", ARG_U64}}},
    [OP_BUF_SET_PRIORITY] = {"buf_set_priority", "ANpuBuffer_setPriority", 2, {{"buf", ARG_BUF}, {"priority", ARG_I32}}},
    [OP_BUF_LOAD] = {"buf_load", "ANpuBuffer_loadAsync", 6, {{"buf", ARG_BUF}, {"fd", ARG_FDSEL}, {"file_offset", ARG_I64}, {"length", ARG_I64}, {"buffer_offset", ARG_I64}, {"onload", ARG_BOOL}}},
    [OP_COOKIE_NEW] = {"cookie_new", NULL, 1, {{"cookie", ARG_COOKIE}}},
    [OP_AWAIT_ALLOC] = {"await_alloc", NULL, 2, {{"count", ARG_U64}, {"timeout_ms", ARG_U64}}},
    [OP_AWAIT_LOAD] = {"await_load", NULL, 2, {{"count", ARG_U64}, {"timeout_ms", ARG_U64}}},
    [OP_AWAIT_PREEMPT] = {"await_preempt", NULL, 2, {{"count", ARG_U64}, {"timeout_ms", ARG_U64}}},
    [OP_BIND] = {"bind", NULL, 2, {{"buf", ARG_BUF}, {"select", ARG_BINDSEL}}},
    [OP_MAP_WRITE] = {"map_write", NULL, 4, {{"map", ARG_MAP}, {"offset", ARG_U64}, {"length", ARG_U64}, {"seed", ARG_U64}}},
    [OP_MAP_READ] = {"map_read", NULL, 3, {{"map", ARG_MAP}, {"offset", ARG_U64}, {"length", ARG_U64}}},
    [OP_MAP_PROT] = {"map_prot", NULL, 3, {{"map", ARG_MAP}, {"offset", ARG_U64}, {"length", ARG_U64}}},
    [OP_MAP_GONE] = {"map_gone", NULL, 3, {{"map", ARG_MAP}, {"offset", ARG_U64}, {"length", ARG_U64}}},
    [OP_FILE_NEW] = {"file_new", NULL, 3, {{"file", ARG_FILE}, {"size", ARG_U64}, {"seed", ARG_U64}}},
    [OP_FILE_SEEK] = {"file_seek", NULL, 2, {{"file", ARG_FILE}, {"position", ARG_I64}}},
    [OP_FD_CHECK] = {"fd_check", NULL, 1, {{"file", ARG_FILE}}},
    [OP_AWAIT_CLOSED] = {"await_closed", NULL, 2, {{"file", ARG_FILE}, {"timeout_ms", ARG_U64}}},
    [OP_VNPU] = {"vnpu", "vnpu_control", 1, {{"command", ARG_TEXT}}},
    [OP_SLEEP_MS] = {"sleep_ms", NULL, 1, {{"ms", ARG_U64}}},
    [OP_PAR_BEGIN] = {"par_begin", NULL, 1, {{"threads", ARG_U64}}},
    [OP_PAR_END] = {"par_end", NULL, 0, {{NULL, ARG_TEXT}}},
    [OP_CB_ACTION] = {"cb_action", NULL, 3, {{"kind", ARG_TEXT}, {"action", ARG_TEXT}, {"count", ARG_U64}}},
};

static const char *const NPUCONF_ARG_KIND_NAMES[] = {
    "req",
    "buf",
    "cookie",
    "map",
    "file",
    "reqs",
    "bufs",
    "i32",
    "i64",
    "u64",
    "prot",
    "mapflags",
    "bool",
    "errno",
    "fdsel",
    "bindsel",
    "text",
};

struct npuconf_errno_name { int number; const char *name; };
static const struct npuconf_errno_name NPUCONF_ERRNOS[] = {
    {EPERM, "EPERM"},
    {ENOENT, "ENOENT"},
    {ESRCH, "ESRCH"},
    {EINTR, "EINTR"},
    {EIO, "EIO"},
    {ENXIO, "ENXIO"},
    {E2BIG, "E2BIG"},
    {EBADF, "EBADF"},
    {EAGAIN, "EAGAIN"},
    {ENOMEM, "ENOMEM"},
    {EACCES, "EACCES"},
    {EFAULT, "EFAULT"},
    {EBUSY, "EBUSY"},
    {EEXIST, "EEXIST"},
    {ENODEV, "ENODEV"},
    {EINVAL, "EINVAL"},
    {ENFILE, "ENFILE"},
    {EMFILE, "EMFILE"},
    {ENOSPC, "ENOSPC"},
    {ESPIPE, "ESPIPE"},
    {ERANGE, "ERANGE"},
    {EDEADLK, "EDEADLK"},
    {ENOSYS, "ENOSYS"},
    {EOVERFLOW, "EOVERFLOW"},
    {EBADMSG, "EBADMSG"},
    {ENOTSUP, "ENOTSUP"},
    {ECANCELED, "ECANCELED"},
    {ECONNRESET, "ECONNRESET"},
    {ETIMEDOUT, "ETIMEDOUT"},
};
#define NPUCONF_ERRNO_COUNT 29

/* ANpuBuffer_Priority */
#define NPUCONF_ANPUBUFFER_PRIORITY_MIN 0
#define NPUCONF_ANPUBUFFER_PRIORITY_DEFAULT 500
#define NPUCONF_ANPUBUFFER_PRIORITY_MAX 1000
/* ANpuBuffer_Type */
#define NPUCONF_ANPUBUFFER_TYPE_UNKNOWN 0
#define NPUCONF_ANPUBUFFER_TYPE_MODEL_EXECUTABLE 1
#define NPUCONF_ANPUBUFFER_TYPE_MODEL_WEIGHTS 2
#define NPUCONF_ANPUBUFFER_TYPE_CACHE 3
#define NPUCONF_ANPUBUFFER_TYPE_AUXILIARY 4

#define NPUCONF_COOKIE_DELETERS 4
#define NPUCONF_ISSUPPORTED_CANARY 16
#define NPUCONF_TRACE_VERSION 2
#define NPUCONF_PREEMPT_LATE_MS 100

#define PROBE_EXIT_OK 0
#define PROBE_EXIT_USAGE 2
#define PROBE_EXIT_BAD_PROGRAM 3
#define PROBE_EXIT_API_MISSING 4

#define NPUCONF_PAGE_SIZE 4096
#define NPUCONF_PROT_NONE 0
#define NPUCONF_PROT_READ 1
#define NPUCONF_PROT_WRITE 2
#define NPUCONF_PROT_EXEC 4

#define NPUCONF_CB_SLEEP_MIN 1
#define NPUCONF_CB_SLEEP_MAX 9999
#define NPUCONF_CB_HOLD_MIN 1
#define NPUCONF_CB_HOLD_MAX 9999

#define NPUCONF_EV_BEGIN "begin"
#define NPUCONF_EV_CALL "call"
#define NPUCONF_EV_RET "ret"
#define NPUCONF_EV_CB "cb"
#define NPUCONF_EV_CB_RETURN "cb_return"
#define NPUCONF_EV_DELETER "deleter"
#define NPUCONF_EV_SETTLE "settle"
#define NPUCONF_EV_END "end"
#define NPUCONF_EV_EXIT "exit"
#define NPUCONF_EV_API_MISSING "api_missing"
#define NPUCONF_EV__COUNT 10

/* callback kinds: X(ID, "kind") */
#define NPUCONF_CALLBACK_KINDS(X) \
    X(ALLOC, "alloc") \
    X(LOAD, "load") \
    X(PREEMPT, "preempt")

/* cb_action words: X(ID, "word"), the first what an unarmed callback does; a word ending in _ takes a value */
#define NPUCONF_CB_ACTIONS(X) \
    X(NONE, "none") \
    X(FREE_BUF, "free_buf") \
    X(MAP_UNMAP, "map_unmap") \
    X(WAIT_RETURN, "wait_return") \
    X(NEW_REQUEST, "new_request") \
    X(SET_PRIORITY, "set_priority_") \
    X(ALLOC, "alloc_") \
    X(SLEEP, "sleep_") \
    X(HOLD, "hold_")

/* vnpu control commands: X(key) */
#define NPUCONF_VNPU_COMMANDS(X) \
    X(preempt) \
    X(preempt_late) \
    X(pressure) \
    X(delay_ms) \
    X(callback_thread) \
    X(fail_next)
#define NPUCONF_VNPU_CALLBACK_THREAD_CALLER "caller"
#define NPUCONF_VNPU_CALLBACK_THREAD_OTHER "other"

/* vnpu_policies: X(ID, "name"), the default first */
#define NPUCONF_VNPU_POLICIES(X) \
    X(BUDGET, "budget") \
    X(ACL, "acl") \
    X(CACHING, "caching") \
    X(ARENA, "arena")
#define NPUCONF_VNPU_POLICIES_CHOICES "budget, acl, caching or arena"

/* vnpu_personalities: X(ID, "name"), the default first */
#define NPUCONF_VNPU_PERSONALITIES(X) \
    X(PUBLISHED, "published") \
    X(AOSP_2026, "aosp-2026")
#define NPUCONF_VNPU_PERSONALITIES_CHOICES "published or aosp-2026"

#endif
