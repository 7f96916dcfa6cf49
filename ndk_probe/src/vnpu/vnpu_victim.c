/* Who may be preempted and in which order: read by the policies (caching counts what preemption
 * could free), by preemption itself and by vnpu_control. Reads buffer state only, calls nobody. */
#include <errno.h>

#include "vnpu_internal.h"

int vnpu_preempt_error_locked(const struct vnpu_device *dev, const ANpuBuffer *buf) {
    if (buf->dead || !buf->user_ref || buf->preempted)
        return ENOENT;
    if (!vnpu_aosp(dev) && !buf->delivered)
        return ENOENT; /* not the user's yet */
    if (buf->nranges != 0)
        return EBUSY;
    if (!vnpu_aosp(dev) && buf->state == VNPU_LOADING)
        return EBUSY;
    return 0;
}

bool vnpu_preemptable_locked(const struct vnpu_device *dev, const ANpuBuffer *buf) {
    return vnpu_preempt_error_locked(dev, buf) == 0;
}

/* Lowest priority first: the numerically greatest priority value (Android's convention, as in
 * the NPU HAL: 0 is the most important). Ties: the oldest admission first. Only buffers of
 * region `region` (VNPU_REGION_NONE: any) whose priority value is greater than `above`. */
static ANpuBuffer *pick(const struct vnpu_device *dev, int region, int64_t above) {
    ANpuBuffer *victim = NULL;
    for (ANpuBuffer *b = dev->buffers; b != NULL; b = b->next) {
        if (!vnpu_preemptable_locked(dev, b) || (int64_t)b->priority <= above)
            continue;
        if (region != VNPU_REGION_NONE && b->pol_region != region)
            continue;
        if (victim == NULL || b->priority > victim->priority ||
            (b->priority == victim->priority && b->seq < victim->seq))
            victim = b;
    }
    return victim;
}

ANpuBuffer *vnpu_victim_lowest_locked(const struct vnpu_device *dev) { return pick(dev, VNPU_REGION_NONE, INT64_MIN); }

ANpuBuffer *vnpu_victim_pressure_locked(const struct vnpu_device *dev) {
    return pick(dev, dev->profile.policy == VNPU_POLICY_ACL ? VNPU_REGION_NORMAL : VNPU_REGION_NONE, INT64_MIN);
}

ANpuBuffer *vnpu_victim_below_locked(const struct vnpu_device *dev, int32_t prio) {
    return pick(dev, VNPU_REGION_NONE, prio);
}
