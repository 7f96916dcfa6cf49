/* Policy `arena`: TensorFlow Lite Micro's single arena, restated in docs/vnpu.md §6.
 * One arena of `capacity` bytes (its end rounded down to 16); alignment 16 everywhere. Model
 * weights and executables are persistent: they take the tail, which grows down from the end
 * (each block moves it down by its size, rounded down to 16). Cache and auxiliary buffers take
 * the head, which grows up from the start in blocks rounded up to 16. Both ends are stacks: a
 * released block becomes a hole, reclaimed only once it is at the top of its stack. */
#include <errno.h>
#include <stdlib.h>

#include "vnpu_internal.h"

#define ARENA_ALIGN 16u

static uint64_t arena_end(const struct vnpu_device *dev) { return dev->profile.capacity / ARENA_ALIGN * ARENA_ALIGN; }

static uint64_t head(const struct vnpu_device *dev) {
    const struct vnpu_policy_state *p = &dev->pol;
    uint64_t h = 0;
    for (size_t i = 0; i < p->nblocks; i++)
        if (p->blocks[i].region == VNPU_REGION_HEAD && p->blocks[i].start + p->blocks[i].charge > h)
            h = p->blocks[i].start + p->blocks[i].charge;
    return h;
}

static uint64_t tail(const struct vnpu_device *dev) {
    const struct vnpu_policy_state *p = &dev->pol;
    uint64_t t = arena_end(dev);
    for (size_t i = 0; i < p->nblocks; i++)
        if (p->blocks[i].region == VNPU_REGION_TAIL && p->blocks[i].start < t)
            t = p->blocks[i].start;
    return t;
}

uint64_t vnpu_arena_used_locked(const struct vnpu_device *dev) { return head(dev) + arena_end(dev) - tail(dev); }

static bool persistent(int8_t type) {
    return type == ANPUBUFFER_TYPE_MODEL_WEIGHTS || type == ANPUBUFFER_TYPE_MODEL_EXECUTABLE;
}

int vnpu_arena_place_locked(struct vnpu_device *dev, int64_t size, int8_t type, ANpuBuffer *buf) {
    uint64_t h = head(dev), t = tail(dev), used = h + arena_end(dev) - t, cap = dev->profile.capacity;
    uint64_t start, charge;
    int region;
    if (persistent(type)) {
        if ((uint64_t)size > t)
            return ENOMEM;
        start = (t - (uint64_t)size) / ARENA_ALIGN * ARENA_ALIGN;
        if (start < h)
            return ENOMEM;
        charge = t - start;
        region = VNPU_REGION_TAIL;
    } else {
        if ((uint64_t)size > t - h)
            return ENOMEM;
        charge = ((uint64_t)size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        if (charge > t - h)
            return ENOMEM;
        start = h;
        region = VNPU_REGION_HEAD;
    }
    if (dev->reserved > cap || used > cap - dev->reserved || charge > cap - dev->reserved - used)
        return ENOMEM;
    if (buf == NULL)
        return 0;
    struct vnpu_policy_state *p = &dev->pol;
    if (p->nblocks == p->cap_blocks) {
        size_t n = p->cap_blocks ? p->cap_blocks * 2 : 16;
        struct vnpu_block *grown = realloc(p->blocks, n * sizeof *grown);
        if (grown == NULL)
            abort();
        p->blocks = grown;
        p->cap_blocks = n;
    }
    p->blocks[p->nblocks++] =
        (struct vnpu_block){.seq = buf->seq, .start = start, .charge = charge, .region = region, .hole = false};
    buf->pol_charge = charge;
    buf->pol_start = start;
    buf->pol_region = region;
    return 0;
}

void vnpu_arena_release_locked(struct vnpu_device *dev, ANpuBuffer *buf) {
    struct vnpu_policy_state *p = &dev->pol;
    for (size_t i = 0; i < p->nblocks; i++)
        if (p->blocks[i].seq == buf->seq)
            p->blocks[i].hole = true;
    bool again = true;
    while (again) { /* reclaim holes at the top of either stack */
        again = false;
        uint64_t h = head(dev), t = tail(dev);
        for (size_t i = 0; i < p->nblocks;) {
            const struct vnpu_block *b = &p->blocks[i];
            bool top = (b->region == VNPU_REGION_HEAD && b->start + b->charge == h) ||
                       (b->region == VNPU_REGION_TAIL && b->start == t);
            if (b->hole && top) {
                p->blocks[i] = p->blocks[--p->nblocks];
                again = true;
            } else {
                i++;
            }
        }
    }
}
