/* ANpuBuffer_free, _map, _unmap and _setPriority. Buffer pointers are looked up in the registry
 * (compared, never dereferenced) before use, so a stale pointer gets EINVAL, not a crash. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "vnpu_internal.h"

/* aosp-2026 (facts FREE-1, FREE-5, COOKIE-4): the client reads every item before anything is
 * freed, so a NULL item or a buffer already freed crashes the process; each freed buffer leaves the
 * client map at once, which drops its cookie (the deleter runs here, mapped or not, unless a callback
 * using it still runs; an onLoad still to come is dropped, see vnpu_jobs.c). */
static int free_aosp(struct vnpu_device *dev, ANpuBuffer *const *buffers, size_t buffersLen) {
    struct vnpu_cookie **cookies = calloc(buffersLen, sizeof *cookies);
    if (cookies == NULL)
        abort();
    ANpuBuffer *reap = NULL;
    vnpu_lock(dev);
    for (size_t i = 0; i < buffersLen; i++) {
        ANpuBuffer *buf = buffers[i];
        if (buf == NULL || !vnpu_buffer_is_registered_locked(dev, buf) || !buf->user_ref) {
            vnpu_unlock(dev);
            vnpu_null_deref("ANpuBuffer_free");
        }
    }
    int rc = 0;
    for (size_t i = 0; i < buffersLen; i++) {
        ANpuBuffer *buf = buffers[i];
        if (!buf->user_ref) {
            rc = -1; /* listed twice: the service finds the second ID unknown (facts FREE-2) */
            continue;
        }
        buf->user_ref = false;
        cookies[i] = vnpu_buffer_take_cookie_locked(dev, buf);
        vnpu_buffer_settle_locked(dev, buf, &reap);
    }
    vnpu_unlock(dev);
    vnpu_buffer_reap(reap);
    for (size_t i = 0; i < buffersLen; i++)
        vnpu_cookie_unref(cookies[i]); /* the deleter runs on this thread */
    free(cookies);
    if (rc != 0)
        errno = EINVAL;
    return rc;
}

VNPU_API int ANpuBuffer_free(ANpuBuffer *const *buffers, size_t buffersLen) {
    struct vnpu_device *dev = vnpu_dev();
    if (buffersLen == 0)
        return 0;
    if (buffers == NULL) {
        if (vnpu_aosp(dev))
            vnpu_null_deref("ANpuBuffer_free");
        errno = EINVAL;
        return -1;
    }
    if (vnpu_aosp(dev))
        return free_aosp(dev, buffers, buffersLen);
    int rc = 0;
    ANpuBuffer *reap = NULL;
    vnpu_lock(dev);
    for (size_t i = 0; i < buffersLen; i++) {
        ANpuBuffer *buf = buffers[i];
        if (buf == NULL || !vnpu_buffer_is_registered_locked(dev, buf) || !buf->user_ref) {
            rc = -1; /* NULL, unknown or already freed: the others are still freed */
            continue;
        }
        buf->user_ref = false;
        vnpu_buffer_settle_locked(dev, buf, &reap);
    }
    vnpu_unlock(dev);
    vnpu_buffer_reap(reap); /* deleters run on this thread unless a callback is in flight */
    if (rc != 0)
        errno = EINVAL;
    return rc;
}

static int map_error_locked(const struct vnpu_device *dev, const ANpuBuffer *buf, int prot) {
    if (!vnpu_buffer_is_registered_locked(dev, buf) || !buf->user_ref)
        return EINVAL;  /* map after free is undefined; refuse it */
    if (vnpu_aosp(dev)) /* the client's state: Allocated until the notice arrives (D24); no prot check (D13) */
        return buf->client_preempted || buf->state != VNPU_ALLOCATED ? ENOMEM : 0; /* D1 */
    if (buf->preempted)
        return ENOENT;
    if (buf->state != VNPU_ALLOCATED)
        return EBUSY; /* a load is in flight */
    if ((prot & ~buf->prot) != 0)
        return EACCES; /* not a subset of the allocation's protection flags */
    return 0;
}

VNPU_API void *ANpuBuffer_map(ANpuBuffer *buf, void *addr, size_t length, int prot, int flags, off_t offset) {
    struct vnpu_device *dev = vnpu_dev();
    ANpuBuffer *reap = NULL;
    vnpu_lock(dev);
    int err = map_error_locked(dev, buf, prot);
    void *p = MAP_FAILED;
    if (err == 0) {
        /* Under the lock, so preemption cannot slip between the checks and the mapping. */
        p = mmap(addr, length, prot, flags, buf->memfd, offset);
        if (p == MAP_FAILED) {
            err = errno;
        } else {
            uintptr_t start = (uintptr_t)p, end = start + vnpu_page_round_up(length);
            vnpu_maps_forget_all_locked(dev, start, end, &reap); /* MAP_FIXED may replace mappings */
            if (vnpu_maps_add_locked(buf, start, end) != 0) {
                munmap(p, length);
                p = MAP_FAILED;
                err = ENOMEM;
            }
        }
    }
    vnpu_unlock(dev);
    vnpu_buffer_reap(reap);
    if (p == MAP_FAILED)
        errno = err;
    return p;
}

VNPU_API int ANpuBuffer_unmap(ANpuBuffer *buf, void *addr, size_t length) {
    struct vnpu_device *dev = vnpu_dev();
    uintptr_t start = (uintptr_t)addr, end = start + vnpu_page_round_up(length);
    ANpuBuffer *reap = NULL;
    int err = 0;
    vnpu_lock(dev);
    /* Published: only this buffer's mappings. aosp-2026 ignores the buffer and calls munmap
     * (facts MAP-3); either way the bookkeeping follows what was unmapped. */
    if (!vnpu_aosp(dev) &&
        (!vnpu_buffer_is_registered_locked(dev, buf) || length == 0 || (start & (vnpu_page_size() - 1)) != 0 ||
         end < start || !vnpu_maps_covers_locked(buf, start, end)))
        err = EINVAL;
#ifdef VNPU_DEFECT_PARTIAL_UNMAP_REFUSED
    /* deliberate defect for the kit's own tests: a range inside a longer mapping is refused */
    else if (!vnpu_aosp(dev) &&
             (vnpu_maps_covers_locked(buf, start, end + vnpu_page_size()) ||
              (start >= vnpu_page_size() && vnpu_maps_covers_locked(buf, start - vnpu_page_size(), end))))
        err = EINVAL;
#endif
    else if (munmap(addr, length) != 0)
        err = errno;
    else
        vnpu_maps_forget_all_locked(dev, start, end, &reap);
    vnpu_unlock(dev);
    vnpu_buffer_reap(reap); /* the last unmap of a freed buffer destroys it */
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

VNPU_API int ANpuBuffer_setPriority(ANpuBuffer *buf, int32_t newBufferPriority) {
    struct vnpu_device *dev = vnpu_dev();
    int err = 0;
    vnpu_lock(dev);
    if (!vnpu_buffer_is_registered_locked(dev, buf) || !buf->user_ref)
        err = EINVAL;
    else if (!vnpu_aosp(dev) &&
             (newBufferPriority < ANPUBUFFER_PRIORITY_MIN || newBufferPriority > ANPUBUFFER_PRIORITY_MAX))
        err = EINVAL; /* aosp-2026 accepts any value (D3) */
#ifdef VNPU_DEFECT_PRIORITY_MAX_REFUSED
    else if (newBufferPriority == ANPUBUFFER_PRIORITY_MAX)
        err = EINVAL; /* deliberate defect for the kit's own tests: the highest valid priority refused */
#endif
    else
        buf->priority = newBufferPriority; /* also on a preempted buffer: it is still live */
    vnpu_unlock(dev);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}
