/* ANpuBuffer_loadAsync: the fd is taken over at once and closed before returning (a private dup
 * feeds the copy), the file is read with pread so its position never changes, and exactly one
 * onLoad reports the result with the buffer's cookie and the same buffer pointer. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vnpu_internal.h"

static int published_error_locked(const ANpuBuffer *buf, int src, int dup_err, int64_t off, int64_t len, int64_t boff) {
    if (!buf->user_ref)
        return EINVAL;
    if (buf->preempted)
        return ENOENT;
    if (buf->nranges != 0 || buf->state != VNPU_ALLOCATED)
        return EBUSY; /* mapped ("the callback is replied with an error"), or a load in flight */
    if (off < 0 || len < 0 || boff < 0)
        return EINVAL;
    if (dup_err != 0)
        return dup_err;
    if (boff > buf->size || len > buf->size - boff)
        return EINVAL;
    return vnpu_check_file_bounds(src, off, len);
}

/* aosp-2026: client-side refusals are immediate (facts LOAD-4); the service's come later. The
 * client looks at its own state: a buffer the service preempted whose notice has not arrived yet
 * is still Allocated to it, and the load is sent (the notice, ahead of the reply, cancels it). */
static int aosp_error_locked(const ANpuBuffer *buf, int src, int dup_err, int64_t off, int64_t len, int64_t boff,
                             bool *immediate) {
    *immediate = true;
    if (!buf->user_ref || buf->client_preempted || buf->state != VNPU_ALLOCATED)
        return EINVAL;
    if (dup_err != 0)
        return dup_err; /* the fd cannot be sent */
    *immediate = false;
    if (buf->preempted || buf->load_poisoned || off < 0 || len < 0 || boff < 0)
        return EINVAL;
    if (boff > buf->size || len > buf->size - boff)
        return EINVAL;
    return vnpu_check_file_bounds(src, off, len); /* mapped: allowed (D7) */
}

/* aosp-2026, a negative fd other than -1: the client wraps it unchecked and moves the buffer to
 * Loading; writing it into the binder call fails (libbinder_ndk's AParcel_writeParcelFileDescriptor
 * refuses fd < -1 with STATUS_UNKNOWN_ERROR), which translations.rs maps to ECONNRESET, and the client
 * state is not rolled back (facts LOAD-5): onLoad(ECONNRESET) now, and the buffer stays Loading. */
static bool aosp_wedge_locked(ANpuBuffer *buf, ANpuManager_LoadCallback onLoad) {
    if (!buf->user_ref || buf->client_preempted || buf->state != VNPU_ALLOCATED)
        return false; /* refused before the binder call, as for any fd */
    buf->state = VNPU_LOADING;
    buf->wedged_on_load = onLoad;
    return true;
}

VNPU_API void ANpuBuffer_loadAsync(ANpuBuffer *buf, int fdToOwn, int64_t fileOffset, int64_t segmentLength,
                                   int64_t bufferOffset, ANpuManager_LoadCallback onLoad) {
    struct vnpu_device *dev = vnpu_dev();
    if (fdToOwn == -1 && vnpu_aosp(dev)) {
        /* aosp-2026: the fd is wrapped in an owned-fd type before any check (facts LOAD-1), and
         * that type's constructor asserts fd != -1: the process aborts. */
        fprintf(stderr, "vnpu: ANpuBuffer_loadAsync: cannot own fd -1 (aosp-2026)\n");
        abort();
    }
    int src = fdToOwn >= 0 ? fcntl(fdToOwn, F_DUPFD_CLOEXEC, 0) : -1;
    int dup_err = src < 0 ? (fdToOwn < 0 ? EBADF : errno) : 0;
    if (fdToOwn >= 0)
        close(fdToOwn); /* ours now; the app's descriptor number is released before we return */
    if (onLoad == NULL) {
        fprintf(stderr, "vnpu: ANpuBuffer_loadAsync: onLoad is NULL\n");
        abort(); /* documented crash */
    }
    struct vnpu_job *job = vnpu_job_new(VNPU_JOB_LOAD);
    job->buf = buf;
    job->on_load = onLoad;
    vnpu_lock(dev);
    if (!vnpu_buffer_is_registered_locked(dev, buf)) {
        vnpu_unlock(dev);
        fprintf(stderr, "vnpu: ANpuBuffer_loadAsync: %p is not a live ANpuBuffer\n", (void *)buf);
        abort(); /* no cookie to call onLoad with */
    }
    if (vnpu_aosp(dev) && fdToOwn < 0 && aosp_wedge_locked(buf, onLoad)) {
        job->error = ECONNRESET;
        job->immediate = true;
    } else if (vnpu_aosp(dev)) {
        job->error = aosp_error_locked(buf, src, dup_err, fileOffset, segmentLength, bufferOffset, &job->immediate);
        if (!job->immediate)
            buf->state = VNPU_LOADING; /* the client sent it: Loading until the reply (LOAD-4) */
    } else {
        job->error = published_error_locked(buf, src, dup_err, fileOffset, segmentLength, bufferOffset);
    }
    if (job->error == 0) {
        buf->state = VNPU_LOADING;
        job->fd = src;
        job->file_offset = fileOffset;
        job->length = segmentLength;
        job->buffer_offset = bufferOffset;
        src = -1;
    }
    buf->jobs++;
    if (!job->immediate && vnpu_aosp(dev))
        buf->quiet_jobs++; /* until it decides to call onLoad (vnpu_jobs.c) */
    bool immediate = job->immediate;
    int err = job->error;
    if (!immediate)
        vnpu_enqueue_late_locked(dev, job, VNPU_LOAD_NS); /* the worker owns it from here */
    vnpu_unlock(dev);
    if (src >= 0)
        close(src);
    if (immediate) {
        vnpu_job_run(dev, job);
        errno = err;
    }
}
