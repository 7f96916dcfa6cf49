/* Policy `caching`: ArrayFire's default memory manager, restated in docs/vnpu.md §6.
 * Sizes are rounded up to a 1024-byte step. A released block (freed and unmapped, or preempted)
 * goes to a free cache under its rounded size and still takes device memory. An allocation reuses
 * a cached block of exactly its rounded size; on a miss it takes new memory when
 * locked + cached + reserved + size fits, else it cleans the cache (also when it then fails) and
 * retries; if that is not enough the pressure turns into preemption of buffers less important than
 * the request (greater priority value), in victim order, when they free enough (the preempting
 * itself is done by vnpu_buffer_new.c: preemption releases blocks back into this policy). */
#include <errno.h>
#include <stdlib.h>

#include "vnpu_internal.h"

#define CACHING_STEP 1024u

static bool fits(const struct vnpu_device *dev, uint64_t used, uint64_t size) {
    uint64_t cap = dev->profile.capacity;
    return dev->reserved <= cap && used <= cap - dev->reserved && size <= cap - dev->reserved - used;
}

static void collect(struct vnpu_device *dev) {
    struct vnpu_policy_state *p = &dev->pol;
    p->ncache = 0;
    p->cached = 0;
}

static void take(struct vnpu_device *dev, ANpuBuffer *buf, uint64_t rounded) {
    dev->pol.locked += rounded;
    buf->pol_charge = rounded;
    buf->pol_region = VNPU_REGION_NORMAL;
}

/* Only called with a size that place accepted (not above UINT64_MAX - CACHING_STEP). */
static uint64_t rounded_size(int64_t size) { return ((uint64_t)size + CACHING_STEP - 1) / CACHING_STEP * CACHING_STEP; }

int vnpu_caching_place_locked(struct vnpu_device *dev, int64_t size, int32_t priority, ANpuBuffer *buf) {
    struct vnpu_policy_state *p = &dev->pol;
    if ((uint64_t)size > UINT64_MAX - CACHING_STEP)
        return ENOMEM;
    uint64_t rounded = rounded_size(size);
    for (size_t i = p->ncache; i-- > 0;) { /* most recently freed first */
        if (p->cache[i] != rounded)
            continue;
        if (buf != NULL) {
            p->cache[i] = p->cache[--p->ncache];
            p->cached -= rounded;
            take(dev, buf, rounded);
        }
        return 0;
    }
    if (fits(dev, p->locked + p->cached, rounded)) {
        if (buf != NULL)
            take(dev, buf, rounded);
        return 0;
    }
    collect(dev); /* garbage collection under pressure, before failing */
    if (fits(dev, p->locked, rounded)) {
        if (buf != NULL)
            take(dev, buf, rounded);
        return 0;
    }
    /* Pressure turns into preemption: only when the less important buffers free enough. */
    uint64_t need = p->locked + dev->reserved + rounded - dev->profile.capacity, avail = 0;
    for (ANpuBuffer *b = dev->buffers; b != NULL; b = b->next)
        if (vnpu_preemptable_locked(dev, b) && b->priority > priority && b->accounted)
            avail += b->pol_charge;
    if (avail < need)
        return ENOMEM;
    return buf == NULL ? 0 : VNPU_CACHING_MUST_PREEMPT;
}

bool vnpu_caching_fits_locked(const struct vnpu_device *dev, int64_t size) {
    return fits(dev, dev->pol.locked, rounded_size(size));
}

void vnpu_caching_take_after_preemption_locked(struct vnpu_device *dev, ANpuBuffer *buf) {
    collect(dev);
    take(dev, buf, rounded_size(buf->size));
}

void vnpu_caching_release_locked(struct vnpu_device *dev, ANpuBuffer *buf) {
    struct vnpu_policy_state *p = &dev->pol;
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

bool vnpu_caching_over_locked(struct vnpu_device *dev) {
    struct vnpu_policy_state *p = &dev->pol;
    if (!fits(dev, p->locked + p->cached, 0) && p->ncache > 0)
        collect(dev);
    return !fits(dev, p->locked, 0);
}
