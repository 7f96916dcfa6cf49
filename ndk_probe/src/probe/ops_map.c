/* Mappings: ANpuBuffer_map/unmap and the probe's reads and writes through them. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "ops.h"
#include "pattern.h"
#include "trace.h"

static void map_identify(const struct probe_ctx *ctx, struct probe_map_slot *m);

void op_buf_map(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    unsigned mslot = st->args[0].v.slot, bslot = st->args[1].v.slot;
    size_t index = op_buf(ctx, bslot);
    if (index == TRACE_NO_BUF) {
        op_skip(res, "b%u unbound", bslot);
        return;
    }
    uint64_t length = st->args[2].v.u64;
    int64_t offset = st->args[5].v.i64;
    if (!op_fits_size(res, "length", length)) {
        return;
    }
    if ((int64_t)(off_t)offset != offset) {
        /* 32-bit off_t: a truncated offset would test another call than the scenario's. */
        op_skip(res, "offset %" PRId64 " does not fit off_t", offset);
        return;
    }
    ANpuBuffer *buf = trace_buf_ptr(index);
    void *addr;
    API_CALL(res, addr = ctx->api->ANpuBuffer_map(buf, NULL, (size_t)length, (int)st->args[3].v.i64,
                                                  (int)st->args[4].v.i64, (off_t)offset));
    res->has_ret = true;
    if (addr == MAP_FAILED) {
        res->ret = -1;
        res->failed = true;
        return;
    }
    res->ret = 0;
    struct probe_map_slot *m = &ctx->map[mslot];
    pthread_mutex_lock(&ctx->mu);
    if (m->nranges > 0 && ctx->nsuperseded < PROBE_SUPERSEDED_MAPS) {
        ctx->superseded[ctx->nsuperseded++] = (struct probe_superseded_map){mslot, *m};
    }
    pthread_mutex_unlock(&ctx->mu);
    *m = (struct probe_map_slot){.base = addr, .len = (size_t)length, .buf_off = offset, .buf = index};
    if (length > 0) {
        m->ranges[0] = (struct probe_map_range){0, (size_t)length};
        m->nranges = 1;
        map_identify(ctx, m);
    }
}

/* Removes [a, b) from the slot's still-mapped ranges. */
static void ranges_remove(struct probe_map_slot *m, size_t a, size_t b) {
    struct probe_map_range out[PROBE_MAP_RANGES];
    size_t n = 0;
    for (size_t i = 0; i < m->nranges; i++) {
        size_t lo = m->ranges[i].off, hi = lo + m->ranges[i].len;
        /* A split beyond the table's capacity forgets the piece: teardown then leaves it mapped. */
        if (lo < a && n < PROBE_MAP_RANGES) {
            out[n++] = (struct probe_map_range){lo, (hi < a ? hi : a) - lo};
        }
        if (hi > b && n < PROBE_MAP_RANGES) {
            size_t start = lo > b ? lo : b;
            out[n++] = (struct probe_map_range){start, hi - start};
        }
    }
    for (size_t i = 0; i < n; i++) {
        m->ranges[i] = out[i];
    }
    m->nranges = n;
}

void map_unmap_range(struct probe_map_slot *m, const struct probe_api *api, size_t off, size_t len,
                     struct op_result *res) {
    ANpuBuffer *buf = trace_buf_ptr(m->buf);
    int ret;
    API_CALL(res, ret = api->ANpuBuffer_unmap(buf, m->base + off, len));
    op_int_result(res, ret);
    if (ret == 0) {
        /* Like munmap(), the implementation unmaps whole pages: the length is rounded up. */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t end = len > SIZE_MAX - off - (page - 1) ? SIZE_MAX : (off + len + page - 1) / page * page;
        ranges_remove(m, off, end);
    }
}

void op_buf_unmap(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    unsigned slot = st->args[0].v.slot;
    struct probe_map_slot *m = &ctx->map[slot];
    uint64_t off = st->args[1].v.u64, len = st->args[2].v.u64;
    if (m->nranges == 0) {
        op_skip(res, "m%u not mapped", slot);
        return;
    }
    if (!op_fits_size(res, "offset", off) || !op_fits_size(res, "length", len)) {
        return;
    }
    if ((size_t)off > SIZE_MAX - (size_t)len) {
        op_skip(res, "offset + length overflows size_t");
        return;
    }
    size_t a = (size_t)off, l = (size_t)len;
    if (l == 0) {
        /* Length 0: whatever is still mapped from `offset` to the end of the mapping. */
        size_t lo = SIZE_MAX, hi = 0;
        for (size_t i = 0; i < m->nranges; i++) {
            size_t r_lo = m->ranges[i].off, r_hi = r_lo + m->ranges[i].len;
            lo = r_lo < lo ? r_lo : lo;
            hi = r_hi > hi ? r_hi : hi;
        }
        a = a > lo ? a : lo;
        if (a >= hi) {
            op_skip(res, "m%u has nothing mapped from offset %zu", slot, (size_t)off);
            return;
        }
        l = hi - a;
    }
    map_unmap_range(m, ctx->api, a, l, res);
}

/* The mapped bytes [off, off+len) of m<slot>, or NULL (op skipped) when not all mapped. */
static volatile unsigned char *map_span(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res,
                                        size_t *len_out) {
    unsigned slot = st->args[0].v.slot;
    const struct probe_map_slot *m = &ctx->map[slot];
    uint64_t off = st->args[1].v.u64, len = st->args[2].v.u64;
    if (!op_fits_size(res, "offset", off) || !op_fits_size(res, "length", len)) {
        return NULL;
    }
    for (size_t i = 0; i < m->nranges; i++) {
        const struct probe_map_range *r = &m->ranges[i];
        if (off >= r->off && off - r->off <= r->len && len <= r->len - (off - r->off)) {
            *len_out = (size_t)len;
            return m->base + off;
        }
    }
    op_skip(res, "m%u is not mapped at [%" PRIu64 ", +%" PRIu64 ")", slot, off, len);
    return NULL;
}

void op_map_write(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t len;
    volatile unsigned char *p = map_span(ctx, st, res, &len);
    if (p == NULL) {
        return;
    }
    uint64_t seed = st->args[3].v.u64;
    for (size_t k = 0; k < len; k++) {
        p[k] = pattern_byte(seed, k);
    }
    op_int_result(res, 0);
}

void op_map_read(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t len;
    volatile unsigned char *p = map_span(ctx, st, res, &len);
    if (p == NULL) {
        return;
    }
    uint64_t h = fnv1a64(FNV1A64_INIT, p, len);
    op_int_result(res, 0);
    char digest[17];
    snprintf(digest, sizeof digest, "%016" PRIx64, h);
    jb_str(&res->extra, "digest", digest);
}

/* One line of /proc/self/maps: [start, end), protection bits (vocabulary prot_bits), file offset, file. */
struct maps_line {
    uintptr_t start, end;
    unsigned prot;
    unsigned long long off;
    unsigned dev_major, dev_minor;
    unsigned long inode;
};

static bool maps_parse(const char *text, struct maps_line *l) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(text, "%lx-%lx %7s %llx %x:%x %lu", &start, &end, perms, &l->off, &l->dev_major, &l->dev_minor,
               &l->inode) != 7) {
        return false;
    }
    l->start = (uintptr_t)start;
    l->end = (uintptr_t)end;
    l->prot = (perms[0] == 'r' ? NPUCONF_PROT_READ : 0u) | (perms[1] == 'w' ? NPUCONF_PROT_WRITE : 0u) |
              (perms[2] == 'x' ? NPUCONF_PROT_EXEC : 0u);
    return true;
}

/* The start of the page holding `address`. */
static uintptr_t page_down(uintptr_t address) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    return address / page * page;
}

/* The pages holding [start, start + len): [*lo, *hi). */
static void page_span(uintptr_t start, uintptr_t len, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    *lo = page_down(start);
    *hi = (start + len + page - 1) / page * page;
}

/* The process's memory map for reading, or NULL with the step's result set to -1 and errno. */
static FILE *open_own_maps(struct op_result *res) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        op_int_result(res, -1);
        res->err = errno;
    }
    return f;
}

/* Whether line `l` continues the object mapped at `base` (`ref`): same file, offsets that follow. */
static bool maps_same_object(const struct maps_line *l, const struct maps_line *ref, uintptr_t base) {
    unsigned long long base_off = ref->off + (unsigned long long)(base - ref->start);
    return l->dev_major == ref->dev_major && l->dev_minor == ref->dev_minor && l->inode == ref->inode &&
           l->off - base_off == (unsigned long long)(l->start - base);
}

void op_map_prot(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t len;
    volatile unsigned char *p = map_span(ctx, st, res, &len);
    if (p == NULL) {
        return;
    }
    if (len == 0) {
        op_skip(res, "length 0");
        return;
    }
    const struct probe_map_slot *m = &ctx->map[st->args[0].v.slot];
    uintptr_t base = page_down((uintptr_t)m->base), lo, hi;
    page_span((uintptr_t)p, len, &lo, &hi);
    FILE *f = open_own_maps(res);
    if (f == NULL) {
        return;
    }
    /* The object the mapping showed when it was made; else the line holding `base` (the lines are sorted by
     * address: it comes before those of [lo, hi)), which a scenario that unmapped the first pages has not. */
    char text[4352];
    struct maps_line ref = {0}, l;
    bool have_ref = m->identified, mapped = true;
    if (have_ref) {
        ref = (struct maps_line){
            .start = base, .off = m->base_off, .dev_major = m->dev_major, .dev_minor = m->dev_minor, .inode = m->inode};
    }
    unsigned all = NPUCONF_PROT_READ | NPUCONF_PROT_WRITE | NPUCONF_PROT_EXEC, any = 0;
    uintptr_t pos = lo;
    while (fgets(text, sizeof text, f) != NULL) {
        if (!maps_parse(text, &l)) {
            continue;
        }
        if (!have_ref && l.start <= base && base < l.end) {
            ref = l;
            have_ref = true;
        }
        if (l.end <= pos || l.start >= hi || pos >= hi) {
            continue;
        }
        if (!have_ref || l.start > pos || !maps_same_object(&l, &ref, base)) {
            mapped = false;
            break;
        }
        all &= l.prot;
        any |= l.prot;
        pos = l.end;
    }
    fclose(f);
    if (pos < hi) {
        mapped = false;
    }
    op_int_result(res, 0);
    jb_bool(&res->extra, "mapped", mapped);
    jb_u64(&res->extra, "prot_all", all & any);
    jb_u64(&res->extra, "prot_any", any);
}

/* Whether the scenario has a step `op`: the mapping identity map_gone and map_prot need costs a read of
 * /proc/self/maps per map, paid only by the scenarios that look. */
static bool scenario_has(const struct probe_scenario *sc, enum npuconf_op op) {
    for (size_t i = 0; sc != NULL && i < sc->nsteps; i++) {
        if (sc->steps[i].op == op) {
            return true;
        }
    }
    return false;
}

/* The file offset line `l` maps at `base` (extended past its start when `base` lies before it), or
 * ULLONG_MAX when that would be before the file's start. */
static unsigned long long offset_at(const struct maps_line *l, uintptr_t base) {
    if (l->start <= base) {
        return l->off + (unsigned long long)(base - l->start);
    }
    unsigned long long ahead = (unsigned long long)(l->start - base);
    return l->off >= ahead ? l->off - ahead : ULLONG_MAX;
}

static void map_identify(const struct probe_ctx *ctx, struct probe_map_slot *m) {
    if (!scenario_has(ctx->sc, OP_MAP_GONE) && !scenario_has(ctx->sc, OP_MAP_PROT)) {
        return;
    }
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        return;
    }
    char text[4352];
    struct maps_line l;
    uintptr_t base = (uintptr_t)m->base;
    while (fgets(text, sizeof text, f) != NULL) {
        if (maps_parse(text, &l) && l.start <= base && base < l.end) {
            /* Anonymous memory has no identity another mapping could not share: nothing to look for. */
            m->identified = l.inode != 0;
            m->dev_major = l.dev_major;
            m->dev_minor = l.dev_minor;
            m->inode = l.inode;
            m->base_off = offset_at(&l, base);
            break;
        }
    }
    fclose(f);
}

void op_map_gone(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    unsigned slot = st->args[0].v.slot;
    const struct probe_map_slot *m = &ctx->map[slot];
    uint64_t off = st->args[1].v.u64, len = st->args[2].v.u64;
    if (!op_fits_size(res, "offset", off) || !op_fits_size(res, "length", len)) {
        return;
    }
    if (m->base == NULL || len == 0 || off > m->len || len > m->len - off) {
        op_skip(res, "m%u was never mapped at [%" PRIu64 ", +%" PRIu64 ")", slot, off, len);
        return;
    }
    for (size_t i = 0; i < m->nranges; i++) {
        const struct probe_map_range *r = &m->ranges[i];
        if (r->off < off + len && off < r->off + r->len) {
            op_skip(res, "m%u still maps part of [%" PRIu64 ", +%" PRIu64 ")", slot, off, len);
            return;
        }
    }
    if (!m->identified) {
        op_skip(res, "m%u showed no file object when it was made", slot);
        return;
    }
    uintptr_t base = (uintptr_t)m->base, lo, hi;
    page_span(base + off, len, &lo, &hi);
    FILE *f = open_own_maps(res);
    if (f == NULL) {
        return;
    }
    /* A page still mapped with the object and file offset it had: the unmap left it in place. */
    char text[4352];
    struct maps_line l;
    bool mapped = false;
    while (!mapped && fgets(text, sizeof text, f) != NULL) {
        if (!maps_parse(text, &l) || l.end <= lo || l.start >= hi) {
            continue;
        }
        mapped = l.dev_major == m->dev_major && l.dev_minor == m->dev_minor && l.inode == m->inode &&
                 offset_at(&l, base) == m->base_off;
    }
    fclose(f);
    op_int_result(res, 0);
    jb_bool(&res->extra, "mapped", mapped);
}
