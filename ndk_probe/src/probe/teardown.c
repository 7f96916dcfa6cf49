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

static void settle(const char *what, enum trace_counter c, uint64_t expected, uint64_t deadline_ns) {
    uint64_t now = probe_now_ns();
    uint64_t got;
    bool reached = trace_wait(c, expected, deadline_ns > now ? deadline_ns - now : 0, &got);
    struct jbuf ev;
    jb_init(&ev);
    jb_raw(&ev, "{\"ev\":\"settle\"");
    jb_str(&ev, "what", what);
    jb_u64(&ev, "expected", expected);
    jb_u64(&ev, "got", got);
    jb_bool(&ev, "reached", reached);
    trace_emit(&ev);
    jb_free(&ev);
}

/* Waits for the onPreempts commanded preemptions owe (trace_wait_preempts); same event shape. */
static void settle_preempts(uint64_t deadline_ns) {
    uint64_t now = probe_now_ns();
    uint64_t expected;
    uint64_t got;
    bool reached = trace_wait_preempts(deadline_ns > now ? deadline_ns - now : 0, &expected, &got);
    struct jbuf ev;
    jb_init(&ev);
    jb_raw(&ev, "{\"ev\":\"settle\"");
    jb_str(&ev, "what", "preempt");
    jb_u64(&ev, "expected", expected);
    jb_u64(&ev, "got", got);
    jb_bool(&ev, "reached", reached);
    trace_emit(&ev);
    jb_free(&ev);
}

static void unmap_mapping(struct probe_ctx *ctx, unsigned slot, struct probe_map_slot *m) {
    /* A successful unmap removes ranges[i]; a failing one is stepped over. */
    size_t i = 0;
    while (i < m->nranges) {
        struct probe_map_range r = m->ranges[i];
        struct jbuf args;
        jb_init(&args);
        char name[8];
        snprintf(name, sizeof name, "m%u", slot);
        jb_raw(&args, "{");
        jb_str(&args, "map", name);
        jb_u64(&args, "offset", r.off);
        jb_u64(&args, "length", r.len);
        jb_raw(&args, "}");
        size_t step = ctx->next_step++;
        ops_call_event(step, OP_BUF_UNMAP, &args, true);
        jb_free(&args);
        struct op_result res;
        ops_result_init(&res);
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
        char id[24];
        trace_buf_id(unfreed[i], id);
        struct jbuf args;
        jb_init(&args);
        jb_raw(&args, "{");
        jb_open(&args, "bufs", '[');
        jb_str(&args, NULL, id);
        jb_close(&args, ']');
        jb_raw(&args, "}");
        size_t step = ctx->next_step++;
        ops_call_event(step, OP_BUF_FREE, &args, true);
        jb_free(&args);
        struct op_result res;
        ops_result_init(&res);
        ANpuBuffer *buf = trace_buf_ptr(unfreed[i]);
        int ret;
        API_CALL(&res, ret = ctx->api->ANpuBuffer_free(&buf, 1));
        op_int_result(&res, ret);
        if (ret == 0) {
            trace_buf_retire(unfreed[i]);
        }
        ops_ret_event(step, OP_BUF_FREE, &res);
    }
    free(unfreed);
}

static void free_requests(struct probe_ctx *ctx) {
    for (unsigned slot = 0; slot < PROBE_SLOTS; slot++) {
        if (!ctx->req[slot].live) {
            continue;
        }
        struct jbuf args;
        jb_init(&args);
        char name[8];
        snprintf(name, sizeof name, "r%u", slot);
        jb_raw(&args, "{");
        jb_str(&args, "req", name);
        jb_raw(&args, "}");
        size_t step = ctx->next_step++;
        ops_call_event(step, OP_REQ_FREE, &args, true);
        jb_free(&args);
        struct op_result res;
        ops_result_init(&res);
        API_CALL(&res, ctx->api->ANpuManager_AllocRequest_free(ctx->req[slot].req));
        ctx->req[slot].live = false;
        ops_ret_event(step, OP_REQ_FREE, &res);
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
    uint64_t now = probe_now_ns();
    trace_wait_callbacks(last > now ? last - now : 0);
}
