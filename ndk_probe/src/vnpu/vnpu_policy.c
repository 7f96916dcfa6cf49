/* The allocation policy. Only `budget` exists: a buffer is accounted from its admission inside
 * ANpuManager_allocAsync until it is preempted, or freed with no mapping left (else at its last
 * unmap), or its load-on-alloc fails; a request is admitted when
 * used + reserved + size <= capacity, where reserved is the pressure=<bytes> reservation.
 * Deciding inside allocAsync (not later on the worker) keeps the outcome a function of the
 * order of API calls, which the reference model can replay. */
#include <errno.h>

#include "vnpu_internal.h"

int vnpu_policy_admit_locked(int64_t size)
{
    struct vnpu_device *dev = vnpu_dev();
    uint64_t taken = dev->used + dev->reserved;
    if (size < 0 || taken > dev->profile.capacity || (uint64_t)size > dev->profile.capacity - taken)
        return ENOMEM;
    return 0;
}

void vnpu_policy_account_locked(ANpuBuffer *buf)
{
    vnpu_dev()->used += (uint64_t)buf->size;
    buf->accounted = true;
}

void vnpu_policy_release_locked(ANpuBuffer *buf)
{
    if (!buf->accounted)
        return;
    vnpu_dev()->used -= (uint64_t)buf->size;
    buf->accounted = false;
}

bool vnpu_policy_over_locked(void)
{
    struct vnpu_device *dev = vnpu_dev();
    return dev->reserved > dev->profile.capacity || dev->used > dev->profile.capacity - dev->reserved;
}

/* Lowest priority first: the numerically greatest priority value (Android's convention, as in
 * the NPU HAL: 0 is the most important). Ties: the oldest admission first. */
ANpuBuffer *vnpu_policy_victim_locked(void)
{
    ANpuBuffer *victim = NULL;
    for (ANpuBuffer *b = vnpu_dev()->buffers; b != NULL; b = b->next) {
        if (!vnpu_preemptable_locked(b))
            continue;
        if (victim == NULL || b->priority > victim->priority ||
            (b->priority == victim->priority && b->seq < victim->seq))
            victim = b;
    }
    return victim;
}
