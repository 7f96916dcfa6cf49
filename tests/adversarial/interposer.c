/*
 * An implementation of android/npumanager/buffer.h that forwards every call to the real libvnpu and
 * changes exactly one behaviour, chosen at build time with -DMUTATION=<one of enum mutation>.
 * M_* are violations of the published text (the kit must FAIL them); W_* depart only from a reading
 * of silent text (the kit must WARN); L_* are legal variations (the kit must not FAIL them). M_NONE
 * forwards everything through the same wrappers.
 *
 * How it forwards. The application's request objects are shim requests that own a real request.
 * The application's cookie, deleter and callbacks stay in the shim; the real library only ever sees
 * one "submission" object per request per allocAsync as its cookie (with the shim's deleter) and the
 * shim's callbacks. So every callback and deleter passes through here, where it can be re-timed,
 * re-threaded or changed. Buffers are the real library's pointers (vnpu control commands name them).
 *
 * Lifetimes. A holder is one hand-over of the application's cookie (setCookie): the request holds
 * it until replaced or freed, each submission holds it until the real library deletes the
 * submission. The application's deleter runs when the last holder lets go. A submission is held by
 * the real library (one reference, dropped by the real deleter) and by every callback the shim has
 * deferred to another thread, so the cookie is never deleted while a callback may still run.
 *
 * Build: gcc -std=c11 -Wall -Wextra -Werror -shared -fPIC -I ndk_probe/include
 *        -DMUTATION=M_NONE -DREAL_LIB='"/abs/path/libvnpu.so"' -o libmutant.so interposer.c -ldl -lpthread
 * $NPUCONF_REAL_IMPL, when set, overrides REAL_LIB.
 */
#define _GNU_SOURCE
#include <android/npumanager/buffer.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum mutation {
    M_NONE,
    /* violations */
    M_MAP_ENOENT,          /* a: every map fails with ENOENT, onPreempt never delivered */
    M_PREEMPT_IN_FREE,     /* a: onPreempt(cookie) inside ANpuBuffer_free for every buffer freed */
    W_PREEMPT_IN_FREE_UNMAPPED, /* a: the same, only for buffers with no mapping left (the kit: WARN R13) */
    M_PREEMPT_ON_FAILED,   /* a: onPreempt(cookie) after every failed onAlloc (no buffer to preempt) */
    M_LIVE_CALLBACKS,      /* b: onAlloc/onPreempt read from the request at callback time, not snapshotted */
    M_FIRST_DELETER,       /* c: every cookie deleted with the first deleter ever received */
    M_SUPPORT_COUNT,       /* d: isSupported returns the number of supported requests */
    M_SUPPORT_BY_COOKIE,   /* d: a request carrying a non-NULL cookie is reported unsupported */
    M_SUPPORT_CANARY,      /* d/h: isSupported writes one byte past outIsSupported[requestsLen - 1] */
    M_SUPPORT_TWICE_DIFFERS, /* d: a request listed again in one call gets the opposite answer */
    W_BLOCKING_ALLOC,      /* e: allocAsync waits (up to 1 s) until its onAllocs have run (the kit: WARN R14) */
    W_BLOCKING_LOAD,       /* e: loadAsync waits (up to 1 s) until its onLoad has run (the kit: WARN R14) */
    M_COOKIE_48,           /* f: cookies handed to callbacks and deleters keep only their low 48 bits */
    M_CREATE_NULL,         /* g: ANpuManager_AllocRequest_create returns NULL */
    M_SETONALLOC_NULL_OK,  /* h: setOnAlloc(request, NULL) returns instead of crashing */
    M_NULL_REQUEST_OK,     /* h: setOnAlloc(NULL, f) returns instead of crashing */
    M_DELETE_AT_FREE,      /* i: the cookie is deleted inside ANpuBuffer_free though a late onPreempt may come */
    M_FD_LEAK,             /* o: owned descriptors are never closed */
    M_ERRNUM_NEGATIVE,     /* r: onAlloc and onLoad errors delivered as negative numbers (-ENOMEM, -EBUSY) */
    M_FREE_COUNT,          /* s: ANpuBuffer_free returns the number of buffers freed */
    M_PRIORITY_OLD,        /* s: setPriority returns the buffer's previous priority on success */
    M_UNMAP_AFTER_FREE,    /* s: unmapping a mapping of a freed buffer returns -1 (EINVAL), although it unmaps */
    M_COOKIE_PLUS1,        /* t: callbacks get the cookie plus one (deleters get the right one) */
    W_LOAD_EIO,            /* u: every other valid loadAsync answered EIO (the kit: WARN R8) */
    W_PRIORITY_RANGE_OK,   /* u: out-of-range priorities clamped and accepted (request and setPriority: R4) */
    W_NEG_LENGTH_OK,       /* u: a negative segmentLength loads nothing and succeeds (R17) */
    W_PROT_NONE_REFUSED,   /* u: a PROT_NONE map refused with EINVAL (R18) */
    W_PRIORITY_NO_RAISE,   /* u: setPriority refuses to raise a buffer's priority, EPERM (R19) */
    W_FREE_BUSY_LOADING,   /* u: ANpuBuffer_free refused with EBUSY while a load of the buffer is in flight (R20) */
    W_ALLOC_BUSY_OVERLAP,  /* u: an allocAsync overlapping another thread's refuses its valid requests, EBUSY (R21) */
    W_ALLOC_BUSY_DECIDED_LATE, /* u: allocAsync sends its first request at once and decides the others 20 ms later,
                                  refusing them (EBUSY) when another thread's allocAsync began meanwhile (R21) */
    W_ERROR_AT_NEXT_ALLOC, /* q: a failed onAlloc is held until the next allocAsync, inside it on the caller's thread
                              (or 50 ms, then on a thread of its own) (R1) */
    W_SUPPORT_LARGE_TRUE,  /* q: isSupported says true for a request of 1 MiB or more of a valid pair it lacks (R5) */
    W_BAD_FD_NO_FILE,      /* u: a request fd that is neither valid nor -1 means "no file" (R22) */
    L_SUPPORT_E2BIG,       /* v: isSupported returns -1 with E2BIG for lists longer than 8 */
    M_LOAD_ZERO_TO_EOF,    /* r: a loadAsync of length 0 loads from fileOffset to the end of the file */
    M_SUPPORT_CACHED,      /* r: isSupported answers every request with its first answer, however it changed */
    M_MAP_ROUND_DOWN,      /* r: map and unmap lengths are rounded down to whole pages (4097 -> 4096) */
    M_MAP_IGNORE_PROT,     /* r: every mapping is made readable and writable, whatever its prot */
    M_FIRST_SIZE,          /* r: only the first setSize of a request counts */
    M_PREEMPT_UNDER_LOCK,  /* r: onPreempt runs under a lock every API function takes (calls in it hang) */
    M_PREEMPT_PRIVATE_MAPPED, /* 6: preempt=<buffer> of a buffer mapped only MAP_PRIVATE preempts it */
    M_LOAD_PRIVATE_MAPPED, /* 8: a loadAsync into a buffer mapped only MAP_PRIVATE loads (a shared copy) */
    M_PARTIAL_UNMAP_WHOLE, /* 10: unmapping part of a mapping unmaps all of it (the rest then faults) */
    M_FIRST_DEVICE,        /* r: only the first setDeviceNumber of a request counts */
    M_FIRST_TYPE,          /* r: only the first setBufferType of a request counts */
    M_FIRST_PROT,          /* r: only the first setProtectionFlags of a request counts */
    M_FIRST_SEGMENT,       /* r: only the first setFileSegmentToLoad of a request counts (later fds closed) */
    M_FIRST_ONPREEMPT,     /* r: only the first setOnPreempt of a request counts */
    M_FIRST_PRIORITY,      /* r: only the first setBufferPriority of a request counts */
    M_LOAD_OFFSET_FROM_POSITION, /* w: loadAsync loads from the descriptor's current position, not fileOffset */
    M_LOAD_PAST_LENGTH,    /* w: loadAsync of a length that is no page multiple loads on to the page's end */
    M_DEFAULT_PROT_RW,     /* w: a request that never set its protection allocates PROT_READ | PROT_WRITE */
    M_REQUEST_RECYCLED,    /* w: a new request is a freed one, fields and all (only its cookie cleared) */
    W_LOAD_BAD_FD_OK,      /* u: loadAsync of a negative descriptor answered onLoad(0) (R22) */
    W_MAP_EXEC_REFUSED,    /* u: a map asking PROT_EXEC refused with EACCES (R23) */
    /* z: one sentence each (the per-sentence table of the README) */
    M_FREE_NULL_CRASH,     /* AllocRequest_free(NULL) dies */
    M_DEFAULT_DEVICE_ZERO, /* a new request's device is 0 */
    M_DEFAULT_TYPE_VALID,  /* a new request's type is MODEL_EXECUTABLE */
    M_DEFAULT_PRIORITY_MAX, /* a new request's priority is ANPUBUFFER_PRIORITY_MAX */
    M_DEFAULT_SIZE_PAGE,   /* a new request's size is one page */
    M_COOKIES_SWAPPED,     /* the first two requests of an allocAsync answered under each other's cookies */
    M_COOKIE_DEREF,        /* setCookie reads a byte through the cookie */
    M_NO_DELETER,          /* deleters are never called */
    M_NO_NULL_DELETER,     /* the deleter is not called for a NULL cookie */
    M_NULL_DELETER_STALE,  /* a cookie set with a NULL deleter is deleted with the last deleter seen */
    M_REPLACE_KEEPS_OLD,   /* setCookie with a new cookie never deletes the one it replaces */
    M_CLEAR_KEEPS_OLD,     /* setCookie(NULL, NULL) never deletes the cookie it clears */
    M_DEFAULT_COOKIE_NONNULL, /* callbacks of a request that never had a cookie get the request's address */
    M_LIVE_COOKIE,         /* callbacks get the cookie the request holds at callback time */
    M_DOUBLE_ONALLOC_ON_ERROR, /* a failed onAlloc is delivered twice */
    M_DROP_ONALLOC,        /* the failed onAlloc of a request not yet freed is never delivered */
    M_FREE_CANCELS_PENDING, /* the onAlloc of a request freed before its answer is never delivered */
    M_ALLOC_TAKES_REQUEST, /* allocAsync frees the requests it forwarded (their next use dies) */
    M_ALLOC_WITHOUT_ONALLOC_OK, /* allocAsync of a list with a request without onAlloc returns, answering none */
    M_LIVE_FIELDS,         /* a buffer granted after its request became invalid is answered EINVAL instead */
    M_REQUEST_BOUNDS_REFUSED, /* requests of priority MIN or MAX refused, EINVAL */
    M_MINUS_ONE_FD_FAILS,  /* a request given fd -1 explicitly refused, EBADF */
    M_IGNORED_OFFSET_CHECKED, /* a request given fd -1 with a negative fileOffset refused, EINVAL */
    M_IGNORED_LENGTH_CHECKED, /* a request given fd -1 with a negative segmentLength refused, EINVAL */
    M_IGNORED_BOFF_CHECKED, /* a request given fd -1 with a negative bufferOffset refused, EINVAL */
    M_PROT_NONE_REQUEST_REFUSED, /* a request whose protection was set to PROT_NONE refused, EINVAL */
    M_FREE_LIST_REFUSED,   /* ANpuBuffer_free of more than one buffer refused, EINVAL */
    M_FREE_AFTER_ONPREEMPT_FAILS, /* ANpuBuffer_free of a buffer whose onPreempt ran returns -1 (ENOENT) */
    M_SUPPORT_ERR_NO_ERRNO, /* isSupported of more than 8 requests returns -1 with errno 0 */
    M_ASKED_REQUEST_FROZEN, /* changing or freeing a request isSupported answered for dies */
    M_SETTER_WHILE_PENDING_ABORTS, /* a setter on a request whose allocation is pending dies */
    M_REQUEST_FD_LEAK,     /* descriptors handed to requests are never closed */
    M_LOAD_NOTHING,        /* loadAsync answers onLoad(0) and loads nothing */
    M_ONLOAD_FOR_ALLOC,    /* a load at allocation also calls the last onLoad given to loadAsync */
    M_CLEARED_COOKIE_STAYS, /* callbacks of a request whose cookie was cleared get the cleared cookie */
    M_BUFFER_REUSED,       /* the second buffer granted by one allocAsync is the first one again */
    M_SEGMENT_IGNORED,     /* setFileSegmentToLoad closes the descriptor and loads nothing at allocation */
    M_FREED_MAPPED_KEPT,   /* ANpuBuffer_free of mapped buffers returns 0 and keeps them (memory and all) */
    M_FREED_MEMORY_KEPT,   /* ANpuBuffer_free of unmapped buffers returns 0 and keeps them (memory and all) */
    M_MAP_PROT_UNCHECKED,  /* a map wider than the request's protection is granted */
    M_MAP_FAIL_NO_ERRNO,   /* a failed map leaves errno 0 */
    M_PREEMPTED_MAP_EINVAL, /* a map of a preempted buffer fails with EINVAL */
    M_MAP_AFTER_CB_SUCCEEDS, /* a map of a buffer whose onPreempt ran returns fresh anonymous memory */
    M_WINDOW_MAP_SUCCEEDS, /* a map of a preempted buffer whose onPreempt has not run returns fresh memory */
    M_FREE_REFUSED_MAPPED, /* ANpuBuffer_free of a mapped buffer refused, EBUSY */
    M_FREE_PREEMPTED_FAILS, /* ANpuBuffer_free of a preempted buffer no onPreempt told of: -1 (ENOENT), nothing freed */
    M_FREED_MAPPING_REVOKED, /* ANpuBuffer_free makes the buffer's mappings inaccessible */
    M_UNMAP_AFTER_FREE_ABORTS, /* unmapping a mapping of a freed buffer dies */
    M_UNMAP_NOOP,          /* unmap returns 0 and leaves the mapping */
    M_PRIORITY_SET_IGNORED, /* setPriority returns 0 and changes nothing */
    M_PRIORITY_BOUNDS_REFUSED, /* setPriority(MIN or MAX) refused, EINVAL */
    M_PRIORITY_NO_ERRNO,   /* setPriority's refusals return -1 with errno left 0 */
    M_FREE_EMPTY_NO_ERRNO, /* ANpuBuffer_free of an empty list returns -1 with errno left 0 */
    M_LOAD_MOVES_POSITION, /* loadAsync leaves the descriptor's position after the segment */
    M_LOAD_IGNORES_BUFFER_OFFSET, /* loadAsync loads at the buffer's start, whatever bufferOffset */
    M_DOUBLE_ONLOAD,       /* a successful onLoad is delivered twice */
    M_DROP_ONLOAD,         /* a failed load's onLoad is never delivered */
    M_ONLOAD_ERROR_NULL_BUF, /* a failed load's onLoad gets buf NULL */
    M_ONLOAD_NULL_COOKIE,  /* onLoad gets cookie NULL */
    M_ONLOAD_ERRNUM_MINUS1, /* a failed load's onLoad gets errorNum -1 */
    M_LOAD_NULL_ONLOAD_OK, /* loadAsync with onLoad NULL returns */
    M_MAP_SHORT_REFUSED,   /* a map shorter than a page refused, EINVAL */
    M_MAP_WRITE_DROPPED,   /* a map asking PROT_WRITE is made without it (read-only pages) */
    M_FREE_BUSY_NO_ERRNO,  /* ANpuBuffer_free refused while a load of one of its buffers runs, errno left 0 */
    M_FREE_BUSY_ANY_LOAD,  /* ANpuBuffer_free refused (EBUSY) while any load runs, also another buffer's */
    M_DELETER_TWICE,       /* every deleter is called twice */
    M_DELETER_NULL,        /* every deleter is called with NULL, not with its cookie */
    M_PREEMPT_COOKIE_PLUS1, /* onPreempt gets the cookie plus one (onAlloc, onLoad and deleters the right one) */
    M_LATE_ONPREEMPT_TWICE, /* an onPreempt that comes after the buffer was freed is delivered twice */
    M_DELETE_AT_MAPPED_FREE, /* ANpuBuffer_free of a mapped buffer runs its cookie's deleter, other holders or not */
    M_FREED_MAPPING_ZEROED, /* ANpuBuffer_free zero-fills the first page of each of the buffer's mappings */
    M_SIZE_64M_EIO,        /* a valid request of exactly 64 MiB refused, EIO (a broken size class) */
    M_DELETE_AT_LAST_UNMAP, /* the last unmap of a freed buffer runs its cookie's deleter, other holders or not */
    M_PREEMPT_FORGOTTEN,   /* n: any buffer silently preempted before each loadAsync, no onPreempt; its free deletes the
                              cookie at once, other holders or not */
    M_ONPREEMPT_AFTER_MAPPED_FREE, /* ANpuBuffer_free of a mapped buffer runs its cookie's deleter, then onPreempt */
    /* legal, but what they refuse leaves clauses undemonstrated: the kit must say incomplete, naming them */
    I_SEGMENT_REFUSED,     /* x: every valid request with a file segment answered ENOMEM */
    I_LOAD_OFFSET_EIO,     /* x: every loadAsync with a nonzero fileOffset answered EIO (R8) */
    /* legal variations */
    L_ERRNO_RANGE,         /* j: bad priority -> ERANGE, bad prot bits -> ENOTSUP (allocAsync and setPriority) */
    L_SIZE0_OK,            /* k: a request of size 0 is granted a buffer */
    L_SUPPORTED_EIO,       /* l: every other valid supported request fails with EIO */
    L_SUPPORT_BY_SIZE,     /* m: requests above 32 KiB unsupported (and they fail with ENOSPC) */
    L_SILENT_PREEMPT_LOAD, /* n: a buffer without onPreempt is preempted silently before each loadAsync */
    L_FDS_AT_FREE,         /* o: owned fds are closed at ANpuBuffer_free (loads) / last buffer freed (requests) */
    L_FDS_AFTER_FREE,      /* o: the same descriptors closed on another thread 5 ms after ANpuBuffer_free returned */
    L_FDS_LATE,            /* o: the same, 300 ms after (a busy device's worker thread) */
    L_ENOMEM_PRESSURE,     /* p: at most 4 KiB of live buffers, ENOMEM beyond */
    L_CALLER_THREAD,       /* q: every onAlloc inside allocAsync on the caller's thread */
    L_SUPPORT_INVALID_TRUE,/* q: isSupported says true for an invalid device or type */
    L_PRIORITY_MAPPED_BUSY,/* q: setPriority refused (EBUSY) while the buffer is mapped */
    L_MAP_LIMIT,           /* q: at most 2 live mappings per buffer, ENOMEM beyond */
    L_MAP_ONE,             /* q: at most 1 live mapping per buffer, ENOMEM beyond */
    L_MAP_PAST_END_EINVAL, /* q: a map reaching past the buffer's last page refused, EINVAL */
    L_PRIORITY_PREEMPTED_ENOENT, /* q: setPriority of a buffer whose onPreempt ran refused, ENOENT */
    L_SEGMENT_CLIPPED,     /* q: a request segment past the file's or the buffer's end loads what exists and fits */
    L_LOAD_STARTS_LATE,    /* q: a loadAsync reaches the device 50 ms after it returned (a queued transfer) */
    L_MAP_RETURNS_LATE,    /* q: ANpuBuffer_map returns 20 ms after the real library answered (a driver round trip) */
    L_PREEMPTED_COOKIE_KEPT, /* n: a buffer with onPreempt silently preempted before each loadAsync; the onPreempt is
                                never delivered and the cookie never deleted, so it may still come */
    L_FRESH_THREAD,        /* every callback and deferrable deleter on a fresh thread */
    L_RANDOM_DELAY,        /* the same, after a random delay of 0..3 ms */
    L_REORDER,             /* the onAllocs of one allocAsync delivered in reverse order, fresh threads */
    L_VICTIM_SMALLEST,     /* y: preempt=lowest takes the buffer of the smallest priority value instead */
    L_LATE_ONPREEMPT,      /* y: every onPreempt held until the buffer is freed (or 300 ms), then delivered */
    L_LOAD_FREED_EIO,      /* y: a load whose buffer was freed before its onLoad is answered EIO */
    L_SUPPORT_NO_SEGMENT,  /* y: requests with a file segment unsupported (isSupported false, ENOSPC) */
    L_FREE_EMPTY_REFUSED,  /* v: ANpuBuffer_free of an empty list refused, EINVAL */
};

#ifndef MUTATION
#define MUTATION M_NONE
#endif
#ifndef REAL_LIB
#define REAL_LIB "libvnpu.so"
#endif

static const enum mutation MUT = MUTATION;

#define RETIMED (MUT == L_FRESH_THREAD || MUT == L_RANDOM_DELAY || MUT == L_REORDER)
/* Freed requests are kept (marked dead): callbacks look at them. */
#define KEEPS_FREED_REQUESTS                                                                                   \
    (MUT == M_LIVE_CALLBACKS || MUT == M_LIVE_COOKIE || MUT == M_DROP_ONALLOC || MUT == M_FREE_CANCELS_PENDING || \
     MUT == M_LIVE_FIELDS || MUT == M_SETTER_WHILE_PENDING_ABORTS)
/* The owned descriptors are kept by the interposer and closed at (or just after) the buffer's free. */
#define FDS_KEPT (MUT == L_FDS_AT_FREE || MUT == L_FDS_AFTER_FREE || MUT == L_FDS_LATE || MUT == M_FD_LEAK)
#define CLOSE_LATE (MUT == L_FDS_AFTER_FREE || MUT == L_FDS_LATE)
#define CLOSE_DELAY_NS (MUT == L_FDS_LATE ? 300L * 1000000L : 5L * 1000000L)
#define PAGE_SZ 4096u
/* W_BLOCKING_*: the wait for the callback is bounded so that a callback that calls allocAsync (on the
 * worker) cannot deadlock; 1 s is beyond the probe's 400 ms wait_return (a 50 ms bound returns while
 * such a callback still waits, which no trace can tell from a slow call). */
#define BLOCK_NS (1000L * 1000 * 1000)
#define SIZE_LIMIT ((int64_t)32 << 10)
#define LARGE_SIZE ((int64_t)1 << 20) /* W_SUPPORT_LARGE_TRUE: from here a valid pair is answered supported */
#define PRESSURE_LIMIT ((int64_t)4096)
#define SIZE_64M ((int64_t)64 << 20)
#define MAX_MAPS 2
#define MAX_FDS 8
#define MAX_MAPPINGS 16

/* ------------------------------------------------------------------------------------------ */
/* The real library                                                                            */

static struct {
    ANpuManager_AllocRequest *(*create)(void);
    void (*req_free)(ANpuManager_AllocRequest *);
    void (*set_cookie)(ANpuManager_AllocRequest *, void *, ANpuManager_CookieDeleter);
    void (*set_device)(ANpuManager_AllocRequest *, int32_t);
    void (*set_type)(ANpuManager_AllocRequest *, ANpuBuffer_Type);
    void (*set_size)(ANpuManager_AllocRequest *, int64_t);
    void (*set_priority)(ANpuManager_AllocRequest *, int32_t);
    void (*set_segment)(ANpuManager_AllocRequest *, int, int64_t, int64_t, int64_t);
    void (*set_prot)(ANpuManager_AllocRequest *, int32_t);
    void (*set_onalloc)(ANpuManager_AllocRequest *, ANpuManager_AllocCallback);
    void (*set_onpreempt)(ANpuManager_AllocRequest *, ANpuManager_PreemptCallback);
    int (*is_supported)(ANpuManager_AllocRequest *const *, size_t, bool *);
    void (*alloc_async)(ANpuManager_AllocRequest *const *, size_t);
    int (*buf_free)(ANpuBuffer *const *, size_t);
    void *(*map)(ANpuBuffer *, void *, size_t, int, int, off_t);
    int (*unmap)(ANpuBuffer *, void *, size_t);
    int (*buf_set_priority)(ANpuBuffer *, int32_t);
    void (*load_async)(ANpuBuffer *, int, int64_t, int64_t, int64_t, ANpuManager_LoadCallback);
    int (*control)(const char *);
} R;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void *need(void *lib, const char *name) {
    void *sym = dlsym(lib, name);
    if (sym == NULL) {
        fprintf(stderr, "interposer: %s missing in the real library\n", name);
        abort();
    }
    return sym;
}

static void load_real(void) {
    const char *path = getenv("NPUCONF_REAL_IMPL");
    if (path == NULL || path[0] == '\0') path = REAL_LIB;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "interposer: cannot load %s: %s\n", path, dlerror());
        abort();
    }
    *(void **)&R.create = need(lib, "ANpuManager_AllocRequest_create");
    *(void **)&R.req_free = need(lib, "ANpuManager_AllocRequest_free");
    *(void **)&R.set_cookie = need(lib, "ANpuManager_AllocRequest_setCookie");
    *(void **)&R.set_device = need(lib, "ANpuManager_AllocRequest_setDeviceNumber");
    *(void **)&R.set_type = need(lib, "ANpuManager_AllocRequest_setBufferType");
    *(void **)&R.set_size = need(lib, "ANpuManager_AllocRequest_setSize");
    *(void **)&R.set_priority = need(lib, "ANpuManager_AllocRequest_setBufferPriority");
    *(void **)&R.set_segment = need(lib, "ANpuManager_AllocRequest_setFileSegmentToLoad");
    *(void **)&R.set_prot = need(lib, "ANpuManager_AllocRequest_setProtectionFlags");
    *(void **)&R.set_onalloc = need(lib, "ANpuManager_AllocRequest_setOnAlloc");
    *(void **)&R.set_onpreempt = need(lib, "ANpuManager_AllocRequest_setOnPreempt");
    *(void **)&R.is_supported = need(lib, "ANpuManager_isSupported");
    *(void **)&R.alloc_async = need(lib, "ANpuManager_allocAsync");
    *(void **)&R.buf_free = need(lib, "ANpuBuffer_free");
    *(void **)&R.map = need(lib, "ANpuBuffer_map");
    *(void **)&R.unmap = need(lib, "ANpuBuffer_unmap");
    *(void **)&R.buf_set_priority = need(lib, "ANpuBuffer_setPriority");
    *(void **)&R.load_async = need(lib, "ANpuBuffer_loadAsync");
    *(void **)&R.control = dlsym(lib, "vnpu_control");
    if (MUT == L_CALLER_THREAD && R.control != NULL) R.control("callback_thread=caller");
}

/* M_PREEMPT_UNDER_LOCK: held around onPreempt; every API function passes through it at entry. */
static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;

static void real(void) {
    pthread_once(&real_once, load_real);
    if (MUT == M_PREEMPT_UNDER_LOCK) {
        pthread_mutex_lock(&api_mu);
        pthread_mutex_unlock(&api_mu);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Shared state (one process = one scenario)                                                   */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static _Atomic(ANpuManager_CookieDeleter) first_deleter;
static _Atomic(ANpuManager_CookieDeleter) last_deleter; /* M_NULL_DELETER_STALE */
static _Atomic(ANpuManager_LoadCallback) last_onload;   /* M_ONLOAD_FOR_ALLOC */
static unsigned supported_seen;    /* L_SUPPORTED_EIO, under mu */
static int64_t pressure_used;      /* L_ENOMEM_PRESSURE, under mu */
static bool fail_next_pending;     /* a vnpu fail_next is waiting for the next real request, under mu */
static unsigned long loads_done;   /* onLoads the application has received (W_BLOCKING_LOAD), under mu */
static atomic_int allocs_running;  /* allocAsync calls in progress (W_ALLOC_BUSY_OVERLAP) */
static atomic_ulong alloc_entries; /* allocAsync calls begun (W_ALLOC_BUSY_DECIDED_LATE) */
static atomic_int late_loads;      /* L_LOAD_STARTS_LATE: loads not yet handed to the real library */
/* M_DELETE_AT_LAST_UNMAP: buffers freed while mapped, with their holder and the pages still mapped; under mu */
static struct freed_mapped {
    ANpuBuffer *buf;
    struct holder *h;
    size_t pages;
} freed_mapped[16];
static size_t nfreed_mapped;

static void *cookie_out(void *cookie) {
    if (MUT == M_COOKIE_48) return (void *)((uintptr_t)cookie & (uintptr_t)0xFFFFFFFFFFFFull);
    return cookie;
}

/* The cookie a callback (not a deleter) receives. */
static void *callback_cookie(void *cookie) {
    if (MUT == M_COOKIE_PLUS1) return (void *)((uintptr_t)cookie + 1);
    return cookie_out(cookie);
}

/* The errorNum a callback receives. */
static int errnum_out(int error) { return MUT == M_ERRNUM_NEGATIVE ? -error : error; }

static int32_t clamp_priority(int32_t priority) {
    if (priority < ANPUBUFFER_PRIORITY_MIN) return ANPUBUFFER_PRIORITY_MIN;
    if (priority > ANPUBUFFER_PRIORITY_MAX) return ANPUBUFFER_PRIORITY_MAX;
    return priority;
}

/* Shared ownership of a request's file descriptor (L_FDS_AT_FREE). */
struct fdref {
    atomic_int refs;
    int fd;
};

static void fdref_release(struct fdref *f) {
    if (f != NULL && atomic_fetch_sub(&f->refs, 1) == 1) {
        if (MUT != M_FD_LEAK) close(f->fd);
        free(f);
    }
}

struct holder {
    atomic_int refs;
    void *cookie;
    ANpuManager_CookieDeleter deleter;
    atomic_bool kept; /* L_PREEMPTED_COOKIE_KEPT: a buffer of it was preempted without its onPreempt */
};

struct shim_req {
    ANpuManager_AllocRequest *real;
    struct holder *holder;
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_PreemptCallback on_preempt;
    int32_t device, priority, prot;
    int type;
    int64_t size;
    bool has_fd;
    bool fd_minus_one;  /* setFileSegmentToLoad(-1, ...) was called last */
    int64_t seg_offset, seg_length, seg_buffer_offset; /* its last arguments */
    bool prot_none;     /* setProtectionFlags(PROT_NONE) was called last */
    bool asked;         /* isSupported answered for it (M_ASKED_REQUEST_FROZEN) */
    atomic_int pending; /* its submissions not answered yet (M_SETTER_WHILE_PENDING_ABORTS) */
    void *cleared;      /* M_CLEARED_COOKIE_STAYS: the cookie setCookie(NULL, NULL) cleared */
    struct fdref *fd;
    bool dead; /* KEEPS_FREED_REQUESTS keeps freed requests (with their last values) */
    bool taken; /* M_ALLOC_TAKES_REQUEST freed it inside allocAsync */
    _Atomic(void *) cookie_now; /* M_LIVE_COOKIE: the cookie it holds now */
    struct shim_req *next_recycled; /* M_REQUEST_RECYCLED */
    bool size_set;   /* M_FIRST_SIZE: a size was set already */
    unsigned first_set; /* M_FIRST_*: the setters called once already (FIRST_* bits) */
    int support;     /* M_SUPPORT_CACHED: the first answer (0/1), or -1 */
};

struct batch {
    atomic_int refs;
    bool busy; /* W_ALLOC_BUSY_OVERLAP: its allocAsync began while another was in progress */
    size_t expected, arrived, done;
    struct job *jobs; /* L_REORDER */
    ANpuBuffer *first_buf; /* M_BUFFER_REUSED: the first buffer granted, under mu */
};

struct sub {
    atomic_int refs;
    struct holder *holder;
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_PreemptCallback on_preempt;
    struct shim_req *req; /* M_LIVE_CALLBACKS */
    struct fdref *fd;
    struct batch *batch;
    int64_t accounted;
    int64_t size;               /* the request's, at allocAsync (M_LOAD_PAST_LENGTH) */
    int32_t prot;               /* the request's, at allocAsync (M_MAP_PROT_UNCHECKED) */
    void *cleared;              /* the request's, at allocAsync (M_CLEARED_COOKIE_STAYS) */
    bool has_fd;                /* the request's, at allocAsync (M_ONLOAD_FOR_ALLOC) */
    atomic_bool told;           /* the application's onPreempt ran (M_FREE_AFTER_ONPREEMPT_FAILS) */
    int32_t priority;           /* the request's, at allocAsync (M_PRIORITY_OLD, W_PRIORITY_NO_RAISE) */
    atomic_bool cookie_dropped; /* M_DELETE_AT_FREE */
    atomic_bool preempted;      /* an onPreempt came from the real library */
    atomic_bool silent;         /* preempted here before a loadAsync, unseen (M_PREEMPT_FORGOTTEN, L_PREEMPTED_COOKIE_KEPT) */
    atomic_bool announced;      /* *_PREEMPT_IN_FREE* delivered its onPreempt: the real one is dropped */
    pthread_mutex_t order_mu;
    pthread_cond_t order_cv;
    unsigned next_ticket, serving;
};

enum job_kind { J_ALLOC, J_PREEMPT, J_LOAD, J_DELETER };

struct job {
    enum job_kind kind;
    struct sub *sub;
    int error;
    ANpuBuffer *buf;
    ANpuManager_LoadCallback on_load;
    struct holder *holder; /* J_DELETER */
    unsigned ticket;
};

/* Per-buffer bookkeeping, for the buffers the application received. */
struct mapping {
    uintptr_t start, end;
    size_t pages_left;
    bool private_; /* MAP_PRIVATE (M_PREEMPT_PRIVATE_MAPPED, M_LOAD_PRIVATE_MAPPED) */
    int prot;      /* as mapped (M_FREED_MAPPING_ZEROED) */
    int64_t offset; /* in the buffer (M_FREED_MAPPING_ZEROED) */
};

struct bufent {
    struct bufent *next;
    ANpuBuffer *buf;
    struct sub *sub;
    int fds[MAX_FDS];
    size_t nfds;
    struct mapping maps[MAX_MAPPINGS];
    int64_t accounted;
    int32_t priority; /* the last priority set (M_PRIORITY_OLD, W_PRIORITY_NO_RAISE), under mu */
    bool preempted_here; /* M_PREEMPT_PRIVATE_MAPPED preempted it: maps fail ENOENT, under mu */
};

static struct bufent *buffers; /* under mu */
static struct shim_req *recycled; /* M_REQUEST_RECYCLED: freed requests, kept as they were; under mu */

static struct bufent *find_buf(ANpuBuffer *buf) {
    for (struct bufent *e = buffers; e != NULL; e = e->next)
        if (e->buf == buf) return e;
    return NULL;
}

static size_t live_maps(const struct bufent *e) {
    size_t n = 0;
    for (size_t i = 0; i < MAX_MAPPINGS; i++) n += e->maps[i].pages_left > 0;
    return n;
}

/* Mapped, and only through MAP_PRIVATE mappings. */
static bool only_private_maps(const struct bufent *e) {
    size_t n = 0;
    for (size_t i = 0; i < MAX_MAPPINGS; i++) {
        if (e->maps[i].pages_left == 0) continue;
        if (!e->maps[i].private_) return false;
        n++;
    }
    return n > 0;
}

/* M_FIRST_*: whether this call of setter `bit` is a later one (ignored); the first is recorded. */
enum { FIRST_DEVICE = 1, FIRST_TYPE = 2, FIRST_PROT = 4, FIRST_SEGMENT = 8, FIRST_ONPREEMPT = 16, FIRST_PRIORITY = 32 };
static bool later_call_ignored(struct shim_req *r, enum mutation m, unsigned bit) {
    if (MUT != m || r == NULL) return false;
    bool later = (r->first_set & bit) != 0;
    r->first_set |= bit;
    return later;
}

/* M_LIVE_FIELDS: the request's fields as they are now make it one the text says is refused. */
static bool invalid_now(const struct shim_req *r) {
    return r->device < 0 || r->type < 1 || r->type > 4 || r->size < 0 || r->priority < ANPUBUFFER_PRIORITY_MIN ||
           r->priority > ANPUBUFFER_PRIORITY_MAX;
}

/* ------------------------------------------------------------------------------------------ */
/* Threads                                                                                     */

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static long random_delay_ns(void) {
    static _Atomic unsigned seed;
    unsigned s = atomic_fetch_add(&seed, 2654435761u) ^ (unsigned)getpid();
    return (long)(rand_r(&s) % 3000) * 1000L;
}

/* Runs fn(arg) on a new detached thread; on failure runs it here. */
static void spawn(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, fn, arg) != 0) fn(arg);
    pthread_attr_destroy(&attr);
}

/* L_FDS_AFTER_FREE, L_FDS_LATE: descriptors a free let go of, closed later on another thread. */
struct late_close {
    struct fdref *refs[64];
    size_t nrefs;
    int fds[64];
    size_t nfds;
};

static void *close_late(void *arg) {
    struct late_close *l = arg;
    sleep_ns(CLOSE_DELAY_NS);
    for (size_t k = 0; k < l->nrefs; k++) fdref_release(l->refs[k]);
    for (size_t k = 0; k < l->nfds; k++) close(l->fds[k]);
    free(l);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Holders, submissions                                                                        */

static struct holder *holder_new(void *cookie, ANpuManager_CookieDeleter deleter) {
    struct holder *h = calloc(1, sizeof *h);
    if (h == NULL) abort();
    atomic_init(&h->refs, 1);
    atomic_init(&h->kept, false);
    h->cookie = cookie;
    h->deleter = deleter;
    if (deleter != NULL) {
        ANpuManager_CookieDeleter none = NULL;
        atomic_compare_exchange_strong(&first_deleter, &none, deleter);
        atomic_store(&last_deleter, deleter);
    } else if (MUT == M_NULL_DELETER_STALE) {
        h->deleter = atomic_load(&last_deleter);
    }
    return h;
}

static void run_deleter(struct holder *h) {
    ANpuManager_CookieDeleter d = h->deleter;
    if (MUT == M_FIRST_DELETER && d != NULL) d = atomic_load(&first_deleter);
    if (MUT == M_NO_DELETER || (MUT == M_NO_NULL_DELETER && h->cookie == NULL)) d = NULL;
    if (MUT == L_PREEMPTED_COOKIE_KEPT && atomic_load(&h->kept)) d = NULL; /* the onPreempt may still come */
    if (d != NULL) d(MUT == M_DELETER_NULL ? NULL : cookie_out(h->cookie));
    if (d != NULL && MUT == M_DELETER_TWICE) d(cookie_out(h->cookie));
    free(h);
}

static void *deleter_thread(void *arg) {
    if (MUT == L_RANDOM_DELAY) sleep_ns(random_delay_ns());
    run_deleter(arg);
    return NULL;
}

/* may_defer: false where the text wants the deletion inside the call (setCookie replacing). */
static void holder_release(struct holder *h, bool may_defer) {
    if (h == NULL || atomic_fetch_sub(&h->refs, 1) != 1) return;
    if (RETIMED && may_defer)
        spawn(deleter_thread, h);
    else
        run_deleter(h);
}

static void holder_ref(struct holder *h) {
    if (h != NULL) atomic_fetch_add(&h->refs, 1);
}

static void batch_release(struct batch *b) {
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->jobs);
        free(b);
    }
}

static void sub_release(struct sub *s) {
    if (atomic_fetch_sub(&s->refs, 1) != 1) return;
    if (!atomic_load(&s->cookie_dropped)) holder_release(s->holder, true);
    fdref_release(s->fd);
    if (s->accounted > 0) {
        pthread_mutex_lock(&mu);
        pressure_used -= s->accounted;
        pthread_mutex_unlock(&mu);
    }
    batch_release(s->batch);
    pthread_mutex_destroy(&s->order_mu);
    pthread_cond_destroy(&s->order_cv);
    free(s);
}

static void sub_deleter(void *cookie) { sub_release(cookie); }

static void *sub_cookie(const struct sub *s) {
    if (MUT == M_LIVE_COOKIE && s->req != NULL) return callback_cookie(atomic_load(&s->req->cookie_now));
    if (MUT == M_DEFAULT_COOKIE_NONNULL && s->holder == NULL) return (void *)s->req;
    if (MUT == M_CLEARED_COOKIE_STAYS && s->holder == NULL) return callback_cookie(s->cleared);
    return callback_cookie(s->holder != NULL ? s->holder->cookie : NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Delivering callbacks                                                                        */

static void note_alloc_done(struct sub *s) {
    struct batch *b = s->batch;
    if (b == NULL) return;
    pthread_mutex_lock(&mu);
    b->done++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void deliver(struct job *j) {
    struct sub *s = j->sub;
    switch (j->kind) {
    case J_ALLOC: {
        ANpuManager_AllocCallback fn = s->on_alloc;
        if (MUT == M_LIVE_CALLBACKS && s->req != NULL && s->req->on_alloc != NULL) fn = s->req->on_alloc;
        if (MUT == M_BUFFER_REUSED && j->error == 0 && s->batch != NULL) {
            pthread_mutex_lock(&mu);
            ANpuBuffer *first = s->batch->first_buf;
            if (first == NULL) s->batch->first_buf = j->buf;
            pthread_mutex_unlock(&mu);
            if (first != NULL && first != j->buf) {
                R.buf_free(&j->buf, 1);
                j->buf = first;
            }
        }
        if (MUT == M_LIVE_FIELDS && j->error == 0 && s->req != NULL && !s->req->dead && invalid_now(s->req)) {
            R.buf_free(&j->buf, 1); /* the fields as they are at the answer, not at allocAsync */
            j->error = EINVAL;
            j->buf = NULL;
        }
        if (j->error == 0 && j->buf != NULL) {
            struct bufent *e = calloc(1, sizeof *e);
            if (e == NULL) abort();
            e->buf = j->buf;
            e->sub = s;
            e->accounted = s->accounted;
            e->priority = s->priority;
            s->accounted = 0;
            pthread_mutex_lock(&mu);
            e->next = buffers;
            buffers = e;
            pthread_mutex_unlock(&mu);
        }
        bool freed = s->req != NULL && s->req->dead;
        bool dropped = (MUT == M_DROP_ONALLOC && j->error != 0 && !freed) || (MUT == M_FREE_CANCELS_PENDING && freed);
        if (!dropped) fn(sub_cookie(s), errnum_out(j->error), j->buf);
        if (MUT == M_DOUBLE_ONALLOC_ON_ERROR && j->error != 0) fn(sub_cookie(s), errnum_out(j->error), j->buf);
        if (MUT == M_SETTER_WHILE_PENDING_ABORTS && s->req != NULL) atomic_fetch_sub(&s->req->pending, 1);
        ANpuManager_LoadCallback stale = atomic_load(&last_onload);
        if (MUT == M_ONLOAD_FOR_ALLOC && j->error == 0 && s->has_fd && stale != NULL) stale(sub_cookie(s), 0, j->buf);
        if (MUT == M_PREEMPT_ON_FAILED && j->error != 0 && s->on_preempt != NULL) s->on_preempt(sub_cookie(s));
        /* A failed submission is done with the cookie once its onAlloc returned: the real library's hold on
         * the submission may outlast this delivery on another thread (RETIMED), and must not keep the
         * application's cookie past a later setCookie that has to delete it. */
        if (RETIMED && j->error != 0 && !atomic_exchange(&s->cookie_dropped, true)) holder_release(s->holder, true);
        note_alloc_done(s);
        if (j->error != 0 && s->fd != NULL && FDS_KEPT) {
            /* nothing to free later: the failed submission no longer needs the fd */
            struct fdref *f = s->fd;
            s->fd = NULL;
            fdref_release(f);
        }
        break;
    }
    case J_PREEMPT: {
        ANpuManager_PreemptCallback fn = s->on_preempt;
        if (MUT == M_LIVE_CALLBACKS && s->req != NULL) fn = s->req->on_preempt; /* also once freed */
        bool forgotten = (MUT == M_PREEMPT_FORGOTTEN || MUT == L_PREEMPTED_COOKIE_KEPT) && atomic_load(&s->silent);
        if (MUT == M_MAP_ENOENT || forgotten || atomic_load(&s->announced)) fn = NULL;
        if (MUT == L_PREEMPTED_COOKIE_KEPT && forgotten && s->on_preempt != NULL && s->holder != NULL)
            atomic_store(&s->holder->kept, true);
        atomic_store(&s->preempted, true);
        bool twice = false;
        if (fn != NULL && MUT == M_LATE_ONPREEMPT_TWICE) {
            twice = true; /* unless the application still holds the buffer */
            pthread_mutex_lock(&mu);
            for (struct bufent *e = buffers; e != NULL && twice; e = e->next) twice = e->sub != s;
            pthread_mutex_unlock(&mu);
        }
        if (fn != NULL && MUT == M_PREEMPT_UNDER_LOCK) {
            pthread_mutex_lock(&api_mu);
            fn(sub_cookie(s));
            pthread_mutex_unlock(&api_mu);
        } else if (fn != NULL && MUT == M_PREEMPT_COOKIE_PLUS1) {
            fn((void *)((uintptr_t)sub_cookie(s) + 1));
        } else if (fn != NULL) {
            fn(sub_cookie(s));
        }
        if (twice) fn(sub_cookie(s));
        if (fn != NULL) atomic_store(&s->told, true);
        break;
    }
    case J_LOAD: {
        void *cookie = MUT == M_ONLOAD_NULL_COOKIE ? NULL : sub_cookie(s);
        int error = errnum_out(j->error);
        if (MUT == M_ONLOAD_ERRNUM_MINUS1 && error != 0) error = -1;
        ANpuBuffer *buf = MUT == M_ONLOAD_ERROR_NULL_BUF && error != 0 ? NULL : j->buf;
        if (!(MUT == M_DROP_ONLOAD && error != 0)) j->on_load(cookie, error, buf);
        if (MUT == M_DOUBLE_ONLOAD && error == 0) j->on_load(cookie, error, buf);
        pthread_mutex_lock(&mu);
        loads_done++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        break;
    }
    case J_DELETER:
        break;
    }
}

/* Callbacks of one submission run in the order the real library produced them (a buffer's
 * onPreempt never overtakes its onAlloc); callbacks of different submissions are unordered. */
static void run_in_order(struct job *j) {
    struct sub *s = j->sub;
    pthread_mutex_lock(&s->order_mu);
    while (s->serving != j->ticket) pthread_cond_wait(&s->order_cv, &s->order_mu);
    pthread_mutex_unlock(&s->order_mu);
    deliver(j);
    pthread_mutex_lock(&s->order_mu);
    s->serving++;
    pthread_cond_broadcast(&s->order_cv);
    pthread_mutex_unlock(&s->order_mu);
}

static void *job_thread(void *arg) {
    struct job *j = arg;
    if (MUT == L_RANDOM_DELAY) sleep_ns(random_delay_ns());
    run_in_order(j);
    sub_release(j->sub);
    free(j);
    return NULL;
}

static bool ready(struct job *j) {
    pthread_mutex_lock(&j->sub->order_mu);
    bool turn = j->sub->serving == j->ticket;
    pthread_mutex_unlock(&j->sub->order_mu);
    return turn;
}

/* Last listed first; a request listed twice keeps its own answers in order. */
static void *reverse_thread(void *arg) {
    struct batch *b = arg;
    size_t left = b->expected;
    bool *done = calloc(b->expected, sizeof *done);
    if (done == NULL) abort();
    while (left > 0) {
        for (size_t i = b->expected; i-- > 0;) {
            struct job *j = &b->jobs[i];
            if (done[i] || !ready(j)) continue;
            struct sub *s = j->sub;
            run_in_order(j);
            sub_release(s);
            done[i] = true;
            left--;
        }
    }
    free(done);
    batch_release(b);
    return NULL;
}

/* W_ERROR_AT_NEXT_ALLOC: failed onAllocs held for the application's next allocAsync, in arrival order, under mu */
static struct held_job {
    struct job job;
    struct held_job *next;
} *held_jobs;

/* Delivers every held onAlloc on this thread. */
static void drain_held(void) {
    pthread_mutex_lock(&mu);
    struct held_job *h = held_jobs;
    held_jobs = NULL;
    pthread_mutex_unlock(&mu);
    while (h != NULL) {
        struct held_job *next = h->next;
        deliver(&h->job);
        sub_release(h->job.sub);
        free(h);
        h = next;
    }
}

static void *drain_held_later(void *arg) {
    (void)arg;
    sleep_ns(50L * 1000000L); /* no allocAsync came: delivered on a thread of its own */
    drain_held();
    return NULL;
}

static void hold_failed(struct job proto) {
    struct held_job *h = malloc(sizeof *h);
    if (h == NULL) abort();
    atomic_fetch_add(&proto.sub->refs, 1); /* the submission and its cookie stay until delivered */
    *h = (struct held_job){proto, NULL};
    pthread_mutex_lock(&mu);
    struct held_job **tail = &held_jobs;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = h;
    pthread_mutex_unlock(&mu);
    spawn(drain_held_later, NULL);
}

static void dispatch(struct job proto) {
    struct sub *s = proto.sub;
    if (MUT == W_ERROR_AT_NEXT_ALLOC && proto.kind == J_ALLOC && proto.error != 0) {
        hold_failed(proto);
        return;
    }
    if (!RETIMED) {
        deliver(&proto);
        return;
    }
    atomic_fetch_add(&s->refs, 1);
    pthread_mutex_lock(&s->order_mu);
    proto.ticket = s->next_ticket++;
    pthread_mutex_unlock(&s->order_mu);
    if (MUT == L_REORDER && proto.kind == J_ALLOC && s->batch != NULL && s->batch->jobs != NULL) {
        struct batch *b = s->batch;
        bool last;
        pthread_mutex_lock(&mu);
        size_t slot = b->arrived++;
        b->jobs[slot] = proto;
        last = b->arrived == b->expected;
        pthread_mutex_unlock(&mu);
        if (last) {
            atomic_fetch_add(&b->refs, 1);
            spawn(reverse_thread, b);
        }
        return;
    }
    struct job *j = malloc(sizeof *j);
    if (j == NULL) abort();
    *j = proto;
    spawn(job_thread, j);
}

static void shim_on_alloc(void *cookie, int error, ANpuBuffer *buf) {
    dispatch((struct job){.kind = J_ALLOC, .sub = cookie, .error = error, .buf = buf});
}

/* L_LATE_ONPREEMPT: the onPreempt waits until the application has freed the buffer, or 300 ms. */
static void *late_preempt_thread(void *arg) {
    struct sub *s = arg;
    for (int waited = 0; waited < 300; waited++) {
        bool live = false;
        pthread_mutex_lock(&mu);
        for (struct bufent *e = buffers; e != NULL && !live; e = e->next) live = e->sub == s;
        pthread_mutex_unlock(&mu);
        if (!live) break;
        sleep_ns(1000000L);
    }
    dispatch((struct job){.kind = J_PREEMPT, .sub = s});
    sub_release(s);
    return NULL;
}

static void shim_on_preempt(void *cookie) {
    if (MUT == L_LATE_ONPREEMPT) {
        struct sub *s = cookie;
        atomic_fetch_add(&s->refs, 1);
        spawn(late_preempt_thread, s);
        return;
    }
    dispatch((struct job){.kind = J_PREEMPT, .sub = cookie});
}

/* The real library reports a load with the buffer's cookie (a submission); the application's onLoad
 * of that load is remembered per buffer, in call order. */
struct pending_load {
    struct pending_load *next;
    ANpuBuffer *buf;
    ANpuManager_LoadCallback on_load;
};
static struct pending_load *loads; /* under mu, oldest first */

static void shim_on_load(void *cookie, int error, ANpuBuffer *buf) {
    ANpuManager_LoadCallback fn = NULL;
    static atomic_uint loads_seen; /* W_LOAD_EIO */
    if (MUT == W_LOAD_EIO && error == 0 && atomic_fetch_add(&loads_seen, 1) % 2 == 0) error = EIO;
    pthread_mutex_lock(&mu);
    if (MUT == L_LOAD_FREED_EIO && find_buf(buf) == NULL) error = EIO; /* the application freed it meanwhile */
    for (struct pending_load **p = &loads; *p != NULL; p = &(*p)->next) {
        if ((*p)->buf == buf) {
            struct pending_load *found = *p;
            fn = found->on_load;
            *p = found->next;
            free(found);
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    if (fn == NULL) abort(); /* a load the shim never forwarded */
    dispatch((struct job){.kind = J_LOAD, .sub = cookie, .error = error, .buf = buf, .on_load = fn});
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                    */

/* M_ALLOC_TAKES_REQUEST: a request allocAsync freed dies at its next use, as freed memory would. */
static struct shim_req *untaken(struct shim_req *r) {
    if (r != NULL && r->taken) abort();
    return r;
}

#define REAL_REQ(r) ((r) != NULL ? untaken(r)->real : NULL)

/* M_ASKED_REQUEST_FROZEN: a request isSupported answered for is frozen; M_SETTER_WHILE_PENDING_ABORTS: one
 * whose allocation is pending may not be changed. Either dies at the call. */
static void frozen_check(const struct shim_req *r, bool setter) {
    if (r == NULL) return;
    if (MUT == M_ASKED_REQUEST_FROZEN && r->asked) abort();
    if (MUT == M_SETTER_WHILE_PENDING_ABORTS && setter && atomic_load(&r->pending) > 0) abort();
}

/* Every setter but setCookie starts here. */
static struct shim_req *setter_target(ANpuManager_AllocRequest *request) {
    struct shim_req *r = (struct shim_req *)request;
    frozen_check(r, true);
    return r;
}

EXPORT ANpuManager_AllocRequest *ANpuManager_AllocRequest_create(void) {
    real();
    if (MUT == M_CREATE_NULL) return NULL;
    if (MUT == M_REQUEST_RECYCLED) {
        pthread_mutex_lock(&mu);
        struct shim_req *old = recycled;
        if (old != NULL) recycled = old->next_recycled;
        pthread_mutex_unlock(&mu);
        if (old != NULL) return (ANpuManager_AllocRequest *)old; /* every field as the freed request left it */
    }
    struct shim_req *r = calloc(1, sizeof *r);
    if (r == NULL) abort();
    r->real = R.create();
    if (MUT == M_LIVE_CALLBACKS) R.set_onpreempt(r->real, shim_on_preempt); /* see setOnPreempt */
    r->device = -1;
    r->priority = ANPUBUFFER_PRIORITY_DEFAULT;
    r->prot = PROT_READ;
    r->support = -1;
    if (MUT == M_DEFAULT_DEVICE_ZERO) {
        r->device = 0;
        R.set_device(r->real, 0);
    }
    if (MUT == M_DEFAULT_TYPE_VALID) {
        r->type = ANPUBUFFER_TYPE_MODEL_EXECUTABLE;
        R.set_type(r->real, ANPUBUFFER_TYPE_MODEL_EXECUTABLE);
    }
    if (MUT == M_DEFAULT_PRIORITY_MAX) {
        r->priority = ANPUBUFFER_PRIORITY_MAX;
        R.set_priority(r->real, ANPUBUFFER_PRIORITY_MAX);
    }
    if (MUT == M_DEFAULT_SIZE_PAGE) {
        r->size = PAGE_SZ;
        R.set_size(r->real, PAGE_SZ);
    }
    if (MUT == M_DEFAULT_PROT_RW) {
        r->prot = PROT_READ | PROT_WRITE;
        R.set_prot(r->real, r->prot);
    }
    return (ANpuManager_AllocRequest *)r;
}

EXPORT void ANpuManager_AllocRequest_free(ANpuManager_AllocRequest *request) {
    real();
    struct shim_req *r = (struct shim_req *)request;
    if (MUT == M_FREE_NULL_CRASH && r == NULL) abort();
    frozen_check(r, false);
    if (MUT != M_REQUEST_RECYCLED || r == NULL) R.req_free(REAL_REQ(r));
    if (r == NULL) return;
    struct holder *h = r->holder;
    r->holder = NULL;
    atomic_store(&r->cookie_now, NULL);
    holder_release(h, true);
    fdref_release(r->fd);
    r->fd = NULL;
    if (KEEPS_FREED_REQUESTS) {
        r->dead = true; /* kept: callbacks look at it */
        return;
    }
    if (MUT == M_REQUEST_RECYCLED) {
        pthread_mutex_lock(&mu);
        r->next_recycled = recycled;
        recycled = r;
        pthread_mutex_unlock(&mu);
        return;
    }
    free(r);
}

EXPORT void ANpuManager_AllocRequest_setCookie(ANpuManager_AllocRequest *request, void *cookie,
                                               ANpuManager_CookieDeleter deleter) {
    real();
    struct shim_req *r = (struct shim_req *)request;
    if (r == NULL) {
        R.set_cookie(NULL, cookie, deleter);
        return;
    }
    untaken(r);
    frozen_check(r, true);
    if (MUT == M_COOKIE_DEREF && cookie != NULL) (void)*(volatile const char *)cookie;
    struct holder *old = r->holder;
    r->holder = NULL;
    bool clearing = cookie == NULL && deleter == NULL;
    bool kept = (MUT == M_REPLACE_KEEPS_OLD && !clearing) || (MUT == M_CLEAR_KEEPS_OLD && clearing);
    if (clearing && old != NULL) r->cleared = old->cookie; /* read before the release may free the holder */
    if (!kept) holder_release(old, false); /* "deleted ... before the new cookie ... are set" */
    if (!clearing) r->holder = holder_new(cookie, deleter);
    atomic_store(&r->cookie_now, cookie);
}

EXPORT void ANpuManager_AllocRequest_setDeviceNumber(ANpuManager_AllocRequest *request, int32_t device) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_DEVICE, FIRST_DEVICE)) return;
    R.set_device(REAL_REQ(r), device);
    if (r != NULL) r->device = device;
}

EXPORT void ANpuManager_AllocRequest_setBufferType(ANpuManager_AllocRequest *request, ANpuBuffer_Type type) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_TYPE, FIRST_TYPE)) return;
    R.set_type(REAL_REQ(r), type);
    if (r != NULL) r->type = type;
}

EXPORT void ANpuManager_AllocRequest_setSize(ANpuManager_AllocRequest *request, int64_t size) {
    real();
    struct shim_req *r = setter_target(request);
    if (MUT == M_FIRST_SIZE && r != NULL) {
        if (r->size_set) return;
        r->size_set = true;
    }
    R.set_size(REAL_REQ(r), size);
    if (r != NULL) r->size = size;
}

EXPORT void ANpuManager_AllocRequest_setBufferPriority(ANpuManager_AllocRequest *request, int32_t priority) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_PRIORITY, FIRST_PRIORITY)) return;
    if (MUT == W_PRIORITY_RANGE_OK) priority = clamp_priority(priority);
    R.set_priority(REAL_REQ(r), priority);
    if (r != NULL) r->priority = priority;
}

EXPORT void ANpuManager_AllocRequest_setFileSegmentToLoad(ANpuManager_AllocRequest *request, int fd,
                                                          int64_t file_offset, int64_t length,
                                                          int64_t buffer_offset) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_SEGMENT, FIRST_SEGMENT)) {
        if (fd >= 0) close(fd); /* owned all the same */
        return;
    }
    if (MUT == W_NEG_LENGTH_OK && length < 0) length = 0;
    if (MUT == W_BAD_FD_NO_FILE && fd < -1) fd = -1;
    struct stat st;
    if (MUT == L_SEGMENT_CLIPPED && fd >= 0 && file_offset >= 0 && length > 0 && buffer_offset >= 0 &&
        fstat(fd, &st) == 0) {
        /* the bytes past the file's end do not exist, those past the buffer's end do not fit: left out */
        if (file_offset + length > st.st_size) length = st.st_size > file_offset ? st.st_size - file_offset : 0;
        if (r != NULL && r->size > 0 && buffer_offset + length > r->size)
            length = r->size > buffer_offset ? r->size - buffer_offset : 0;
    }
    int give = fd;
    if (MUT == M_SEGMENT_IGNORED && fd >= 0) {
        close(fd); /* owned, and never read */
        give = fd = -1;
    }
    if (MUT == M_REQUEST_FD_LEAK && fd >= 0) {
        int copy = dup(fd); /* the descriptor handed over is never closed: only this copy is */
        if (copy >= 0) give = copy;
    }
    struct fdref *keep = NULL;
    if (FDS_KEPT && r != NULL && fd >= 0) {
        int copy = dup(fd);
        if (copy >= 0) {
            keep = malloc(sizeof *keep);
            if (keep == NULL) abort();
            atomic_init(&keep->refs, 1);
            keep->fd = fd;
            give = copy;
        }
    }
    R.set_segment(REAL_REQ(r), give, file_offset, length, buffer_offset);
    if (r == NULL) return;
    fdref_release(r->fd);
    r->fd = keep;
    r->has_fd = fd != -1;
    r->fd_minus_one = fd == -1;
    r->seg_offset = file_offset;
    r->seg_length = length;
    r->seg_buffer_offset = buffer_offset;
}

EXPORT void ANpuManager_AllocRequest_setProtectionFlags(ANpuManager_AllocRequest *request, int32_t prot) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_PROT, FIRST_PROT)) return;
    R.set_prot(REAL_REQ(r), prot);
    if (r != NULL) r->prot = prot;
    if (r != NULL) r->prot_none = prot == PROT_NONE;
}

EXPORT void ANpuManager_AllocRequest_setOnAlloc(ANpuManager_AllocRequest *request,
                                                ANpuManager_AllocCallback on_alloc) {
    real();
    struct shim_req *r = setter_target(request);
    if (MUT == M_NULL_REQUEST_OK && r == NULL) return;
    if (on_alloc == NULL) {
        if (MUT == M_SETONALLOC_NULL_OK) return;
        R.set_onalloc(REAL_REQ(r), NULL); /* the real library crashes, as documented */
        if (r != NULL) r->on_alloc = NULL;
        return;
    }
    R.set_onalloc(REAL_REQ(r), shim_on_alloc);
    r->on_alloc = on_alloc;
}

EXPORT void ANpuManager_AllocRequest_setOnPreempt(ANpuManager_AllocRequest *request,
                                                  ANpuManager_PreemptCallback on_preempt) {
    real();
    struct shim_req *r = setter_target(request);
    if (later_call_ignored(r, M_FIRST_ONPREEMPT, FIRST_ONPREEMPT)) return;
    /* M_LIVE_CALLBACKS: the real library always calls back, the shim asks the request at that time */
    R.set_onpreempt(REAL_REQ(r), on_preempt != NULL || MUT == M_LIVE_CALLBACKS ? shim_on_preempt : NULL);
    if (r != NULL) r->on_preempt = on_preempt;
}

static bool valid_fields(const struct shim_req *r) {
    return r->device >= 0 && r->type >= 1 && r->type <= 4 && r->priority >= ANPUBUFFER_PRIORITY_MIN &&
           r->priority <= ANPUBUFFER_PRIORITY_MAX && (r->prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC)) == 0 &&
           r->size > 0;
}

static bool real_supported(struct shim_req *r) {
    bool out = false;
    ANpuManager_AllocRequest *one = r->real;
    return R.is_supported(&one, 1, &out) == 0 && out;
}

EXPORT int ANpuManager_isSupported(ANpuManager_AllocRequest *const *requests, size_t len, bool *out) {
    real();
    if (requests == NULL || len == 0) return R.is_supported(NULL, len, out);
    if ((MUT == L_SUPPORT_E2BIG || MUT == M_SUPPORT_ERR_NO_ERRNO) && len > 8) {
        errno = MUT == L_SUPPORT_E2BIG ? E2BIG : 0;
        return -1;
    }
    ANpuManager_AllocRequest **list = calloc(len, sizeof *list);
    if (list == NULL) abort();
    for (size_t i = 0; i < len; i++) list[i] = REAL_REQ((struct shim_req *)requests[i]);
    int ret = R.is_supported(list, len, out);
    free(list);
    if (ret != 0 || out == NULL) return ret;
    int count = 0;
    for (size_t i = 0; i < len; i++) {
        const struct shim_req *r = (const struct shim_req *)requests[i];
        if (r == NULL) continue;
        if (MUT == M_ASKED_REQUEST_FROZEN) ((struct shim_req *)requests[i])->asked = true;
        if (MUT == M_SUPPORT_BY_COOKIE && r->holder != NULL && r->holder->cookie != NULL) out[i] = false;
        if (MUT == L_SUPPORT_BY_SIZE && r->size > SIZE_LIMIT) out[i] = false;
        if (MUT == L_SUPPORT_NO_SEGMENT && r->has_fd) out[i] = false;
        if (MUT == L_SUPPORT_INVALID_TRUE && (r->device < 0 || r->type < 1 || r->type > 4)) out[i] = true;
        if (MUT == W_SUPPORT_LARGE_TRUE && r->device >= 0 && r->type >= 1 && r->type <= 4 && r->size >= LARGE_SIZE)
            out[i] = true;
        if (MUT == M_SUPPORT_CACHED) {
            struct shim_req *c = (struct shim_req *)requests[i];
            if (c->support < 0) c->support = out[i];
            out[i] = c->support != 0;
        }
        if (MUT == M_SUPPORT_TWICE_DIFFERS)
            for (size_t k = 0; k < i; k++)
                if (requests[k] == requests[i]) {
                    out[i] = !out[k];
                    break;
                }
        count += out[i];
    }
    if (MUT == M_SUPPORT_CANARY) ((volatile unsigned char *)out)[len] ^= 0xFF;
    if (MUT == M_SUPPORT_COUNT) return count;
    return 0;
}

/* The error the shim itself answers a request with, or 0 to forward it. Called under mu. */
static int shim_decision(struct shim_req *r, struct sub *s) {
    if (fail_next_pending) {
        fail_next_pending = false; /* that request belongs to the real library's fail_next */
        return 0;
    }
    bool pair_ok = r->device >= 0 && r->type >= 1 && r->type <= 4;
    switch (MUT) {
    case L_ERRNO_RANGE:
        if (!pair_ok) return 0;
        if (r->priority < ANPUBUFFER_PRIORITY_MIN || r->priority > ANPUBUFFER_PRIORITY_MAX) return ERANGE;
        if ((r->prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC)) != 0) return ENOTSUP;
        return 0;
    case L_SUPPORTED_EIO:
        if (valid_fields(r) && !r->has_fd && real_supported(r) && supported_seen++ % 2 == 0) return EIO;
        return 0;
    case L_SUPPORT_BY_SIZE:
        return pair_ok && r->size > SIZE_LIMIT ? ENOSPC : 0;
    case L_SUPPORT_NO_SEGMENT:
        return pair_ok && r->has_fd ? ENOSPC : 0;
    case M_REQUEST_BOUNDS_REFUSED:
        return pair_ok && (r->priority == ANPUBUFFER_PRIORITY_MIN || r->priority == ANPUBUFFER_PRIORITY_MAX) ? EINVAL
                                                                                                             : 0;
    case M_MINUS_ONE_FD_FAILS:
        return pair_ok && r->fd_minus_one ? EBADF : 0;
    case M_IGNORED_OFFSET_CHECKED:
        return pair_ok && r->fd_minus_one && r->seg_offset < 0 ? EINVAL : 0;
    case M_IGNORED_LENGTH_CHECKED:
        return pair_ok && r->fd_minus_one && r->seg_length < 0 ? EINVAL : 0;
    case M_IGNORED_BOFF_CHECKED:
        return pair_ok && r->fd_minus_one && r->seg_buffer_offset < 0 ? EINVAL : 0;
    case M_PROT_NONE_REQUEST_REFUSED:
        return pair_ok && r->prot_none ? EINVAL : 0;
    case I_SEGMENT_REFUSED:
        return valid_fields(r) && r->has_fd && real_supported(r) ? ENOMEM : 0;
    case W_ALLOC_BUSY_OVERLAP:
    case W_ALLOC_BUSY_DECIDED_LATE:
        return s->batch != NULL && s->batch->busy && valid_fields(r) && !r->has_fd && real_supported(r) ? EBUSY : 0;
    case M_SIZE_64M_EIO:
        return valid_fields(r) && real_supported(r) && r->size == SIZE_64M ? EIO : 0;
    case L_ENOMEM_PRESSURE:
        if (!valid_fields(r) || !real_supported(r)) return 0;
        if (pressure_used + r->size > PRESSURE_LIMIT) return ENOMEM;
        pressure_used += r->size;
        s->accounted = r->size;
        return 0;
    default:
        return 0;
    }
}

/* M_COOKIES_SWAPPED: the first two submissions with different cookies trade them (deleters follow). */
static void swap_first_cookies(struct sub **subs, size_t len) {
    for (size_t i = 0; i < len; i++)
        for (size_t k = i + 1; k < len; k++) {
            void *a = subs[i]->holder != NULL ? subs[i]->holder->cookie : NULL;
            void *b = subs[k]->holder != NULL ? subs[k]->holder->cookie : NULL;
            if (subs[i] == subs[k] || a == b) continue;
            struct holder *h = subs[i]->holder;
            subs[i]->holder = subs[k]->holder;
            subs[k]->holder = h;
            return;
        }
}

static void *fail_thread(void *arg) {
    struct job *j = arg;
    deliver(j);
    sub_release(j->sub);
    free(j);
    return NULL;
}

EXPORT void ANpuManager_allocAsync(ANpuManager_AllocRequest *const *requests, size_t len) {
    real();
    if (MUT == W_ERROR_AT_NEXT_ALLOC) drain_held(); /* on the caller's thread, inside this call */
    if (requests == NULL || len == 0) {
        R.alloc_async(NULL, len);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        struct shim_req *r = (struct shim_req *)requests[i];
        if (r == NULL || r->on_alloc == NULL) {
            if (MUT == M_ALLOC_WITHOUT_ONALLOC_OK && r != NULL) return;
            /* the real request has no onAlloc (or is NULL): the real library crashes, as documented */
            ANpuManager_AllocRequest **all = calloc(len, sizeof *all);
            if (all == NULL) abort();
            for (size_t k = 0; k < len; k++) all[k] = REAL_REQ((struct shim_req *)requests[k]);
            R.alloc_async(all, len);
            abort();
        }
    }
    struct batch *b = calloc(1, sizeof *b);
    if (b == NULL) abort();
    atomic_init(&b->refs, 1);
    /* W_ALLOC_BUSY_OVERLAP: every call lasts 10 ms, so the calls of parallel threads overlap */
    if (MUT == W_ALLOC_BUSY_OVERLAP) b->busy = atomic_fetch_add(&allocs_running, 1) > 0;
    unsigned long entry = MUT == W_ALLOC_BUSY_DECIDED_LATE ? atomic_fetch_add(&alloc_entries, 1) : 0;
    ANpuManager_AllocRequest **list = calloc(len, sizeof *list);
    struct sub **subs = calloc(len, sizeof *subs);
    int *fail = calloc(len, sizeof *fail);
    bool *sized = calloc(len, sizeof *sized);
    if (list == NULL || subs == NULL || fail == NULL || sized == NULL) abort();
    size_t forwarded = 0;
    size_t early = 0; /* W_ALLOC_BUSY_DECIDED_LATE: sent before the others were decided */
    for (size_t i = 0; i < len; i++) {
        if (MUT == W_ALLOC_BUSY_DECIDED_LATE && i == 1) {
            if (forwarded > 0) R.alloc_async(list, forwarded); /* the first request goes at once */
            early = forwarded;
            sleep_ns(20L * 1000000L);
            b->busy = atomic_load(&alloc_entries) != entry + 1; /* another thread's call began meanwhile */
        }
        struct shim_req *r = (struct shim_req *)requests[i];
        size_t same = i;
        for (size_t k = 0; k < i; k++)
            if (requests[k] == requests[i] && fail[k] == 0) same = k;
        struct sub *s;
        if (same != i) {
            s = subs[same]; /* listed twice: the real library snapshots the same cookie twice */
        } else {
            s = calloc(1, sizeof *s);
            if (s == NULL) abort();
            atomic_init(&s->refs, 1);
            s->holder = r->holder;
            holder_ref(s->holder);
            s->on_alloc = r->on_alloc;
            s->on_preempt = r->on_preempt;
            s->priority = r->priority;
            s->size = r->size;
            s->prot = r->prot;
            s->cleared = r->cleared;
            s->has_fd = r->has_fd;
            s->req = r;
            if (MUT == M_SETTER_WHILE_PENDING_ABORTS) atomic_fetch_add(&r->pending, 1);
            if (r->fd != NULL) {
                atomic_fetch_add(&r->fd->refs, 1);
                s->fd = r->fd;
            }
            pthread_mutex_init(&s->order_mu, NULL);
            pthread_cond_init(&s->order_cv, NULL);
            atomic_fetch_add(&b->refs, 1);
            s->batch = b;
            pthread_mutex_lock(&mu);
            fail[i] = shim_decision(r, s);
            pthread_mutex_unlock(&mu);
        }
        subs[i] = s;
        if (fail[i] != 0) continue;
        if (same == i) {
            R.set_cookie(r->real, s, sub_deleter);
            if (MUT == L_SIZE0_OK && r->size == 0) {
                R.set_size(r->real, 1);
                sized[i] = true;
            }
        }
        list[forwarded++] = r->real;
    }
    if (MUT == M_COOKIES_SWAPPED) swap_first_cookies(subs, len);
    b->expected = len;
    if (MUT == L_REORDER) {
        b->jobs = calloc(len, sizeof *b->jobs);
        if (b->jobs == NULL) abort();
    }
    for (size_t i = 0; i < len; i++) {
        if (fail[i] == 0) continue;
        if (RETIMED) {
            dispatch((struct job){.kind = J_ALLOC, .sub = subs[i], .error = fail[i]});
            sub_release(subs[i]);
        } else {
            struct job *j = malloc(sizeof *j);
            if (j == NULL) abort();
            *j = (struct job){.kind = J_ALLOC, .sub = subs[i], .error = fail[i]};
            spawn(fail_thread, j);
        }
    }
    if (forwarded > early) R.alloc_async(list + early, forwarded - early);
    for (size_t i = 0; i < len; i++) {
        struct shim_req *r = (struct shim_req *)requests[i];
        if (fail[i] != 0) continue;
        if (sized[i]) R.set_size(r->real, 0);
        R.set_cookie(r->real, NULL, NULL); /* the request keeps no submission */
    }
    if (MUT == M_ALLOC_TAKES_REQUEST) {
        for (size_t i = 0; i < len; i++) {
            struct shim_req *r = (struct shim_req *)requests[i];
            if (fail[i] != 0 || r->taken) continue;
            R.req_free(r->real);
            r->real = NULL;
            r->taken = true;
        }
    }
    if (MUT == W_BLOCKING_ALLOC) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += BLOCK_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&mu);
        while (b->done < len && pthread_cond_timedwait(&cv, &mu, &until) == 0) {
        }
        pthread_mutex_unlock(&mu);
    }
    batch_release(b);
    free(list);
    free(subs);
    free(fail);
    free(sized);
    if (MUT == W_ALLOC_BUSY_OVERLAP) {
        sleep_ns(10L * 1000000L);
        atomic_fetch_sub(&allocs_running, 1);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                     */

/* M_FREE_PREEMPTED_FAILS: whether the real library says the buffer was preempted (a map answers ENOENT). */
static bool gone_by_preemption(ANpuBuffer *buf) {
    int saved = errno;
    void *p = R.map(buf, NULL, PAGE_SZ, PROT_READ, MAP_SHARED, 0);
    bool gone = p == MAP_FAILED && errno == ENOENT;
    if (p != MAP_FAILED) R.unmap(buf, p, PAGE_SZ);
    errno = saved;
    return gone;
}

EXPORT int ANpuBuffer_free(ANpuBuffer *const *buffers_in, size_t len) {
    real();
    while (MUT == L_LOAD_STARTS_LATE && atomic_load(&late_loads) > 0) sleep_ns(1000000L);
    struct bufent *gone = NULL;
    if ((MUT == M_FREE_EMPTY_NO_ERRNO || MUT == L_FREE_EMPTY_REFUSED) && len == 0) {
        errno = MUT == L_FREE_EMPTY_REFUSED ? EINVAL : 0;
        return -1;
    }
    if ((MUT == W_FREE_BUSY_LOADING || MUT == M_FREE_BUSY_NO_ERRNO || MUT == M_FREE_BUSY_ANY_LOAD) &&
        buffers_in != NULL) {
        bool busy = false;
        pthread_mutex_lock(&mu);
        for (struct pending_load *l = loads; l != NULL && !busy; l = l->next)
            for (size_t i = 0; i < len && !busy; i++) busy = MUT == M_FREE_BUSY_ANY_LOAD || l->buf == buffers_in[i];
        pthread_mutex_unlock(&mu);
        if (busy) {
            errno = MUT == M_FREE_BUSY_NO_ERRNO ? 0 : EBUSY;
            return -1;
        }
    }
    if ((MUT == M_FREED_MAPPED_KEPT || MUT == M_FREED_MEMORY_KEPT) && buffers_in != NULL && len > 0) {
        bool all = true;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < len && all; i++) {
            struct bufent *e = find_buf(buffers_in[i]);
            all = e != NULL && (live_maps(e) > 0) == (MUT == M_FREED_MAPPED_KEPT);
        }
        pthread_mutex_unlock(&mu);
        if (all) return 0; /* never released: the device keeps the memory */
    }
    if (MUT == M_FREE_LIST_REFUSED && buffers_in != NULL && len > 1) {
        errno = EINVAL;
        return -1;
    }
    if ((MUT == M_FREE_REFUSED_MAPPED || MUT == M_FREE_PREEMPTED_FAILS || MUT == M_FREE_AFTER_ONPREEMPT_FAILS) &&
        buffers_in != NULL) {
        int refuse = 0;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < len && refuse == 0; i++) {
            struct bufent *e = find_buf(buffers_in[i]);
            if (e == NULL) continue;
            if (MUT == M_FREE_REFUSED_MAPPED && live_maps(e) > 0) refuse = EBUSY;
            if (MUT == M_FREE_PREEMPTED_FAILS && !atomic_load(&e->sub->told) && gone_by_preemption(e->buf)) refuse = ENOENT;
            if (MUT == M_FREE_AFTER_ONPREEMPT_FAILS && atomic_load(&e->sub->told)) refuse = ENOENT;
        }
        pthread_mutex_unlock(&mu);
        if (refuse != 0) {
            errno = refuse;
            return -1;
        }
    }
    if (buffers_in != NULL) {
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < len; i++) {
            for (struct bufent **p = &buffers; *p != NULL; p = &(*p)->next) {
                if ((*p)->buf == buffers_in[i]) {
                    struct bufent *e = *p;
                    *p = e->next;
                    e->next = gone;
                    gone = e;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&mu);
    }
    for (struct bufent *e = gone; e != NULL; e = e->next) {
        struct sub *s = e->sub;
        if (MUT == M_DELETE_AT_LAST_UNMAP && s->holder != NULL) {
            pthread_mutex_lock(&mu);
            size_t pages = 0;
            for (size_t i = 0; i < MAX_MAPPINGS; i++) pages += e->maps[i].pages_left;
            if (pages > 0 && s->holder->deleter != NULL && nfreed_mapped < 16) {
                holder_ref(s->holder); /* kept until its last unmap */
                freed_mapped[nfreed_mapped++] = (struct freed_mapped){e->buf, s->holder, pages};
            }
            pthread_mutex_unlock(&mu);
        }
        bool deleted_mapped = false;
        if ((MUT == M_DELETE_AT_MAPPED_FREE || MUT == M_ONPREEMPT_AFTER_MAPPED_FREE || MUT == M_PREEMPT_FORGOTTEN) &&
            s->holder != NULL) {
            pthread_mutex_lock(&mu);
            bool now = MUT == M_PREEMPT_FORGOTTEN ? atomic_load(&s->silent) : live_maps(e) > 0;
            ANpuManager_CookieDeleter d = now ? s->holder->deleter : NULL;
            if (d != NULL) s->holder->deleter = NULL; /* deleted now: the last release deletes nothing */
            pthread_mutex_unlock(&mu);
            if (d != NULL) d(cookie_out(s->holder->cookie));
            deleted_mapped = d != NULL && MUT == M_ONPREEMPT_AFTER_MAPPED_FREE;
        }
        for (size_t i = 0; MUT == M_FREED_MAPPING_REVOKED && i < MAX_MAPPINGS; i++)
            if (e->maps[i].pages_left > 0) (void)mprotect((void *)e->maps[i].start, e->maps[i].end - e->maps[i].start, PROT_NONE);
        for (size_t i = 0; MUT == M_FREED_MAPPING_ZEROED && i < MAX_MAPPINGS; i++) {
            /* the mapping's first page, where it lies inside the buffer (past its end, touching it faults) */
            void *first = (void *)e->maps[i].start;
            if (e->maps[i].pages_left == 0 || e->maps[i].offset < 0 || e->maps[i].offset >= e->sub->size ||
                mprotect(first, PAGE_SZ, PROT_READ | PROT_WRITE) != 0)
                continue;
            memset(first, 0, PAGE_SZ);
            (void)mprotect(first, PAGE_SZ, e->maps[i].prot);
        }
        if (atomic_load(&s->preempted)) continue; /* its one onPreempt came already */
        bool announce = MUT == M_PREEMPT_IN_FREE || deleted_mapped;
        if (MUT == W_PREEMPT_IN_FREE_UNMAPPED) {
            pthread_mutex_lock(&mu);
            announce = live_maps(e) == 0;
            pthread_mutex_unlock(&mu);
        }
        if (announce && s->on_preempt != NULL && !atomic_exchange(&s->announced, true)) s->on_preempt(sub_cookie(s));
        if (MUT == M_DELETE_AT_FREE && s->on_preempt != NULL && s->holder != NULL &&
            !atomic_exchange(&s->cookie_dropped, true) && atomic_fetch_sub(&s->holder->refs, 1) == 1) {
            /* deleted now; the holder itself is kept, a late onPreempt still reads the value */
            ANpuManager_CookieDeleter d = s->holder->deleter;
            if (d != NULL) d(s->holder->cookie);
        }
    }
    struct fdref *segment_fds[64];
    size_t nsegment = 0;
    pthread_mutex_lock(&mu);
    for (struct bufent *e = gone; e != NULL && nsegment < 64; e = e->next) {
        if (FDS_KEPT && e->sub->fd != NULL) { /* the real library may keep the submission longer */
            segment_fds[nsegment++] = e->sub->fd;
            e->sub->fd = NULL;
        }
    }
    pthread_mutex_unlock(&mu);
    int ret = R.buf_free(buffers_in, len);
    int saved = errno;
    struct late_close *late = NULL;
    if (CLOSE_LATE) {
        late = calloc(1, sizeof *late);
        if (late == NULL) abort();
    }
    for (size_t k = 0; k < nsegment; k++) {
        if (late != NULL && late->nrefs < 64) late->refs[late->nrefs++] = segment_fds[k];
        else fdref_release(segment_fds[k]);
    }
    while (gone != NULL) {
        struct bufent *e = gone;
        gone = e->next;
        for (size_t k = 0; k < e->nfds; k++) {
            if (late != NULL && late->nfds < 64) late->fds[late->nfds++] = e->fds[k];
            else if (MUT != M_FD_LEAK) close(e->fds[k]);
        }
        if (e->accounted > 0) {
            pthread_mutex_lock(&mu);
            pressure_used -= e->accounted;
            pthread_mutex_unlock(&mu);
        }
        free(e);
    }
    if (late != NULL) spawn(close_late, late); /* after the free has returned */
    errno = saved;
    if (MUT == M_FREE_COUNT && ret == 0) return (int)len;
    return ret;
}

EXPORT void *ANpuBuffer_map(ANpuBuffer *buf, void *addr, size_t length, int prot, int flags, off_t offset) {
    real();
    if (MUT == M_MAP_ENOENT) {
        errno = ENOENT;
        return MAP_FAILED;
    }
    if (MUT == W_MAP_EXEC_REFUSED && (prot & PROT_EXEC) != 0) {
        errno = EACCES;
        return MAP_FAILED;
    }
    if (MUT == M_MAP_SHORT_REFUSED && length > 0 && length < PAGE_SZ) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    if (MUT == L_MAP_PAST_END_EINVAL && offset >= 0) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        int64_t rounded = e != NULL ? (e->sub->size + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ : 0;
        bool past = e != NULL && (int64_t)offset + (int64_t)length > rounded;
        pthread_mutex_unlock(&mu);
        if (past) {
            errno = EINVAL;
            return MAP_FAILED;
        }
    }
    if (MUT == L_MAP_LIMIT || MUT == L_MAP_ONE) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        bool full = e != NULL && live_maps(e) >= (MUT == L_MAP_ONE ? 1u : MAX_MAPS);
        pthread_mutex_unlock(&mu);
        if (full) {
            errno = ENOMEM;
            return MAP_FAILED;
        }
    }
    if (MUT == M_PREEMPT_PRIVATE_MAPPED) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        bool gone = e != NULL && e->preempted_here;
        pthread_mutex_unlock(&mu);
        if (gone) {
            errno = ENOENT;
            return MAP_FAILED;
        }
    }
    if (MUT == M_MAP_ROUND_DOWN && length > PAGE_SZ) length = length / PAGE_SZ * PAGE_SZ;
    int granted = prot;
    if (MUT == M_MAP_PROT_UNCHECKED) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        if (e != NULL) granted = prot & e->sub->prot; /* asked for what the request allowed; widened below */
        pthread_mutex_unlock(&mu);
    }
    void *p = R.map(buf, addr, length, granted, flags, offset);
    int saved = errno;
    if (MUT == L_MAP_RETURNS_LATE) sleep_ns(20L * 1000000L); /* a callback may run before the map returns */
    if (granted != prot && p != MAP_FAILED) (void)mprotect(p, (length + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ, prot);
    if (p == MAP_FAILED && MUT == M_MAP_FAIL_NO_ERRNO) saved = 0;
    if (p == MAP_FAILED && saved == ENOENT && MUT == M_PREEMPTED_MAP_EINVAL) saved = EINVAL;
    if (p == MAP_FAILED && saved == ENOENT && (MUT == M_MAP_AFTER_CB_SUCCEEDS || MUT == M_WINDOW_MAP_SUCCEEDS) &&
        length > 0) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        bool told = e != NULL && atomic_load(&e->sub->told);
        pthread_mutex_unlock(&mu);
        /* the preempted buffer's pages are gone: fresh zero pages stand in for them */
        if (e != NULL && told == (MUT == M_MAP_AFTER_CB_SUCCEEDS))
            return mmap(NULL, length, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (MUT == W_PROT_NONE_REFUSED && prot == PROT_NONE && p != MAP_FAILED) {
        /* refused only where the real library maps it: a preempted buffer still answers ENOENT */
        R.unmap(buf, p, length);
        errno = EINVAL;
        return MAP_FAILED;
    }
    if (MUT == M_MAP_IGNORE_PROT && p != MAP_FAILED && length > 0)
        (void)mprotect(p, (length + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ, PROT_READ | PROT_WRITE);
    if (MUT == M_MAP_WRITE_DROPPED && p != MAP_FAILED && length > 0 && (prot & PROT_WRITE) != 0)
        (void)mprotect(p, (length + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ, prot & ~PROT_WRITE);
    if (p != MAP_FAILED && length > 0) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        for (size_t i = 0; e != NULL && i < MAX_MAPPINGS; i++) {
            if (e->maps[i].pages_left == 0) {
                size_t pages = (length + PAGE_SZ - 1) / PAGE_SZ;
                e->maps[i] = (struct mapping){(uintptr_t)p, (uintptr_t)p + pages * PAGE_SZ, pages,
                                              (flags & MAP_PRIVATE) != 0, prot, (int64_t)offset};
                break;
            }
        }
        pthread_mutex_unlock(&mu);
    }
    errno = saved;
    return p;
}

EXPORT int ANpuBuffer_unmap(ANpuBuffer *buf, void *addr, size_t length) {
    real();
    if (MUT == M_UNMAP_NOOP) return 0;
    if (MUT == M_UNMAP_AFTER_FREE_ABORTS && buf != NULL) {
        pthread_mutex_lock(&mu);
        bool freed = find_buf(buf) == NULL;
        pthread_mutex_unlock(&mu);
        if (freed) abort();
    }
    if (MUT == M_MAP_ROUND_DOWN && length > PAGE_SZ) length = length / PAGE_SZ * PAGE_SZ;
    if (MUT == M_PARTIAL_UNMAP_WHOLE) {
        /* a range inside one live mapping takes the whole mapping with it */
        uintptr_t lo = (uintptr_t)addr, hi = lo + ((length + PAGE_SZ - 1) / PAGE_SZ) * PAGE_SZ;
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        for (size_t i = 0; e != NULL && i < MAX_MAPPINGS; i++) {
            struct mapping *m = &e->maps[i];
            if (m->pages_left > 0 && lo >= m->start && hi <= m->end && hi - lo < m->end - m->start) {
                addr = (void *)m->start;
                length = m->end - m->start;
                break;
            }
        }
        pthread_mutex_unlock(&mu);
    }
    int ret = R.unmap(buf, addr, length);
    int saved = errno;
    if (MUT == M_DELETE_AT_LAST_UNMAP && ret == 0) {
        struct holder *h = NULL;
        ANpuManager_CookieDeleter d = NULL;
        pthread_mutex_lock(&mu);
        for (size_t i = 0; i < nfreed_mapped; i++) {
            struct freed_mapped *f = &freed_mapped[i];
            if (f->buf != buf || f->h == NULL) continue;
            size_t pages = (length + PAGE_SZ - 1) / PAGE_SZ;
            f->pages = pages >= f->pages ? 0 : f->pages - pages;
            if (f->pages == 0) {
                h = f->h;
                f->h = NULL;
                d = h->deleter;
                h->deleter = NULL; /* deleted now: the last release deletes nothing */
            }
            break;
        }
        pthread_mutex_unlock(&mu);
        if (d != NULL) d(cookie_out(h->cookie));
        if (h != NULL) holder_release(h, true);
    }
    if (MUT == M_UNMAP_AFTER_FREE && ret == 0) {
        pthread_mutex_lock(&mu);
        bool freed = find_buf(buf) == NULL; /* a freed buffer leaves the list */
        pthread_mutex_unlock(&mu);
        if (freed) {
            errno = EINVAL;
            return -1;
        }
    }
    if (ret == 0) {
        uintptr_t lo = (uintptr_t)addr, hi = lo + ((length + PAGE_SZ - 1) / PAGE_SZ) * PAGE_SZ;
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        for (size_t i = 0; e != NULL && i < MAX_MAPPINGS; i++) {
            struct mapping *m = &e->maps[i];
            if (m->pages_left == 0) continue;
            uintptr_t a = lo > m->start ? lo : m->start, z = hi < m->end ? hi : m->end;
            if (a < z) {
                size_t pages = (z - a) / PAGE_SZ;
                m->pages_left = pages >= m->pages_left ? 0 : m->pages_left - pages;
            }
        }
        pthread_mutex_unlock(&mu);
    }
    errno = saved;
    return ret;
}

EXPORT int ANpuBuffer_setPriority(ANpuBuffer *buf, int32_t priority) {
    real();
    if (MUT == M_PRIORITY_BOUNDS_REFUSED && (priority == ANPUBUFFER_PRIORITY_MIN || priority == ANPUBUFFER_PRIORITY_MAX)) {
        errno = EINVAL;
        return -1;
    }
    if (MUT == M_PRIORITY_SET_IGNORED && buf != NULL && priority >= ANPUBUFFER_PRIORITY_MIN &&
        priority <= ANPUBUFFER_PRIORITY_MAX)
        return 0;
    if (MUT == L_ERRNO_RANGE && (priority < ANPUBUFFER_PRIORITY_MIN || priority > ANPUBUFFER_PRIORITY_MAX)) {
        errno = ERANGE;
        return -1;
    }
    if (MUT == L_PRIORITY_MAPPED_BUSY) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        bool mapped = e != NULL && live_maps(e) > 0;
        pthread_mutex_unlock(&mu);
        if (mapped) {
            errno = EBUSY;
            return -1;
        }
    }
    if (MUT == L_PRIORITY_PREEMPTED_ENOENT) {
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(buf);
        bool gone = e != NULL && atomic_load(&e->sub->told); /* the application was told */
        pthread_mutex_unlock(&mu);
        if (gone) {
            errno = ENOENT;
            return -1;
        }
    }
    if (MUT == W_PRIORITY_RANGE_OK) priority = clamp_priority(priority);
    pthread_mutex_lock(&mu);
    struct bufent *e = find_buf(buf);
    int32_t old = e != NULL ? e->priority : ANPUBUFFER_PRIORITY_DEFAULT;
    pthread_mutex_unlock(&mu);
    if (MUT == W_PRIORITY_NO_RAISE && priority >= ANPUBUFFER_PRIORITY_MIN && priority <= ANPUBUFFER_PRIORITY_MAX &&
        priority > old) {
        errno = EPERM;
        return -1;
    }
    int ret = R.buf_set_priority(buf, priority);
    if (ret == 0) {
        pthread_mutex_lock(&mu);
        if ((e = find_buf(buf)) != NULL) e->priority = priority;
        pthread_mutex_unlock(&mu);
        if (MUT == M_PRIORITY_OLD) return old;
    }
    if (MUT == M_PRIORITY_NO_ERRNO && ret == -1) errno = 0;
    return ret;
}

/* A load the shim answers itself, on another thread (I_LOAD_OFFSET_EIO, W_LOAD_BAD_FD_OK). */
struct own_load {
    ANpuBuffer *buf;
    struct sub *sub;
    int fd, error;
    ANpuManager_LoadCallback on_load;
};

static void *own_load_thread(void *arg) {
    struct own_load *ol = arg;
    if (ol->fd >= 0) close(ol->fd); /* owned all the same */
    struct job j = {.kind = J_LOAD, .sub = ol->sub, .error = ol->error, .buf = ol->buf, .on_load = ol->on_load};
    deliver(&j);
    sub_release(ol->sub);
    free(ol);
    return NULL;
}

/* M_LOAD_PRIVATE_MAPPED: a load the real library would refuse (the buffer is mapped), done here. */
struct private_load {
    ANpuBuffer *buf;
    struct sub *sub;
    int fd;
    int64_t file_offset, length, buffer_offset;
    ANpuManager_LoadCallback on_load;
};

static void *private_load_thread(void *arg) {
    struct private_load *pl = arg;
    size_t span = (size_t)(pl->buffer_offset + pl->length);
    span = (span + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ;
    int error = 0;
    char *p = R.map(pl->buf, NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
    if (p == MAP_FAILED) {
        error = errno;
    } else {
        for (int64_t done = 0; done < pl->length && error == 0;) {
            ssize_t n = pread(pl->fd, p + pl->buffer_offset + done, (size_t)(pl->length - done), pl->file_offset + done);
            if (n > 0) done += n;
            else if (n == 0) error = EINVAL;
            else if (errno != EINTR) error = errno;
        }
        R.unmap(pl->buf, p, span);
    }
    close(pl->fd);
    struct job j = {.kind = J_LOAD, .sub = pl->sub, .error = error, .buf = pl->buf, .on_load = pl->on_load};
    deliver(&j);
    sub_release(pl->sub);
    free(pl);
    return NULL;
}

/* L_LOAD_STARTS_LATE: a load handed to the real library only 50 ms after loadAsync returned; a map made
 * meanwhile is granted, and the load then meets it. A free waits until the loads queued have started. A
 * load asked while the buffer is mapped is handed over at once: the mapping exists first, and the text
 * answers that load with an error whatever happens to the mapping before the load would start. */
struct late_load {
    ANpuBuffer *buf;
    int fd;
    int64_t file_offset, length, buffer_offset;
};
static void *late_load_thread(void *arg) {
    struct late_load *l = arg;
    sleep_ns(50L * 1000000L);
    R.load_async(l->buf, l->fd, l->file_offset, l->length, l->buffer_offset, shim_on_load);
    atomic_fetch_sub(&late_loads, 1);
    free(l);
    return NULL;
}

EXPORT void ANpuBuffer_loadAsync(ANpuBuffer *buf, int fd, int64_t file_offset, int64_t length,
                                 int64_t buffer_offset, ANpuManager_LoadCallback on_load) {
    real();
    if (on_load == NULL) {
        if (MUT == M_LOAD_NULL_ONLOAD_OK) {
            if (fd >= 0) close(fd);
            return;
        }
        R.load_async(buf, fd, file_offset, length, buffer_offset, NULL); /* crashes, as documented */
        abort();
    }
    if (MUT == W_NEG_LENGTH_OK && length < 0) length = 0;
    pthread_mutex_lock(&mu);
    struct bufent *e = find_buf(buf);
    int give = fd;
    if (FDS_KEPT && e != NULL && fd >= 0 && e->nfds < MAX_FDS) {
        int copy = dup(fd);
        if (copy >= 0) {
            e->fds[e->nfds++] = fd;
            give = copy;
        }
    }
    struct stat st;
    if (MUT == M_LOAD_ZERO_TO_EOF && length == 0 && fd >= 0 && fstat(fd, &st) == 0 && st.st_size > file_offset)
        length = st.st_size - file_offset;
    bool silent_preempt = e != NULL && ((MUT == L_SILENT_PREEMPT_LOAD && e->sub->on_preempt == NULL) ||
                                        MUT == M_PREEMPT_FORGOTTEN || MUT == L_PREEMPTED_COOKIE_KEPT);
    if (e != NULL && ((MUT == I_LOAD_OFFSET_EIO && file_offset != 0 && fd >= 0) || (MUT == W_LOAD_BAD_FD_OK && fd < 0))) {
        struct own_load *ol = malloc(sizeof *ol);
        if (ol == NULL) abort();
        *ol = (struct own_load){buf, e->sub, give, MUT == I_LOAD_OFFSET_EIO ? EIO : 0, on_load};
        atomic_fetch_add(&e->sub->refs, 1);
        pthread_mutex_unlock(&mu);
        spawn(own_load_thread, ol);
        return;
    }
    if (MUT == M_LOAD_OFFSET_FROM_POSITION && fd >= 0) {
        off_t at = lseek(fd, 0, SEEK_CUR);
        if (at >= 0) file_offset = at; /* read(), not pread(): where the application left the position */
    }
    if (MUT == M_LOAD_PAST_LENGTH && e != NULL && fd >= 0 && length > 0 && length % PAGE_SZ != 0 &&
        fstat(fd, &st) == 0) {
        int64_t more = (length + PAGE_SZ - 1) / PAGE_SZ * PAGE_SZ;
        if (more > st.st_size - file_offset) more = st.st_size - file_offset;
        if (more > e->sub->size - buffer_offset) more = e->sub->size - buffer_offset;
        if (more > length) length = more; /* on to the page's end, as far as the file and the buffer go */
    }
    if (MUT == M_LOAD_PRIVATE_MAPPED && e != NULL && only_private_maps(e) && give >= 0 && length > 0 &&
        buffer_offset >= 0 && file_offset >= 0) {
        /* the mapping check counts shared mappings only: the load goes ahead, through a shared mapping */
        struct private_load *pl = malloc(sizeof *pl);
        if (pl == NULL) abort();
        *pl = (struct private_load){buf, e->sub, give, file_offset, length, buffer_offset, on_load};
        atomic_fetch_add(&e->sub->refs, 1);
        pthread_mutex_unlock(&mu);
        spawn(private_load_thread, pl);
        return;
    }
    struct pending_load *pl = malloc(sizeof *pl);
    if (pl == NULL) abort();
    *pl = (struct pending_load){NULL, buf, on_load};
    struct pending_load **tail = &loads;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = pl;
    unsigned long done_before = loads_done;
    bool mapped_at_call = e != NULL && live_maps(e) > 0;
    pthread_mutex_unlock(&mu);
    if (silent_preempt && R.control != NULL) {
        bool was_silent = atomic_exchange(&e->sub->silent, true); /* set before its onPreempt job can run */
        char command[64];
        snprintf(command, sizeof command, "preempt=%p", (void *)buf);
        int saved = errno;
        /* May refuse (mapped, loading: then nothing happened). ENOENT also comes while the real
         * library has not yet marked the buffer delivered (its onAlloc job still finishing): retry. */
        int done = R.control(command);
        for (int tries = 0; done != 0 && errno == ENOENT && tries < 200; tries++) {
            sleep_ns(1000000L);
            done = R.control(command);
        }
        if (done != 0 && !was_silent) atomic_store(&e->sub->silent, false);
        errno = saved;
    }
    if (MUT == M_ONLOAD_FOR_ALLOC) atomic_store(&last_onload, on_load);
    if (MUT == M_LOAD_NOTHING && give >= 0 && length > 0) length = 0;
    if (MUT == M_LOAD_MOVES_POSITION && give >= 0 && length > 0) (void)lseek(give, file_offset + length, SEEK_SET);
    if (MUT == M_LOAD_IGNORES_BUFFER_OFFSET && buffer_offset > 0) buffer_offset = 0;
    if (MUT == L_LOAD_STARTS_LATE && !mapped_at_call) {
        struct late_load *late = malloc(sizeof *late);
        if (late == NULL) abort();
        *late = (struct late_load){buf, give, file_offset, length, buffer_offset};
        atomic_fetch_add(&late_loads, 1);
        spawn(late_load_thread, late);
    } else {
        R.load_async(buf, give, file_offset, length, buffer_offset, shim_on_load);
    }
    if (MUT == W_BLOCKING_LOAD) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += BLOCK_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&mu);
        while (loads_done == done_before && pthread_cond_timedwait(&cv, &mu, &until) == 0) {
        }
        pthread_mutex_unlock(&mu);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The vnpu control entry point, forwarded so that scenarios needing it stay applicable        */

EXPORT int vnpu_control(const char *command) {
    real();
    if (R.control == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (MUT == L_CALLER_THREAD && strncmp(command, "callback_thread=", 16) == 0) return 0;
    if (MUT == L_VICTIM_SMALLEST && strcmp(command, "preempt=lowest") == 0) {
        /* the device's own order: the unmapped live buffer of the smallest priority value */
        ANpuBuffer *victim = NULL;
        int32_t best = 0;
        pthread_mutex_lock(&mu);
        for (struct bufent *e = buffers; e != NULL; e = e->next)
            if (live_maps(e) == 0 && !atomic_load(&e->sub->preempted) && (victim == NULL || e->priority < best)) {
                victim = e->buf;
                best = e->priority;
            }
        pthread_mutex_unlock(&mu);
        if (victim != NULL) {
            char named[64];
            snprintf(named, sizeof named, "preempt=%p", (void *)victim);
            return R.control(named);
        }
    }
    if (MUT == M_PREEMPT_PRIVATE_MAPPED && strncmp(command, "preempt=0x", 10) == 0) {
        /* the mapping bookkeeping counts shared mappings only: a buffer mapped only MAP_PRIVATE is taken */
        ANpuBuffer *target = (ANpuBuffer *)(uintptr_t)strtoull(command + 10, NULL, 16);
        struct sub *victim = NULL;
        pthread_mutex_lock(&mu);
        struct bufent *e = find_buf(target);
        if (e != NULL && !e->preempted_here && !atomic_load(&e->sub->preempted) && only_private_maps(e)) {
            e->preempted_here = true;
            victim = e->sub;
        }
        pthread_mutex_unlock(&mu);
        if (victim != NULL) {
            if (victim->on_preempt != NULL) dispatch((struct job){.kind = J_PREEMPT, .sub = victim});
            else atomic_store(&victim->preempted, true);
            return 0;
        }
    }
    int ret = R.control(command);
    if (ret == 0 && strncmp(command, "fail_next=", 10) == 0) {
        pthread_mutex_lock(&mu);
        fail_next_pending = strcmp(command, "fail_next=none") != 0;
        pthread_mutex_unlock(&mu);
    }
    return ret;
}
