/* Buffer objects: the registry and the lifetime rule (creation: vnpu_buffer_new.c). A buffer struct lives while
 * the user may still free it, while a callback job may still use it, or while a mapping of it
 * exists (ANpuBuffer_unmap stays legal after ANpuBuffer_free). The cookie reference goes with
 * the struct, so a deleter never runs while a callback for that buffer may be in flight. */
#include <stdlib.h>
#include <unistd.h>

#include "vnpu_internal.h"

void vnpu_buffer_release_memory_locked(ANpuBuffer *buf) {
    if (buf->memfd >= 0) {
        close(buf->memfd);
        buf->memfd = -1;
    }
}

void vnpu_buffer_settle_locked(struct vnpu_device *dev, ANpuBuffer *buf, ANpuBuffer **reap) {
    if (buf->dead)
        return;
    /* Freed and unmapped: the memory is no longer the app's (budget accounting ends here). */
    if (!buf->user_ref && buf->nranges == 0 && buf->accounted)
        vnpu_policy_release_locked(dev, buf);
    if (buf->user_ref || buf->jobs != 0 || buf->nranges != 0)
        return;
    if (buf->prev != NULL)
        buf->prev->next = buf->next;
    else
        dev->buffers = buf->next;
    if (buf->next != NULL)
        buf->next->prev = buf->prev;
    buf->dead = true;
    buf->next_dead = *reap;
    *reap = buf;
}

void vnpu_buffer_reap(ANpuBuffer *reap) {
    while (reap != NULL) {
        ANpuBuffer *buf = reap;
        reap = buf->next_dead;
        if (buf->memfd >= 0)
            close(buf->memfd);
        struct vnpu_cookie *cookie = buf->cookie;
        free(buf->ranges);
        buf->magic = 0;
        free(buf);
        vnpu_cookie_unref(cookie); /* the deleter may run here, on this thread */
    }
}

struct vnpu_cookie *vnpu_buffer_take_cookie_locked(const struct vnpu_device *dev, ANpuBuffer *buf) {
    if (!vnpu_aosp(dev) || buf->user_ref || buf->jobs != buf->quiet_jobs)
        return NULL;
    struct vnpu_cookie *cookie = buf->cookie;
    buf->cookie = NULL;
    return cookie;
}

bool vnpu_buffer_is_registered_locked(const struct vnpu_device *dev, const ANpuBuffer *buf) {
    for (const ANpuBuffer *b = dev->buffers; b != NULL; b = b->next)
        if (b == buf)
            return true;
    return false;
}
