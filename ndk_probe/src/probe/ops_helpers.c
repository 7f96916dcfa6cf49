/* Probe-side ops: cookies, waiting for callbacks, binding buffers to slots, vnpu control, sleep. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ops.h"
#include "trace.h"

void op_cookie_new(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    /* Pool cookies exist for the whole run; creating one only names it in the trace. */
    (void)ctx;
    (void)st;
    op_int_result(res, 0);
}

static void await(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res, enum trace_counter c) {
    uint64_t got;
    bool reached =
        trace_wait(c, st->args[0].v.u64, probe_scaled_ns(st->args[1].v.u64, ctx->opt->timeout_multiplier), &got);
    op_int_result(res, 0);
    jb_bool(&res->extra, "reached", reached);
    jb_u64(&res->extra, "got", got);
}

void op_await_alloc(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    await(ctx, st, res, TC_ALLOC);
}

void op_await_load(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    await(ctx, st, res, TC_LOAD);
}

void op_await_preempt(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    await(ctx, st, res, TC_PREEMPT);
}

static size_t bind_select(const struct probe_arg *sel) {
    return sel->v.bindsel.by_cookie ? trace_bind_cookie(sel->v.bindsel.slot) : trace_bind_nth(sel->v.bindsel.nth);
}

/* Waits (within the settle budget) while nothing matches and an onAlloc is still owed: a bind names
 * the buffer an onAlloc brings, so an `await_alloc` just before it is not needed. It waits for onAllocs
 * to start, not to return: a success is recorded with its `cb` event, in the same locked step that
 * counts the start, so once every owed onAlloc had started before a selection, that selection saw them
 * all; and a bind can name the buffer of an onAlloc that is still running (cb_action hold_<ms>). */
static size_t bind_waiting(struct probe_ctx *ctx, const struct probe_arg *sel) {
    uint64_t deadline = probe_now_ns() + probe_scaled_ns(ctx->opt->settle_ms, ctx->opt->timeout_multiplier);
    for (;;) {
        uint64_t started = trace_count(TC_ALLOC_SEEN);
        uint64_t owed = trace_count(TC_SUB_ALLOC);
        size_t index = bind_select(sel);
        uint64_t now = probe_now_ns();
        if (index != TRACE_NO_BUF || started >= owed || now >= deadline) {
            return index;
        }
        uint64_t got;
        trace_wait(TC_ALLOC_SEEN, started + 1, deadline - now, &got);
    }
}

void op_bind(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t index = bind_waiting(ctx, &st->args[1]);
    /* No match leaves the slot unbound, so later ops on it are skipped rather than misdirected. */
    ctx->buf[st->args[0].v.slot] = index == TRACE_NO_BUF ? 0 : index + 1;
    op_int_result(res, 0);
    trace_buf_json(&res->extra, "handle", index);
}

/* The slot of a trailing `=b<N>`, or -1 when the command does not name a buffer. */
static int named_buffer(const char *command, size_t *eq) {
    const char *e = strrchr(command, '=');
    unsigned n;
    if (e == NULL || !program_parse_slot(e + 1, ARG_BUF, &n)) {
        return -1;
    }
    *eq = (size_t)(e - command);
    return (int)n;
}

void op_vnpu(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const char *command = st->args[0].v.text;
    if (ctx->api->vnpu_control == NULL) {
        /* Real devices have no control entry point; the trace says so instead of failing the run. */
        res->err = ENOSYS;
        op_int_result(res, -1);
        return;
    }
    size_t eq = 0;
    int slot = named_buffer(command, &eq);
    char *owned = NULL;
    size_t index = TRACE_NO_BUF;
    if (slot >= 0) {
        index = op_buf(ctx, (unsigned)slot);
        if (index == TRACE_NO_BUF) {
            op_skip(res, "b%d unbound", slot);
            return;
        }
        size_t cap = eq + 2 + 2 + 2 * sizeof(uintptr_t) + 1;
        owned = malloc(cap);
        if (owned == NULL) {
            op_skip(res, "out of memory");
            return;
        }
        snprintf(owned, cap, "%.*s=0x%" PRIxPTR, (int)eq, command, (uintptr_t)trace_buf_ptr(index));
        command = owned;
    }
    /* preempt_late= (the vnpu's late onPreempt) is a commanded preemption like preempt=. */
    bool late = strncmp(command, "preempt_late=", 13) == 0;
    bool preempt = late || strncmp(command, "preempt=", 8) == 0;
    if (preempt && index != TRACE_NO_BUF) {
        trace_preempt_targeted(index, true);
    }
    bool lowest = preempt && index == TRACE_NO_BUF && strcmp(command + (late ? 13 : 8), "lowest") == 0;
    uint64_t spare_before = lowest ? trace_preempt_spare() : 0;
    int ret;
    API_CALL(res, ret = ctx->api->vnpu_control(command));
    op_int_result(res, ret);
    if (preempt && index != TRACE_NO_BUF) {
        /* The onPreempt is owed (if set): teardown's preempt settle waits for it. */
        if (ret == 0) {
            trace_preempt_commanded(index);
        } else {
            trace_preempt_targeted(index, false);
        }
    } else if (ret == 0 && lowest) {
        trace_preempt_lowest(spare_before);
    }
    free(owned);
}

void op_sleep_ms(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    /* Not scaled by the multiplier: a sleep orders events, it is not a budget. */
    uint64_t ns = probe_scaled_ns(st->args[0].v.u64, 1.0);
    /* A vnpu whose profile says so (fuzz runs) ends the pause once it is idle: whatever it would call
     * back before the next step has been called back (and traced) by then. */
    uint64_t start = probe_now_ns();
    if (ctx->api->vnpu_wait_idle == NULL || !ctx->api->vnpu_wait_idle(ns)) {
        uint64_t spent = probe_now_ns() - start;
        probe_sleep_ns(spent < ns ? ns - spent : 0);
    }
    op_int_result(res, 0);
}

void op_cb_action(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    struct probe_cb_action action;
    if (!program_cb_action(st->args[0].v.text, st->args[1].v.text, &action)) {
        op_skip(res, "unknown cb_action"); /* the parser rejects these; kept for safety */
        return;
    }
    bool timed = action.act == CB_ACT_SLEEP || action.act == CB_ACT_HOLD;
    action.wait_ns = probe_scaled_ns(timed ? action.sleep_ms : WAIT_RETURN_MS, ctx->opt->timeout_multiplier);
    ANpuManager_AllocRequest *req = NULL;
    if (action.act == CB_ACT_ALLOC) {
        if (!ctx->req[action.req_slot].live) {
            op_skip(res, "r%u unbound", action.req_slot);
            return;
        }
        req = ctx->req[action.req_slot].req;
    }
    trace_arm(&action, req, st->args[2].v.u64, (size_t)(st - ctx->sc->steps));
    op_int_result(res, 0);
}
