/* Creating a buffer: its registry entry and its block in the policy. Under the caching policy the
 * block may need room that only preempting less important buffers gives (the decision that they
 * are enough was made by vnpu_policy_admit_locked, under the same lock), so this file sits above
 * both the policies and preemption. */
#include <stdlib.h>

#include "vnpu_internal.h"

/* Caching: pressure turns into preemption, in victim order, until the block fits. */
static void make_room_and_take(struct vnpu_device *dev, ANpuBuffer *buf) {
    while (!vnpu_caching_fits_locked(dev, buf->size)) {
        ANpuBuffer *victim = vnpu_victim_below_locked(dev, buf->priority);
        if (victim == NULL || vnpu_preempt_locked(dev, victim) != 0)
            abort(); /* the admission said they were enough: a vnpu bug */
    }
    vnpu_caching_take_after_preemption_locked(dev, buf);
}

static void take_block(struct vnpu_device *dev, ANpuBuffer *buf) {
    buf->accounted = true;
    switch (dev->profile.policy) {
    case VNPU_POLICY_ACL:
        vnpu_acl_place_locked(dev, buf->size, buf);
        return;
    case VNPU_POLICY_CACHING:
        if (vnpu_caching_place_locked(dev, buf->size, buf->priority, buf) == VNPU_CACHING_MUST_PREEMPT)
            make_room_and_take(dev, buf);
        return;
    case VNPU_POLICY_ARENA:
        vnpu_arena_place_locked(dev, buf->size, buf->type, buf);
        return;
    case VNPU_POLICY_BUDGET:
        break;
    }
    dev->used += (uint64_t)buf->size;
}

ANpuBuffer *vnpu_buffer_new_locked(struct vnpu_device *dev, const ANpuManager_AllocRequest *snap,
                                   struct vnpu_cookie *cookie, int memfd) {
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
    take_block(dev, buf);
    return buf;
}
