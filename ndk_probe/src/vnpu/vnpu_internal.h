/*
 * Internal interfaces of the virtual NPU (libvnpu.so). See docs/vnpu.md for the behaviour.
 *
 * State as a parameter: only the public entry points (the NDK API functions and vnpu_control)
 * resolve the one device with vnpu_dev(); every internal function takes it as `dev`. The files call
 * each other in layers, never in a circle (tests/probe/test_c_calls.py checks it).
 *
 * Locking: one process-wide mutex (dev->lock, vnpu_lock) protects every buffer's mutable state, the buffer
 * registry, the budget and the job queue. Request objects are not locked (the API makes their
 * thread-safety the caller's job). No vnpu lock is ever held while user code runs (callbacks,
 * cookie deleters), so callbacks may call back into the API.
 */
#ifndef VNPU_INTERNAL_H
#define VNPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "android/npumanager/buffer.h"

/* The vocabulary's names (one source of truth: errno names, policies, personalities, commands); its op
 * table is not needed here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-const-variable"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include "vocabulary.h"
#pragma GCC diagnostic pop

/* Only the 18 API functions and vnpu_control leave the library (-fvisibility=hidden). */
#define VNPU_API __attribute__((visibility("default")))

#define VNPU_REQUEST_MAGIC 0x52514e56u /* "VNQR" */
#define VNPU_BUFFER_MAGIC  0x46424e56u /* "VNBF": helps spot stale pointers in a debugger */
#define VNPU_PROT_ALL      0x7         /* PROT_READ | PROT_WRITE | PROT_EXEC */
#define VNPU_MAX_PAIRS     64

struct vnpu_device;

/* ---- profile (vnpu_profile.c) ---- */

/* From vocabulary.yaml (vnpu_personalities, vnpu_policies), the default first: VNPU_PUBLISHED and
 * VNPU_AOSP_2026; VNPU_POLICY_BUDGET ... A policy added there and not handled fails the build (-Wswitch). */
#define VNPU_PERSONALITY(id, name) VNPU_##id,
enum vnpu_personality { NPUCONF_VNPU_PERSONALITIES(VNPU_PERSONALITY) };
#undef VNPU_PERSONALITY
#define VNPU_POLICY(id, name) VNPU_POLICY_##id,
enum vnpu_policy_kind { NPUCONF_VNPU_POLICIES(VNPU_POLICY) };
#undef VNPU_POLICY

struct vnpu_pair {
    int32_t device;
    int8_t type;
};

struct vnpu_profile {
    struct vnpu_pair pairs[VNPU_MAX_PAIRS];
    size_t npairs;
    uint64_t capacity;
    enum vnpu_policy_kind policy;
    enum vnpu_personality personality;
    uint64_t callback_delay_us;
    uint64_t preempt_late_quiet_ms; /* 0: a late onPreempt is due PREEMPT_LATE_MS after its command */
    uint64_t due_when_waiting;      /* 1: loads and late onPreempts due once the app waits (vnpu_waiting) */
};

/* Fills *out from $NPUCONF_VNPU_PROFILE (defaults when unset). Returns 0, or -1 with a
 * one-line message in err. */
int vnpu_profile_load(struct vnpu_profile *out, char *err, size_t errlen);
bool vnpu_profile_has_pair(const struct vnpu_profile *p, int32_t device, int32_t type);

/* ---- cookie holders (vnpu_cookie.c) ---- */

/* A reference-counted (value, deleter) pair. NULL stands for (NULL, no deleter). */
struct vnpu_cookie {
    atomic_uint refs;
    void *value;
    ANpuManager_CookieDeleter deleter;
};

struct vnpu_cookie *vnpu_cookie_new(void *value, ANpuManager_CookieDeleter deleter);
struct vnpu_cookie *vnpu_cookie_ref(struct vnpu_cookie *c);
/* Drops one reference; the last one runs the deleter on the calling thread. Never call with
 * the vnpu lock held. */
void vnpu_cookie_unref(struct vnpu_cookie *c);
void *vnpu_cookie_value(const struct vnpu_cookie *c);

/* ---- requests (vnpu_api_request.c) ---- */

struct ANpuManager_AllocRequest {
    uint32_t magic;
    int32_t device;
    int8_t type;
    int64_t size;
    int32_t priority;
    int32_t prot;
    int fd; /* owned; -1 (published) or any negative (aosp-2026) means no segment */
    int64_t file_offset, length, buffer_offset;
    struct vnpu_cookie *cookie;
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_PreemptCallback on_preempt;
};

void vnpu_request_check(const ANpuManager_AllocRequest *req);

/* ---- buffers (vnpu_buffer.c, vnpu_buffer_new.c, vnpu_maps.c) ---- */

enum vnpu_buf_state {
    VNPU_ALLOCATING, /* admitted, onAlloc not delivered yet */
    VNPU_ALLOCATED,
    VNPU_LOADING, /* a loadAsync copy is queued or running */
};

struct vnpu_range {
    uintptr_t start, end; /* page-aligned, end exclusive */
};

struct ANpuBuffer {
    uint32_t magic;
    struct ANpuBuffer *next, *prev; /* registry (device.buffers), until destroyed */
    struct ANpuBuffer *next_dead;   /* reap list, after unlinking */
    uint64_t seq;                   /* admission order, 1-based */
    /* Immutable after creation. */
    int64_t size;
    int32_t prot, device;
    int8_t type;
    struct vnpu_cookie *cookie; /* this buffer's reference, dropped when the struct dies */
    ANpuManager_PreemptCallback on_preempt;
    /* Under the vnpu lock. memfd is also read without the lock by the one copy in flight. */
    int memfd; /* -1 once the memory is released (preemption) */
    int32_t priority;
    enum vnpu_buf_state state;
    bool user_ref;           /* the user may still call ANpuBuffer_free */
    bool delivered;          /* onAlloc(0, buf) has started */
    bool preempted;          /* by the service: a victim no more (published: also maps ENOENT at once) */
    bool client_preempted;   /* aosp-2026: the notice reached the client: maps ENOMEM, loads EINVAL */
    bool cancel_pending;     /* aosp-2026: preempted while a load is in flight */
    uint64_t cancel_late_ns; /* aosp-2026: with cancel_pending, the onPreempt's extra delay */
    bool load_poisoned;      /* aosp-2026: a failed load wedges later loads (LOAD-6) */
    /* aosp-2026: a load whose binder call failed left the client in Loading with this onLoad (LOAD-5):
     * maps fail ENOMEM and loads EINVAL from then on; a notice answers it ECANCELED. */
    ANpuManager_LoadCallback wedged_on_load;
    bool accounted; /* counted by the budget / the policy */
    /* The block the policy gave it (acl, caching, arena): bytes taken, region, arena offset. */
    uint64_t pol_charge, pol_start;
    int pol_region;
    bool dead;
    unsigned jobs; /* queued or running callback jobs that use this buffer */
    /* aosp-2026: loadAsync jobs that have not yet decided to call onLoad, and preemption notices not
     * yet delivered. A freed buffer's late load reply or notice finds no entry in the client map and
     * is dropped (facts LOAD-7, PRE-2), so these do not keep its cookie alive. */
    unsigned quiet_jobs;
    struct vnpu_range *ranges;
    size_t nranges, cap_ranges;
};

/* Registers a new buffer and takes its block from the policy (the caching policy may preempt less
 * important buffers for it; the decision was made by vnpu_policy_admit_locked just before). */
ANpuBuffer *vnpu_buffer_new_locked(struct vnpu_device *dev, const ANpuManager_AllocRequest *snap,
                                   struct vnpu_cookie *cookie, int memfd);
/* Applies the lifetime rules after a state change: stops accounting a freed, unmapped buffer,
 * and unlinks a buffer nobody can reach any more onto *reap. */
void vnpu_buffer_settle_locked(struct vnpu_device *dev, ANpuBuffer *buf, ANpuBuffer **reap);
/* Releases the memory of a buffer (closes its memfd). */
void vnpu_buffer_release_memory_locked(ANpuBuffer *buf);
/* Destroys the unlinked buffers of a reap list; cookie deleters run here. Call unlocked. */
void vnpu_buffer_reap(ANpuBuffer *reap);
bool vnpu_buffer_is_registered_locked(const struct vnpu_device *dev, const ANpuBuffer *buf);
/* aosp-2026: once the user freed buf and no callback that uses its cookie can still run, the
 * buffer lets go of its cookie at once (the client map drops the buffer object in ANpuBuffer_free,
 * facts COOKIE-4), even while it is still mapped. Returns the cookie reference to drop unlocked
 * (the deleter may run), or NULL. */
struct vnpu_cookie *vnpu_buffer_take_cookie_locked(const struct vnpu_device *dev, ANpuBuffer *buf);

/* Mapping bookkeeping. */
int vnpu_maps_add_locked(ANpuBuffer *buf, uintptr_t start, uintptr_t end);
bool vnpu_maps_covers_locked(const ANpuBuffer *buf, uintptr_t start, uintptr_t end);
/* Forgets [start, end) in every buffer (a mapping replaced by MAP_FIXED, or unmapped). */
void vnpu_maps_forget_all_locked(struct vnpu_device *dev, uintptr_t start, uintptr_t end, ANpuBuffer **reap);
uintptr_t vnpu_page_round_up(uintptr_t n);
uintptr_t vnpu_page_size(void);

/* ---- policy (vnpu_policy.c, vnpu_policy_acl.c, vnpu_policy_caching.c, vnpu_policy_arena.c) ---- */

enum vnpu_region { VNPU_REGION_NONE, VNPU_REGION_NORMAL, VNPU_REGION_HUGE, VNPU_REGION_HEAD, VNPU_REGION_TAIL };

/* A block as the policies see it: the arena keeps released blocks (holes) until they are reclaimed,
 * after their buffer struct may be gone. */
struct vnpu_block {
    uint64_t seq, start, charge;
    int region;
    bool hole;
};

struct vnpu_policy_state {
    uint64_t used_normal, used_huge; /* acl */
    uint64_t locked, cached;         /* caching: bytes of live blocks, bytes in the free cache */
    uint64_t *cache;                 /* caching: the free cache, sizes */
    size_t ncache, cap_cache;
    struct vnpu_block *blocks; /* arena: every block not reclaimed, live or hole */
    size_t nblocks, cap_blocks;
};

/* 0 when the policy admits the request now, else ENOMEM. Decides only, except that the caching
 * policy cleans its cache when it gets that far (also on a refusal, as ArrayFire's manager does);
 * vnpu_buffer_new_locked applies the decision to the new buffer. */
int vnpu_policy_admit_locked(struct vnpu_device *dev, const ANpuManager_AllocRequest *r);
void vnpu_policy_release_locked(struct vnpu_device *dev, ANpuBuffer *buf);
/* pressure=: true while the policy's used bytes and the reservation exceed the capacity (caching
 * cleans its cache first). */
bool vnpu_policy_over_locked(struct vnpu_device *dev);

/* Per policy: with buf NULL, decide only (0 or ENOMEM); with buf, take its block (the decision
 * made just before, under the same lock, so it cannot fail). */
int vnpu_acl_place_locked(struct vnpu_device *dev, int64_t size, ANpuBuffer *buf);
void vnpu_acl_release_locked(struct vnpu_device *dev, ANpuBuffer *buf);
/* The caching policy's place returns VNPU_CACHING_MUST_PREEMPT instead of taking the block when
 * less important buffers must be preempted first: the caller preempts until
 * vnpu_caching_fits_locked, then calls vnpu_caching_take_after_preemption_locked. */
#define VNPU_CACHING_MUST_PREEMPT (-1)
int vnpu_caching_place_locked(struct vnpu_device *dev, int64_t size, int32_t priority, ANpuBuffer *buf);
bool vnpu_caching_fits_locked(const struct vnpu_device *dev, int64_t size);
void vnpu_caching_take_after_preemption_locked(struct vnpu_device *dev, ANpuBuffer *buf);
void vnpu_caching_release_locked(struct vnpu_device *dev, ANpuBuffer *buf);
bool vnpu_caching_over_locked(struct vnpu_device *dev);
int vnpu_arena_place_locked(struct vnpu_device *dev, int64_t size, int8_t type, ANpuBuffer *buf);
void vnpu_arena_release_locked(struct vnpu_device *dev, ANpuBuffer *buf);
uint64_t vnpu_arena_used_locked(const struct vnpu_device *dev);

/* ---- victims (vnpu_victim.c) ---- */

/* Why buf cannot be preempted now (ENOENT, EBUSY), or 0. */
int vnpu_preempt_error_locked(const struct vnpu_device *dev, const ANpuBuffer *buf);
bool vnpu_preemptable_locked(const struct vnpu_device *dev, const ANpuBuffer *buf);
/* The preemption victim for preempt=lowest, or NULL. */
ANpuBuffer *vnpu_victim_lowest_locked(const struct vnpu_device *dev);
/* The victim for pressure= (acl: only normal-page blocks relieve the normal pool), or NULL. */
ANpuBuffer *vnpu_victim_pressure_locked(const struct vnpu_device *dev);
/* The victim among buffers whose priority value is greater than prio (less important), or NULL. */
ANpuBuffer *vnpu_victim_below_locked(const struct vnpu_device *dev, int32_t prio);

/* ---- preemption (vnpu_preempt.c) ---- */

/* Preempts buf: 0, or an errno (ENOENT, EBUSY). Queues the callbacks it owes. */
int vnpu_preempt_locked(struct vnpu_device *dev, ANpuBuffer *buf);
/* The same, its onPreempt due late_ns later than it would be (preempt_late=). */
int vnpu_preempt_late_locked(struct vnpu_device *dev, ANpuBuffer *buf, uint64_t late_ns);

/* ---- jobs, their queue and the worker (vnpu_jobs.c) ---- */

enum vnpu_job_kind { VNPU_JOB_ALLOC, VNPU_JOB_LOAD, VNPU_JOB_PREEMPT };

struct vnpu_job {
    struct vnpu_job *next;
    uint64_t due_ns;
    /* A late onPreempt on a device with preempt_late_quiet_ms: due once no API call has come for
     * quiet_ns (not before earliest_ns), due_ns at the latest. 0: due at due_ns. */
    uint64_t quiet_ns, earliest_ns;
    /* A load or a late onPreempt on a device with due_when_waiting: due once the application waits
     * (vnpu_waiting), not before earliest_ns. */
    bool when_waiting;
    enum vnpu_job_kind kind;
    ANpuBuffer *buf;            /* NULL for an allocation that failed at admission */
    struct vnpu_cookie *cookie; /* failed allocation only: the submission's reference */
    int error;                  /* decided result; 0 means do the work */
    bool immediate;             /* runs inside the API call (aosp-2026 client-side errors) */
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_LoadCallback on_load;
    int fd; /* source of the copy (a private dup), or -1 */
    int64_t file_offset, length, buffer_offset;
};

struct vnpu_job *vnpu_job_new(enum vnpu_job_kind kind);
/* Runs one job (callbacks included) on the calling thread; frees it. Call unlocked. */
void vnpu_job_run(struct vnpu_device *dev, struct vnpu_job *job);
/* Queues an asynchronous job (delay applied) and makes sure the worker runs. */
void vnpu_enqueue_locked(struct vnpu_device *dev, struct vnpu_job *job);
/* The same, due extra_ns later still. The queue stays FIFO: later jobs wait behind this one. */
void vnpu_enqueue_late_locked(struct vnpu_device *dev, struct vnpu_job *job, uint64_t extra_ns);
/* Copies [off, off+len) of src into dst at dst_off with pread/pwrite: 0 or an errno. */
int vnpu_copy_segment(int src, int64_t off, int64_t len, int dst, int64_t dst_off);
/* EINVAL when [off, off+len) ends past the end of a regular file, else 0 (or fstat's errno). */
int vnpu_check_file_bounds(int fd, int64_t off, int64_t len);

/* ---- the device (vnpu_device.c) ---- */

struct vnpu_device {
    struct vnpu_profile profile;
    ANpuBuffer *buffers; /* registry: every buffer struct not yet destroyed */
    uint64_t next_seq;
    uint64_t used;                /* budget: bytes of accounted buffers */
    uint64_t reserved;            /* budget: pressure=<bytes> */
    struct vnpu_policy_state pol; /* acl, caching, arena */
    /* control state */
    uint64_t delay_ms;
    bool callback_caller;
    int fail_next;
    /* when the last API call began (vnpu_dev), read by the worker for a quiet device's late onPreempt */
    _Atomic uint64_t last_call_ns;
    /* when the application last said it waits (vnpu_waiting; 0: not since the last callback), under lock */
    uint64_t waiting_ns;
    /* worker */
    struct vnpu_job *head, *tail;
    bool worker_started;
    pthread_mutex_t lock; /* the one vnpu lock (see the top of this file) */
    pthread_cond_t wake;  /* CLOCK_MONOTONIC; signals the worker */
    bool running;         /* the worker runs a job (its callbacks) */
    pthread_cond_t ran;   /* CLOCK_MONOTONIC; the worker ran a job, or found its queue empty */
};

/* The one process-wide device: initialised at the first API call; a bad profile ends the
 * process there (exit status 70). Only the public entry points call it. */
struct vnpu_device *vnpu_dev(void);
/* aosp-2026: what the AOSP client does when it dereferences a NULL or dangling pointer: the
 * process dies with SIGSEGV. `what` goes to stderr first. */
_Noreturn void vnpu_null_deref(const char *what);

static inline bool vnpu_aosp(const struct vnpu_device *dev) { return dev->profile.personality == VNPU_AOSP_2026; }

static inline void vnpu_lock(struct vnpu_device *dev) { pthread_mutex_lock(&dev->lock); }

static inline void vnpu_unlock(struct vnpu_device *dev) { pthread_mutex_unlock(&dev->lock); }

static inline uint64_t vnpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long an asynchronous load takes at least. A real NPU copies the segment over a bus; without this
 * floor the worker finished a small load within microseconds and whether the application's next call
 * (a free, a map) met the load in flight was a coin toss. With it, a call right after loadAsync meets
 * the load in flight, and a reproduction that depends on it replays every time. */
#define VNPU_LOAD_NS 5000000u

#endif
