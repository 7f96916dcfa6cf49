/* ANpuManager_isSupported and ANpuManager_allocAsync. Each request is snapshotted and decided
 * (validation, then the budget) inside allocAsync, in list order; its one onAlloc is delivered
 * later by the worker, or inline when callback_thread=caller is set. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vnpu_internal.h"

static bool type_in_enum(int32_t type) { return type >= ANPUBUFFER_TYPE_UNKNOWN && type <= ANPUBUFFER_TYPE_AUXILIARY; }

VNPU_API int ANpuManager_isSupported(ANpuManager_AllocRequest *const *requests, size_t requestsLen,
                                     bool *outIsSupported) {
    struct vnpu_device *dev = vnpu_dev();
    if (requestsLen == 0)
        return 0;
    if (requests == NULL || outIsSupported == NULL) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < requestsLen; i++) {
        vnpu_request_check(requests[i]);
        if (vnpu_aosp(dev) && !type_in_enum(requests[i]->type)) {
            errno = EINVAL; /* aosp-2026: the whole call fails (D10) */
            return -1;
        }
    }
    /* Only (device, type) matter; size, priority, prot, cookie and callbacks are ignored. */
    for (size_t i = 0; i < requestsLen; i++)
        outIsSupported[i] = vnpu_profile_has_pair(&dev->profile, requests[i]->device, requests[i]->type);
    return 0;
}

/* A request's state at submission: the snapshot the API promises. */
struct submission {
    ANpuManager_AllocRequest snap;
    int fd;        /* private dup of the segment's fd, or -1 */
    int dup_error; /* errno of a failed dup */
    bool segment;
};

static int segment_error(const struct submission *s) {
    const ANpuManager_AllocRequest *r = &s->snap;
    if (r->file_offset < 0 || r->length < 0 || r->buffer_offset < 0)
        return EINVAL;
    if (r->buffer_offset > r->size || r->length > r->size - r->buffer_offset)
        return EINVAL; /* the segment does not fit in the buffer */
    return vnpu_check_file_bounds(s->fd, r->file_offset, r->length);
}

/* Published: EINVAL for every documented invalid value, ENODEV for a valid but unconfigured pair,
 * then the budget (ENOMEM). */
static int published_error(struct vnpu_device *dev, const struct submission *s) {
    const ANpuManager_AllocRequest *r = &s->snap;
    if (r->type < ANPUBUFFER_TYPE_MODEL_EXECUTABLE || r->type > ANPUBUFFER_TYPE_AUXILIARY || r->device < 0 ||
        r->priority < ANPUBUFFER_PRIORITY_MIN || r->priority > ANPUBUFFER_PRIORITY_MAX || r->size <= 0 ||
        (r->prot & ~VNPU_PROT_ALL) != 0)
        return EINVAL;
    if (s->segment) {
        if (s->dup_error != 0)
            return s->dup_error;
        int err = segment_error(s);
        if (err != 0)
            return err;
    }
    if (!vnpu_profile_has_pair(&dev->profile, r->device, r->type))
        return ENODEV;
    if ((uint64_t)r->size > SIZE_MAX)
        return ENOMEM;
    return vnpu_policy_admit_locked(dev, r);
}

/* aosp-2026: the size goes unchecked to the DMA-buf heap, cast to size_t (the service's JNI,
 * nativeAllocWrapLoad: `size as usize`). The kernel page-aligns the length, so one within a page of
 * the top wraps to 0 (-1: EINVAL, as 0 itself), and refuses more pages than the machine has
 * (INT64_MAX, INT64_MIN, any other negative size: ENOMEM). */
static int heap_size_error(int64_t size) {
    size_t page = vnpu_page_size();
    size_t aligned = ((size_t)size + page - 1) & ~(page - 1);
    if (aligned == 0)
        return EINVAL;
    long pages = sysconf(_SC_PHYS_PAGES);
    return pages > 0 && aligned / page > (size_t)pages ? ENOMEM : 0;
}

/* aosp-2026, in the service's order (facts ALLOC-SVC-1): no priority or prot checks (D3, D12). */
static int aosp_error(struct vnpu_device *dev, const struct submission *s) {
    const ANpuManager_AllocRequest *r = &s->snap;
    if (!type_in_enum(r->type))
        return EINVAL;
    if (!vnpu_profile_has_pair(&dev->profile, r->device, r->type))
        return ENOSYS; /* includes device -1 and UNKNOWN (D2) */
    int err = heap_size_error(r->size);
    if (err != 0)
        return err;
    err = vnpu_policy_admit_locked(dev, r);
    if (err == 0 && s->segment)
        err = segment_error(s);
    return err;
}

static int new_memfd(int64_t size, uint64_t seq, int *out) {
    char name[64];
    snprintf(name, sizeof name, "npubuf-%ld-%llu", (long)getpid(), (unsigned long long)seq);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return errno;
    if (ftruncate64(fd, size) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

/* Decides one submission under the lock: a job with a new buffer, or one carrying the error. */
static struct vnpu_job *decide_locked(struct vnpu_device *dev, struct submission *s, struct vnpu_cookie *cookie) {
    struct vnpu_job *job = vnpu_job_new(VNPU_JOB_ALLOC);
    job->on_alloc = s->snap.on_alloc;
    int err;
    if (dev->fail_next != 0) {
        err = dev->fail_next; /* control: inject the next allocation's result */
        dev->fail_next = 0;
    } else {
        err = vnpu_aosp(dev) ? aosp_error(dev, s) : published_error(dev, s);
    }
    int memfd = -1;
    if (err == 0)
        err = new_memfd(s->snap.size, dev->next_seq, &memfd);
    if (err != 0) {
        job->error = err;
        job->cookie = cookie;
        if (s->fd >= 0)
            close(s->fd);
        return job;
    }
    job->buf = vnpu_buffer_new_locked(dev, &s->snap, cookie, memfd);
    if (s->segment && s->snap.length > 0) {
        job->fd = s->fd; /* the job copies, then closes its dup */
        job->file_offset = s->snap.file_offset;
        job->length = s->snap.length;
        job->buffer_offset = s->snap.buffer_offset;
    } else if (s->fd >= 0) {
        close(s->fd);
    }
    return job;
}

VNPU_API void ANpuManager_allocAsync(ANpuManager_AllocRequest *const *requests, size_t requestsLen) {
    struct vnpu_device *dev = vnpu_dev();
    for (size_t i = 0; i < requestsLen; i++) {
        vnpu_request_check(requests[i]);
        if (requests[i]->on_alloc == NULL) {
            fprintf(stderr, "vnpu: ANpuManager_allocAsync: request %zu has no onAlloc\n", i);
            abort(); /* documented crash, before anything is submitted */
        }
    }
    if (requestsLen == 0)
        return;
    struct submission *subs = calloc(requestsLen, sizeof *subs);
    struct vnpu_job **jobs = calloc(requestsLen, sizeof *jobs);
    if (subs == NULL || jobs == NULL)
        abort();
    bool aosp = vnpu_aosp(dev);
    for (size_t i = 0; i < requestsLen; i++) {
        struct submission *s = &subs[i];
        s->snap = *requests[i];
        s->fd = -1;
        s->segment = aosp ? s->snap.fd >= 0 : s->snap.fd != -1;
        if (s->segment) {
            /* Each submission gets its own fd: the request keeps its own and may be resubmitted. */
            s->fd = fcntl(s->snap.fd, F_DUPFD_CLOEXEC, 0);
            if (s->fd < 0)
                s->dup_error = errno;
        }
    }
    /* aosp-2026 reports a failed dup immediately, on this thread, after sending the rest
     * (facts ALLOC-IMM-2); the published personality treats it like any other error. */
    bool caller = false;
    vnpu_lock(dev);
    for (size_t i = 0; i < requestsLen; i++) {
        struct vnpu_cookie *cookie = vnpu_cookie_ref(subs[i].snap.cookie);
        if (aosp && subs[i].dup_error != 0) {
            jobs[i] = vnpu_job_new(VNPU_JOB_ALLOC);
            jobs[i]->on_alloc = subs[i].snap.on_alloc;
            jobs[i]->error = subs[i].dup_error;
            jobs[i]->cookie = cookie;
            continue;
        }
        jobs[i] = decide_locked(dev, &subs[i], cookie);
    }
    caller = dev->callback_caller;
    for (size_t i = 0; i < requestsLen && !caller; i++)
        if (!(aosp && subs[i].dup_error != 0))
            vnpu_enqueue_locked(dev, jobs[i]);
    vnpu_unlock(dev);
    for (size_t i = 0; i < requestsLen; i++)
        if (caller || (aosp && subs[i].dup_error != 0))
            vnpu_job_run(dev, jobs[i]);
    free(jobs);
    free(subs);
}
