/* The allocation policy (docs/vnpu.md §6). `budget`: a buffer is accounted from its admission
 * inside ANpuManager_allocAsync until it is preempted, or freed with no mapping left (else at its
 * last unmap), or its load-on-alloc fails; a request is admitted when
 * used + reserved + size <= capacity, where reserved is the pressure=<bytes> reservation.
 * `acl`, `caching` and `arena` keep their arithmetic in vnpu_policy_<name>.c; this file
 * dispatches to them and holds the victim order they share.
 * Deciding inside allocAsync (not later on the worker) keeps the outcome a function of the
 * order of API calls, which the reference model can replay. */
#include <errno.h>

#include "vnpu_internal.h"

static enum vnpu_policy_kind kind(void)
{
    return vnpu_dev()->profile.policy;
}

int vnpu_policy_admit_locked(const ANpuManager_AllocRequest *r)
{
    struct vnpu_device *dev = vnpu_dev();
    if (r->size < 0)
        return ENOMEM;
    switch (kind()) {
    case VNPU_POLICY_ACL:
        return vnpu_acl_place_locked(r->size, NULL);
    case VNPU_POLICY_CACHING:
        return vnpu_caching_place_locked(r->size, r->priority, NULL);
    case VNPU_POLICY_ARENA:
        return vnpu_arena_place_locked(r->size, r->type, NULL);
    case VNPU_POLICY_BUDGET:
        if (vnpu_aosp())
            return 0; /* aosp-2026: the service has no budget (facts §5, ALLOC-SVC-3) */
        break;
    }
    uint64_t taken = dev->used + dev->reserved;
    if (taken > dev->profile.capacity || (uint64_t)r->size > dev->profile.capacity - taken)
        return ENOMEM;
    return 0;
}

void vnpu_policy_account_locked(ANpuBuffer *buf)
{
    buf->accounted = true;
    switch (kind()) {
    case VNPU_POLICY_ACL:
        vnpu_acl_place_locked(buf->size, buf);
        return;
    case VNPU_POLICY_CACHING:
        vnpu_caching_place_locked(buf->size, buf->priority, buf);
        return;
    case VNPU_POLICY_ARENA:
        vnpu_arena_place_locked(buf->size, buf->type, buf);
        return;
    case VNPU_POLICY_BUDGET:
        break;
    }
    vnpu_dev()->used += (uint64_t)buf->size;
}

void vnpu_policy_release_locked(ANpuBuffer *buf)
{
    if (!buf->accounted)
        return;
    buf->accounted = false;
    switch (kind()) {
    case VNPU_POLICY_ACL:
        vnpu_acl_release_locked(buf);
        return;
    case VNPU_POLICY_CACHING:
        vnpu_caching_release_locked(buf);
        return;
    case VNPU_POLICY_ARENA:
        vnpu_arena_release_locked(buf);
        return;
    case VNPU_POLICY_BUDGET:
        break;
    }
    vnpu_dev()->used -= (uint64_t)buf->size;
}

static bool exceeds(uint64_t used)
{
    struct vnpu_device *dev = vnpu_dev();
    return dev->reserved > dev->profile.capacity || used > dev->profile.capacity - dev->reserved;
}

bool vnpu_policy_over_locked(void)
{
    struct vnpu_device *dev = vnpu_dev();
    switch (kind()) {
    case VNPU_POLICY_ACL:
        return exceeds(dev->pol.used_normal);
    case VNPU_POLICY_CACHING:
        return vnpu_caching_over_locked();
    case VNPU_POLICY_ARENA:
        return exceeds(vnpu_arena_used_locked());
    case VNPU_POLICY_BUDGET:
        break;
    }
    return exceeds(dev->used);
}

/* Lowest priority first: the numerically greatest priority value (Android's convention, as in
 * the NPU HAL: 0 is the most important). Ties: the oldest admission first. Only buffers of
 * region `region` (VNPU_REGION_NONE: any) whose priority value is greater than `above`. */
static ANpuBuffer *pick(int region, int64_t above)
{
    ANpuBuffer *victim = NULL;
    for (ANpuBuffer *b = vnpu_dev()->buffers; b != NULL; b = b->next) {
        if (!vnpu_preemptable_locked(b) || (int64_t)b->priority <= above)
            continue;
        if (region != VNPU_REGION_NONE && b->pol_region != region)
            continue;
        if (victim == NULL || b->priority > victim->priority ||
            (b->priority == victim->priority && b->seq < victim->seq))
            victim = b;
    }
    return victim;
}

ANpuBuffer *vnpu_policy_victim_locked(void)
{
    return pick(VNPU_REGION_NONE, INT64_MIN);
}

ANpuBuffer *vnpu_policy_pressure_victim_locked(void)
{
    return pick(kind() == VNPU_POLICY_ACL ? VNPU_REGION_NORMAL : VNPU_REGION_NONE, INT64_MIN);
}

ANpuBuffer *vnpu_policy_victim_below_locked(int32_t prio)
{
    return pick(VNPU_REGION_NONE, prio);
}
