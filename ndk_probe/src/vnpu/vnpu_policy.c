/* The allocation policy (docs/vnpu.md §6). `budget`: a buffer is accounted from its admission
 * inside ANpuManager_allocAsync until it is preempted, or freed with no mapping left (else at its
 * last unmap), or its load-on-alloc fails; a request is admitted when
 * used + reserved + size <= capacity, where reserved is the pressure=<bytes> reservation.
 * `acl`, `caching` and `arena` keep their arithmetic in vnpu_policy_<name>.c; this file
 * dispatches to them (the victim order they share is in vnpu_victim.c; a new buffer's block is
 * taken in vnpu_buffer_new.c).
 * Deciding inside allocAsync (not later on the worker) keeps the outcome a function of the
 * order of API calls, which the reference model can replay. */
#include <errno.h>

#include "vnpu_internal.h"

int vnpu_policy_admit_locked(struct vnpu_device *dev, const ANpuManager_AllocRequest *r) {
    if (r->size < 0)
        return ENOMEM;
    switch (dev->profile.policy) {
    case VNPU_POLICY_ACL:
        return vnpu_acl_place_locked(dev, r->size, NULL);
    case VNPU_POLICY_CACHING:
        return vnpu_caching_place_locked(dev, r->size, r->priority, NULL);
    case VNPU_POLICY_ARENA:
        return vnpu_arena_place_locked(dev, r->size, r->type, NULL);
    case VNPU_POLICY_BUDGET:
        if (vnpu_aosp(dev))
            return 0; /* aosp-2026: the service has no budget (docs/vnpu.md §5) */
        break;
    }
    uint64_t taken = dev->used + dev->reserved;
    if (taken > dev->profile.capacity || (uint64_t)r->size > dev->profile.capacity - taken)
        return ENOMEM;
    return 0;
}

void vnpu_policy_release_locked(struct vnpu_device *dev, ANpuBuffer *buf) {
    if (!buf->accounted)
        return;
    buf->accounted = false;
    switch (dev->profile.policy) {
    case VNPU_POLICY_ACL:
        vnpu_acl_release_locked(dev, buf);
        return;
    case VNPU_POLICY_CACHING:
        vnpu_caching_release_locked(dev, buf);
        return;
    case VNPU_POLICY_ARENA:
        vnpu_arena_release_locked(dev, buf);
        return;
    case VNPU_POLICY_BUDGET:
        break;
    }
    dev->used -= (uint64_t)buf->size;
}

static bool exceeds(const struct vnpu_device *dev, uint64_t used) {
    return dev->reserved > dev->profile.capacity || used > dev->profile.capacity - dev->reserved;
}

bool vnpu_policy_over_locked(struct vnpu_device *dev) {
    switch (dev->profile.policy) {
    case VNPU_POLICY_ACL:
        return exceeds(dev, dev->pol.used_normal);
    case VNPU_POLICY_CACHING:
        return vnpu_caching_over_locked(dev);
    case VNPU_POLICY_ARENA:
        return exceeds(dev, vnpu_arena_used_locked(dev));
    case VNPU_POLICY_BUDGET:
        break;
    }
    return exceeds(dev, dev->used);
}
