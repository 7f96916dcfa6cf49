#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "ops.h"
#include "trace.h"
#include "vocab.h"

/* Indexed by the generated op enum, so the vocabulary, not this file, decides what exists. */
static const op_handler OP_HANDLERS[OP__COUNT] = {
    [OP_REQ_CREATE] = op_req_create,
    [OP_REQ_FREE] = op_req_free,
    [OP_REQ_FREE_NULL] = op_req_free_null,
    [OP_REQ_SET_ONALLOC_NULL_REQ] = op_req_set_onalloc_null_req,
    [OP_REQ_SET_DEVICE] = op_req_set_device,
    [OP_REQ_SET_TYPE] = op_req_set_type,
    [OP_REQ_SET_SIZE] = op_req_set_size,
    [OP_REQ_SET_PRIORITY] = op_req_set_priority,
    [OP_REQ_SET_PROT] = op_req_set_prot,
    [OP_REQ_SET_COOKIE] = op_req_set_cookie,
    [OP_REQ_SET_ONALLOC] = op_req_set_onalloc,
    [OP_REQ_SET_ONPREEMPT] = op_req_set_onpreempt,
    [OP_REQ_SET_FILE] = op_req_set_file,
    [OP_IS_SUPPORTED] = op_is_supported,
    [OP_ALLOC] = op_alloc,
    [OP_BUF_FREE] = op_buf_free,
    [OP_BUF_MAP] = op_buf_map,
    [OP_BUF_UNMAP] = op_buf_unmap,
    [OP_BUF_SET_PRIORITY] = op_buf_set_priority,
    [OP_BUF_LOAD] = op_buf_load,
    [OP_COOKIE_NEW] = op_cookie_new,
    [OP_AWAIT_ALLOC] = op_await_alloc,
    [OP_AWAIT_LOAD] = op_await_load,
    [OP_AWAIT_PREEMPT] = op_await_preempt,
    [OP_BIND] = op_bind,
    [OP_MAP_WRITE] = op_map_write,
    [OP_MAP_READ] = op_map_read,
    [OP_MAP_PROT] = op_map_prot,
    [OP_MAP_GONE] = op_map_gone,
    [OP_FILE_NEW] = op_file_new,
    [OP_FILE_SEEK] = op_file_seek,
    [OP_FD_CHECK] = op_fd_check,
    [OP_AWAIT_CLOSED] = op_await_closed,
    [OP_VNPU] = op_vnpu,
    [OP_SLEEP_MS] = op_sleep_ms,
    [OP_PAR_BEGIN] = op_par_begin,
    [OP_PAR_END] = op_par_end,
    [OP_CB_ACTION] = op_cb_action,
};

bool ops_complete(void) {
    bool ok = true;
    for (int i = 0; i < OP__COUNT; i++) {
        if (OP_HANDLERS[i] == NULL) {
            fprintf(stderr, "npuconf-probe: op %s has no handler\n", NPUCONF_OPS[i].name);
            ok = false;
        }
    }
    return ok;
}

size_t op_buf(const struct probe_ctx *ctx, unsigned slot) {
    return ctx->buf[slot] == 0 ? TRACE_NO_BUF : ctx->buf[slot] - 1;
}

void op_skip(struct op_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->skipped, sizeof res->skipped, fmt, ap);
    va_end(ap);
}

bool op_fits_size(struct op_result *res, const char *what, uint64_t v) {
    if (v > (uint64_t)SIZE_MAX) {
        op_skip(res, "%s %llu does not fit size_t", what, (unsigned long long)v);
        return false;
    }
    return true;
}

void op_int_result(struct op_result *res, int ret) {
    res->has_ret = true;
    res->ret = ret;
    res->failed = ret == -1;
}

void ops_slot_json(struct jbuf *jb, const char *key, enum npuconf_arg_kind kind, unsigned slot) {
    char text[8];
    snprintf(text, sizeof text, "%c%u", program_slot_letter(kind), slot);
    jb_str(jb, key, text);
}

static void arg_json(const struct probe_ctx *ctx, struct jbuf *jb, const char *key, const struct probe_arg *a) {
    switch (a->kind) {
    case ARG_REQ:
    case ARG_MAP:
    case ARG_FILE:
        ops_slot_json(jb, key, a->kind, a->v.slot);
        break;
    case ARG_BUF:
        trace_buf_json(jb, key, op_buf(ctx, a->v.slot));
        break;
    case ARG_COOKIE:
        if (a->v.cookie.sel == COOKIE_SLOT) {
            ops_slot_json(jb, key, ARG_COOKIE, a->v.cookie.slot);
        } else if (a->v.cookie.sel == COOKIE_NULL) {
            jb_null(jb, key);
        } else {
            char text[32];
            program_raw_cookie_text(a, text);
            jb_str(jb, key, text);
        }
        break;
    case ARG_REQS:
    case ARG_BUFS:
        jb_open(jb, key, '[');
        for (size_t i = 0; i < a->v.list.n; i++) {
            if (a->kind == ARG_REQS) {
                ops_slot_json(jb, NULL, ARG_REQS, a->v.list.slots[i]);
            } else {
                trace_buf_json(jb, NULL, op_buf(ctx, a->v.list.slots[i]));
            }
        }
        jb_close(jb, ']');
        break;
    case ARG_I32:
    case ARG_I64:
    case ARG_PROT:
    case ARG_MAPFLAGS:
        jb_i64(jb, key, a->v.i64);
        break;
    case ARG_U64:
        jb_u64(jb, key, a->v.u64);
        break;
    case ARG_BOOL:
        jb_bool(jb, key, a->v.flag);
        break;
    case ARG_ERRNO: {
        char tmp[16];
        jb_str(jb, key, vocab_errno_name((int)a->v.i64, tmp));
        break;
    }
    case ARG_FDSEL:
        if (a->v.fdsel.is_file) {
            ops_slot_json(jb, key, ARG_FDSEL, a->v.fdsel.slot);
        } else {
            jb_i64(jb, key, a->v.fdsel.fd);
        }
        break;
    case ARG_BINDSEL:
        jb_open(jb, key, '{');
        if (a->v.bindsel.by_cookie) {
            ops_slot_json(jb, "cookie", ARG_BINDSEL, a->v.bindsel.slot);
        } else {
            jb_u64(jb, "nth", a->v.bindsel.nth);
        }
        jb_close(jb, '}');
        break;
    case ARG_TEXT:
        jb_str(jb, key, a->v.text);
        break;
    }
}

/* `th`, and `in_cb` when the calling thread runs a cb_action: both call and ret carry them. */
static void thread_fields(struct jbuf *ev) {
    char th[16];
    trace_thread_name(th);
    jb_str(ev, "th", th);
    const char *kind = trace_in_cb();
    if (kind != NULL) {
        jb_str(ev, "in_cb", kind);
    }
}

/* What a call event and its ret event both open with: the event, its step, its op, the thread. */
static void envelope_open(struct jbuf *ev, const char *name, size_t step, enum npuconf_op op) {
    trace_event_open(ev, name);
    jb_u64(ev, "step", step);
    jb_str(ev, "op", NPUCONF_OPS[op].name);
    thread_fields(ev);
}

void ops_call_begin(size_t step, enum npuconf_op op, struct jbuf *args, bool teardown, struct op_result *res) {
    struct jbuf ev;
    envelope_open(&ev, NPUCONF_EV_CALL, step, op);
    jb_key(&ev, "args");
    jb_raw(&ev, args->p);
    if (teardown) {
        jb_bool(&ev, "teardown", true);
    }
    trace_emit(&ev);
    jb_free(&ev);
    jb_free(args);
    memset(res, 0, sizeof *res);
    jb_init(&res->extra);
}

size_t ops_teardown_begin(struct probe_ctx *ctx, enum npuconf_op op, struct jbuf *args, struct op_result *res) {
    size_t step = ctx->next_step++;
    ops_call_begin(step, op, args, true, res);
    return step;
}

void ops_ret_event(size_t step, enum npuconf_op op, struct op_result *res) {
    struct jbuf ev;
    envelope_open(&ev, NPUCONF_EV_RET, step, op);
    if (res->has_ret && res->skipped[0] == '\0') {
        jb_i64(&ev, "ret", res->ret);
    } else {
        jb_null(&ev, "ret");
    }
    if (res->failed && res->skipped[0] == '\0') {
        char tmp[16];
        jb_str(&ev, "errno", vocab_errno_name(res->err, tmp));
    } else {
        jb_null(&ev, "errno");
    }
    jb_u64(&ev, "dur_ns", res->dur_ns);
    if (res->skipped[0] != '\0') {
        jb_str(&ev, "skipped", res->skipped);
    } else if (res->extra.len > 0) {
        jb_key(&ev, NULL);
        jb_raw(&ev, res->extra.p);
    }
    trace_emit(&ev);
    jb_free(&ev);
    jb_free(&res->extra);
}

void ops_run(struct probe_ctx *ctx, const struct probe_step *st, size_t step, bool teardown) {
    const struct npuconf_op_info *info = &NPUCONF_OPS[st->op];
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    for (size_t a = 0; a < info->nargs; a++) {
        arg_json(ctx, &args, info->args[a].name, &st->args[a]);
    }
    jb_raw(&args, "}");
    struct op_result res;
    ops_call_begin(step, st->op, &args, teardown, &res);
    uint64_t t0 = probe_now_ns();
    OP_HANDLERS[st->op](ctx, st, &res);
    if (info->api == NULL) {
        /* Probe helpers time themselves whole; API ops time only the API call (API_CALL). */
        res.dur_ns = probe_now_ns() - t0;
    }
    ops_ret_event(step, st->op, &res);
}
