/* Mapping bookkeeping: the page ranges each buffer has mapped, so that "mapped" is known
 * (preemption and loadAsync must respect it) and the struct outlives ANpuBuffer_free until the
 * last range is unmapped. Partial unmaps split ranges, like munmap. */
#include <stdlib.h>
#include <unistd.h>

#include "vnpu_internal.h"

uintptr_t vnpu_page_size(void) { return (uintptr_t)sysconf(_SC_PAGESIZE); }

uintptr_t vnpu_page_round_up(uintptr_t n) {
    uintptr_t p = vnpu_page_size();
    return (n + p - 1) & ~(p - 1);
}

int vnpu_maps_add_locked(ANpuBuffer *buf, uintptr_t start, uintptr_t end) {
    if (buf->nranges == buf->cap_ranges) {
        size_t cap = buf->cap_ranges != 0 ? buf->cap_ranges * 2 : 4;
        struct vnpu_range *r = realloc(buf->ranges, cap * sizeof *r);
        if (r == NULL)
            return -1;
        buf->ranges = r;
        buf->cap_ranges = cap;
    }
    buf->ranges[buf->nranges].start = start;
    buf->ranges[buf->nranges].end = end;
    buf->nranges++;
    return 0;
}

bool vnpu_maps_covers_locked(const ANpuBuffer *buf, uintptr_t start, uintptr_t end) {
    /* A buffer's ranges never overlap, so covered bytes add up. */
    uintptr_t covered = 0;
    for (size_t i = 0; i < buf->nranges; i++) {
        uintptr_t s = buf->ranges[i].start > start ? buf->ranges[i].start : start;
        uintptr_t e = buf->ranges[i].end < end ? buf->ranges[i].end : end;
        if (s < e)
            covered += e - s;
    }
    return covered == end - start;
}

static void forget(ANpuBuffer *buf, uintptr_t start, uintptr_t end) {
    for (size_t i = 0; i < buf->nranges;) {
        struct vnpu_range r = buf->ranges[i];
        if (r.end <= start || r.start >= end) {
            i++;
            continue;
        }
        /* Remove r, then put back what lies outside [start, end). */
        buf->ranges[i] = buf->ranges[--buf->nranges];
        if (r.start < start && vnpu_maps_add_locked(buf, r.start, start) != 0)
            abort();
        if (r.end > end && vnpu_maps_add_locked(buf, end, r.end) != 0)
            abort();
        /* Pieces put back lie outside [start, end): rescanning them is harmless. */
    }
}

void vnpu_maps_forget_all_locked(struct vnpu_device *dev, uintptr_t start, uintptr_t end, ANpuBuffer **reap) {
    for (ANpuBuffer *b = dev->buffers, *next; b != NULL; b = next) {
        next = b->next;
        if (b->nranges == 0)
            continue;
        forget(b, start, end);
        vnpu_buffer_settle_locked(dev, b, reap);
    }
}
