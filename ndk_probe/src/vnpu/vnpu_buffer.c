/* Buffer objects: creation, the registry, and the lifetime rule. A buffer struct lives while
 * the user may still free it, while a callback job may still use it, or while a mapping of it
 * exists (ANpuBuffer_unmap stays legal after ANpuBuffer_free). The cookie reference goes with
 * the struct, so a deleter never runs while a callback for that buffer may be in flight. */
#include <stdlib.h>
#include <unistd.h>

#include "vnpu_internal.h"

ANpuBuffer *vnpu_buffer_new_locked(const ANpuManager_AllocRequest *snap, struct vnpu_cookie *cookie, int memfd)
{
    struct vnpu_device *dev = vnpu_dev();
    ANpuBuffer *buf = calloc(1, sizeof *buf);
    if (buf == NULL)
        abort();
    buf->magic = VNPU_BUFFER_MAGIC;
    buf->seq = dev->next_seq++;
    buf->size = snap->size;
    buf->prot = snap->prot;
    buf->device = snap->device;
    buf->type = snap->type;
    buf->priority = snap->priority;
    buf->cookie = cookie;
    buf->on_preempt = snap->on_preempt;
    buf->memfd = memfd;
    buf->state = VNPU_ALLOCATING;
    buf->user_ref = true; /* handed to the user by onAlloc */
    buf->jobs = 1;        /* the allocation job that will call onAlloc */
    buf->next = dev->buffers;
    if (dev->buffers != NULL)
        dev->buffers->prev = buf;
    dev->buffers = buf;
    vnpu_policy_account_locked(buf);
    return buf;
}

void vnpu_buffer_release_memory_locked(ANpuBuffer *buf)
{
    if (buf->memfd >= 0) {
        close(buf->memfd);
        buf->memfd = -1;
    }
}

void vnpu_buffer_settle_locked(ANpuBuffer *buf, ANpuBuffer **reap)
{
    if (buf->dead)
        return;
    /* Freed and unmapped: the memory is no longer the app's (budget accounting ends here). */
    if (!buf->user_ref && buf->nranges == 0 && buf->accounted)
        vnpu_policy_release_locked(buf);
    if (buf->user_ref || buf->jobs != 0 || buf->nranges != 0)
        return;
    struct vnpu_device *dev = vnpu_dev();
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

void vnpu_buffer_reap(ANpuBuffer *reap)
{
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

struct vnpu_cookie *vnpu_buffer_take_cookie_locked(ANpuBuffer *buf)
{
    if (!vnpu_aosp() || buf->user_ref || buf->jobs != buf->quiet_jobs)
        return NULL;
    struct vnpu_cookie *cookie = buf->cookie;
    buf->cookie = NULL;
    return cookie;
}

bool vnpu_buffer_is_registered_locked(const ANpuBuffer *buf)
{
    for (const ANpuBuffer *b = vnpu_dev()->buffers; b != NULL; b = b->next)
        if (b == buf)
            return true;
    return false;
}
