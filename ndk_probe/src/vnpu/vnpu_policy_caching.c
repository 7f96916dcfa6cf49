/* Policy `caching`: ArrayFire's default memory manager (seed 003), restated in docs/vnpu.md §6.
 * Sizes are rounded up to a 1024-byte step. A released block (freed and unmapped, or preempted)
 * goes to a free cache under its rounded size and still takes device memory. An allocation reuses
 * a cached block of exactly its rounded size; on a miss it takes new memory when
 * locked + cached + reserved + size fits, else it cleans the cache (also when it then fails) and
 * retries; if that is not enough the pressure turns into preemption of buffers less important than
 * the request (greater priority value), in victim order, when they free enough. */
#include <errno.h>
#include <stdlib.h>

#include "vnpu_internal.h"

#define CACHING_STEP 1024u

static bool fits(uint64_t used, uint64_t size)
{
    struct vnpu_device *dev = vnpu_dev();
    uint64_t cap = dev->profile.capacity;
    return dev->reserved <= cap && used <= cap - dev->reserved && size <= cap - dev->reserved - used;
}

static void collect(void)
{
    struct vnpu_policy_state *p = &vnpu_dev()->pol;
    p->ncache = 0;
    p->cached = 0;
}

static void take(ANpuBuffer *buf, uint64_t rounded)
{
    vnpu_dev()->pol.locked += rounded;
    buf->pol_charge = rounded;
    buf->pol_region = VNPU_REGION_NORMAL;
}

int vnpu_caching_place_locked(int64_t size, int32_t priority, ANpuBuffer *buf)
{
    struct vnpu_device *dev = vnpu_dev();
    struct vnpu_policy_state *p = &dev->pol;
    if ((uint64_t)size > UINT64_MAX - CACHING_STEP)
        return ENOMEM;
    uint64_t rounded = ((uint64_t)size + CACHING_STEP - 1) / CACHING_STEP * CACHING_STEP;
    for (size_t i = p->ncache; i-- > 0;) { /* most recently freed first */
        if (p->cache[i] != rounded)
            continue;
        if (buf != NULL) {
            p->cache[i] = p->cache[--p->ncache];
            p->cached -= rounded;
            take(buf, rounded);
        }
        return 0;
    }
    if (fits(p->locked + p->cached, rounded)) {
        if (buf != NULL)
            take(buf, rounded);
        return 0;
    }
    collect(); /* garbage collection under pressure, before failing */
    if (fits(p->locked, rounded)) {
        if (buf != NULL)
            take(buf, rounded);
        return 0;
    }
    /* Pressure turns into preemption: only when the less important buffers free enough. */
    uint64_t need = p->locked + dev->reserved + rounded - dev->profile.capacity, avail = 0;
    for (ANpuBuffer *b = dev->buffers; b != NULL; b = b->next)
        if (vnpu_preemptable_locked(b) && b->priority > priority && b->accounted)
            avail += b->pol_charge;
    if (avail < need)
        return ENOMEM;
    if (buf == NULL)
        return 0;
    while (!fits(p->locked, rounded)) {
        ANpuBuffer *victim = vnpu_policy_victim_below_locked(priority);
        if (victim == NULL || vnpu_preempt_locked(victim) != 0)
            abort(); /* the sum above said they were enough: a vnpu bug */
    }
    collect();
    take(buf, rounded);
    return 0;
}

void vnpu_caching_release_locked(ANpuBuffer *buf)
{
    struct vnpu_policy_state *p = &vnpu_dev()->pol;
    if (p->ncache == p->cap_cache) {
        size_t n = p->cap_cache ? p->cap_cache * 2 : 16;
        uint64_t *grown = realloc(p->cache, n * sizeof *grown);
        if (grown == NULL)
            abort();
        p->cache = grown;
        p->cap_cache = n;
    }
    p->cache[p->ncache++] = buf->pol_charge;
    p->locked -= buf->pol_charge;
    p->cached += buf->pol_charge;
}

bool vnpu_caching_over_locked(void)
{
    struct vnpu_policy_state *p = &vnpu_dev()->pol;
    if (!fits(p->locked + p->cached, 0) && p->ncache > 0)
        collect();
    return !fits(p->locked, 0);
}
