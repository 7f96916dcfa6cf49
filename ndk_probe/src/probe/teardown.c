/*
 * Teardown (docs/formats.md §4): settle, release everything the scenario still holds, settle the
 * deleters, await the handed-over descriptors closed. Ownership rules (every buffer freed, every handed cookie deleted
 * once) can only be judged once the probe has given everything back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "ops.h"
#include "scenario.h"
#include "trace.h"

/* ns left until deadline_ns, 0 once it has passed. */
static uint64_t left_ns(uint64_t deadline_ns) {
    uint64_t now = probe_now_ns();
    return deadline_ns > now ? deadline_ns - now : 0;
}

static void settle_event(const char *what, uint64_t expected, uint64_t got, bool reached) {
    struct jbuf ev;
    trace_event_open(&ev, NPUCONF_EV_SETTLE);
    jb_str(&ev, "what", what);
    jb_u64(&ev, "expected", expected);
    jb_u64(&ev, "got", got);
    jb_bool(&ev, "reached", reached);
    trace_emit(&ev);
    jb_free(&ev);
}

static void settle(const char *what, enum trace_counter c, uint64_t expected, uint64_t deadline_ns) {
    uint64_t got;
    bool reached = trace_wait(c, expected, left_ns(deadline_ns), &got);
    settle_event(what, expected, got, reached);
}

/* Waits for the onPreempts commanded preemptions owe (trace_wait_preempts); same event shape. */
static void settle_preempts(uint64_t deadline_ns) {
    uint64_t expected;
    uint64_t got;
    bool reached = trace_wait_preempts(left_ns(deadline_ns), &expected, &got);
    settle_event("preempt", expected, got, reached);
}

static void unmap_mapping(struct probe_ctx *ctx, unsigned slot, struct probe_map_slot *m) {
    /* A successful unmap removes ranges[i]; a failing one is stepped over. */
    size_t i = 0;
    while (i < m->nranges) {
        struct probe_map_range r = m->ranges[i];
        struct jbuf args;
        jb_init(&args);
        jb_raw(&args, "{");
        ops_slot_json(&args, "map", ARG_MAP, slot);
        jb_u64(&args, "offset", r.off);
        jb_u64(&args, "length", r.len);
        jb_raw(&args, "}");
        struct op_result res;
        size_t step = ops_teardown_begin(ctx, OP_BUF_UNMAP, &args, &res);
        size_t before = m->nranges;
        map_unmap_range(m, ctx->api, r.off, r.len, &res);
        ops_ret_event(step, OP_BUF_UNMAP, &res);
        if (m->nranges >= before) {
            i++;
        }
    }
}

static void unmap_all(struct probe_ctx *ctx) {
    for (size_t i = 0; i < ctx->nsuperseded; i++) {
        unmap_mapping(ctx, ctx->superseded[i].slot, &ctx->superseded[i].map);
    }
    for (unsigned slot = 0; slot < PROBE_SLOTS; slot++) {
        unmap_mapping(ctx, slot, &ctx->map[slot]);
    }
}

static void free_buffers(struct probe_ctx *ctx) {
    size_t n;
    size_t *unfreed = trace_unfreed_successes(&n);
    for (size_t i = 0; i < n; i++) {
        ops_free_buf(ctx->api, ctx->next_step++, true, unfreed[i], trace_buf_ptr(unfreed[i]));
    }
    free(unfreed);
}

/* Each request still live is freed by the program's own req_free op, marked teardown. */
static void free_requests(struct probe_ctx *ctx) {
    for (unsigned slot = 0; slot < PROBE_SLOTS; slot++) {
        if (ctx->req[slot].live) {
            struct probe_step st = {.op = OP_REQ_FREE, .thread = -1};
            st.args[0] = (struct probe_arg){.kind = ARG_REQ, .v.slot = slot};
            ops_run(ctx, &st, ctx->next_step++, true);
        }
    }
}

void scenario_teardown(struct probe_ctx *ctx) {
    trace_release_holds(); /* the steps are done: a held callback returns now, before the settles */
    uint64_t budget = probe_scaled_ns(ctx->opt->settle_ms, ctx->opt->timeout_multiplier);
    uint64_t deadline = probe_now_ns() + budget;
    settle("alloc", TC_ALLOC, trace_count(TC_SUB_ALLOC), deadline);
    settle("load", TC_LOAD, trace_count(TC_SUB_LOAD), deadline);
    settle_preempts(deadline);

    /* From here on callbacks only record: no cb_action may race the cleanup below. */
    trace_disarm_all();
    unmap_all(ctx);
    free_buffers(ctx);
    free_requests(ctx);

    uint64_t last = probe_now_ns() + budget;
    settle("deleters", TC_DELETER, trace_count(TC_HANDED), last);
    /* Nothing needs a handed-over descriptor any more: each must be closed (loading.fd_check). */
    file_await_closed_all(ctx, ctx->opt->settle_ms);
    /* A callback that has started also writes its cb_return before `end` (within the same budget). */
    trace_wait_callbacks(left_ns(last));
}
