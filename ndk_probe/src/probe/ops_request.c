/* Ops on allocation requests: create/free, the setters, isSupported and allocAsync. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "callbacks.h"
#include "clock.h"
#include "ops.h"
#include "trace.h"

/* The request of an r<N> argument, or NULL (op skipped) when the slot holds none. */
static ANpuManager_AllocRequest *req_arg(struct probe_ctx *ctx, const struct probe_arg *a, struct op_result *res) {
    if (!ctx->req[a->v.slot].live) {
        op_skip(res, "r%u unbound", a->v.slot);
        return NULL;
    }
    return ctx->req[a->v.slot].req;
}

/* "It is okay to modify the list after ... returns": the probe does, so an implementation that kept the
 * list and read it later reads the requests in the other order (alloc-list-modify-after-return). */
static void reverse_list(ANpuManager_AllocRequest **reqs, size_t n) {
    ANpuManager_AllocRequest *volatile *list = reqs; /* stores the compiler may not drop before the free */
    for (size_t i = 0; i < n / 2; i++) {
        ANpuManager_AllocRequest *kept = list[i];
        list[i] = list[n - 1 - i];
        list[n - 1 - i] = kept;
    }
}

/* The requests of an r<N> list; NULL (op skipped) when one is unbound. Never NULL for `-`. */
static ANpuManager_AllocRequest **req_list(struct probe_ctx *ctx, const struct probe_arg *a, struct op_result *res) {
    ANpuManager_AllocRequest **reqs = calloc(a->v.list.n ? a->v.list.n : 1, sizeof *reqs);
    if (reqs == NULL) {
        op_skip(res, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < a->v.list.n; i++) {
        unsigned slot = a->v.list.slots[i];
        if (!ctx->req[slot].live) {
            op_skip(res, "r%u unbound", slot);
            free(reqs);
            return NULL;
        }
        reqs[i] = ctx->req[slot].req;
    }
    return reqs;
}

ANpuManager_AllocRequest *ops_req_create(const struct probe_api *api, struct op_result *res) {
    ANpuManager_AllocRequest *req;
    API_CALL(res, req = api->ANpuManager_AllocRequest_create());
    if (req != NULL) {
        trace_req_created(req);
    } else {
        jb_bool(&res->extra, "null", true); /* _Nonnull: the model fails it (req-create-returns-request) */
    }
    return req;
}

void op_req_create(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = ops_req_create(ctx->api, res);
    ctx->req[st->args[0].v.slot] = (struct probe_req_slot){req, req != NULL};
}

void op_req_free(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req == NULL) {
        return;
    }
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_free(req));
    ctx->req[st->args[0].v.slot].live = false;
}

void op_req_free_null(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    (void)st;
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_free(NULL));
}

void op_req_set_onalloc_null_req(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    (void)st;
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_setOnAlloc(NULL, PROBE_CALLBACKS.on_alloc));
}

void op_req_set_device(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setDeviceNumber(req, (int32_t)st->args[1].v.i64));
    }
}

void op_req_set_type(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req == NULL) {
        return;
    }
    int64_t type = st->args[1].v.i64;
    if (type < INT8_MIN || type > INT8_MAX) {
        /* ANpuBuffer_Type is int8_t: passing it would silently test a different value. */
        op_skip(res, "type %lld does not fit ANpuBuffer_Type (int8_t)", (long long)type);
        return;
    }
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_setBufferType(req, (ANpuBuffer_Type)type));
}

void op_req_set_size(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setSize(req, st->args[1].v.i64));
    }
}

void op_req_set_priority(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setBufferPriority(req, (int32_t)st->args[1].v.i64));
    }
}

void op_req_set_prot(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setProtectionFlags(req, (int32_t)st->args[1].v.i64));
    }
}

void op_req_set_cookie(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req == NULL) {
        return;
    }
    const struct probe_arg *c = &st->args[1];
    void *cookie = NULL;
    if (c->v.cookie.sel == COOKIE_SLOT) {
        cookie = trace_cookie_ptr(c->v.cookie.slot);
    } else if (c->v.cookie.sel == COOKIE_RAW) {
        if (!c->v.cookie.raw_fits) {
            char text[32];
            program_raw_cookie_text(c, text);
            op_skip(res, "%s does not fit a pointer", text);
            return;
        }
        trace_raw_register(c);
        cookie = (void *)c->v.cookie.raw;
    }
    ANpuManager_CookieDeleter deleter = NULL;
    if (st->args[2].v.flag) {
        /* Which deleter: the cookie's number mod NPUCONF_COOKIE_DELETERS (NULL: 0); the model computes the same. */
        uint64_t n = 0;
        if (c->v.cookie.sel == COOKIE_SLOT) {
            n = (uint64_t)c->v.cookie.slot;
        } else if (c->v.cookie.sel == COOKIE_RAW) {
            n = c->v.cookie.raw_negative ? (uint64_t)c->v.cookie.raw_value : c->v.cookie.raw_unsigned;
        }
        deleter = PROBE_CALLBACKS.deleters[n % NPUCONF_COOKIE_DELETERS];
        /* Counted before the call: replacing a cookie may run a deleter inside it. */
        trace_cookie_handed(c);
    }
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_setCookie(req, cookie, deleter));
    trace_req_cookie(req, cookie);
}

void op_req_set_onalloc(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        ANpuManager_AllocCallback cb = st->args[1].v.flag ? PROBE_CALLBACKS.on_alloc : NULL;
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setOnAlloc(req, cb));
    }
}

void op_req_set_onpreempt(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    if (req != NULL) {
        ANpuManager_PreemptCallback cb = st->args[1].v.flag ? PROBE_CALLBACKS.on_preempt : NULL;
        API_CALL(res, ctx->api->ANpuManager_AllocRequest_setOnPreempt(req, cb));
        trace_req_onpreempt(req, cb != NULL);
    }
}

void op_req_set_file(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    ANpuManager_AllocRequest *req = req_arg(ctx, &st->args[0], res);
    int fd;
    if (req == NULL || !file_fdsel(ctx, &st->args[1], res, &fd)) {
        return;
    }
    API_CALL(res, ctx->api->ANpuManager_AllocRequest_setFileSegmentToLoad(req, fd, st->args[2].v.i64, st->args[3].v.i64,
                                                                          st->args[4].v.i64));
}

void op_is_supported(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_arg *a = &st->args[0];
    ANpuManager_AllocRequest **reqs = req_list(ctx, a, res);
    if (reqs == NULL) {
        return;
    }
    /* A canary after the requestsLen elements: the array is only valid that far (support-out-array-size). */
    size_t n = a->v.list.n;
    bool *out = calloc(n + NPUCONF_ISSUPPORTED_CANARY, sizeof *out);
    if (out == NULL) {
        free(reqs);
        op_skip(res, "out of memory");
        return;
    }
    unsigned char *canary = (unsigned char *)(out + n);
    memset(canary, 0xA5, NPUCONF_ISSUPPORTED_CANARY);
    int ret;
    API_CALL(res, ret = ctx->api->ANpuManager_isSupported(reqs, n, out));
    op_int_result(res, ret);
    bool intact = true;
    for (size_t i = 0; i < NPUCONF_ISSUPPORTED_CANARY; i++) {
        intact = intact && canary[i] == 0xA5;
    }
    jb_bool(&res->extra, "canary", intact);
    if (ret == 0) {
        jb_open(&res->extra, "results", '[');
        for (size_t i = 0; i < a->v.list.n; i++) {
            /* Read as bytes: an implementation storing 2 in a bool must not make the probe undefined. */
            jb_bool(&res->extra, NULL, ((const unsigned char *)out)[i] != 0);
        }
        jb_close(&res->extra, ']');
    }
    free(out);
    reverse_list(reqs, n);
    free(reqs);
}

void op_alloc(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_arg *a = &st->args[0];
    ANpuManager_AllocRequest **reqs = req_list(ctx, a, res);
    if (reqs == NULL) {
        return;
    }
    /* Owed before the call: onAlloc may come (and be awaited by another thread) before it returns. */
    trace_count_add(TC_SUB_ALLOC, a->v.list.n);
    trace_submitted(reqs, a->v.list.n);
    unsigned blocked = trace_async_enter();
    API_CALL(res, ctx->api->ANpuManager_allocAsync(reqs, a->v.list.n));
    if (trace_async_leave(blocked)) {
        jb_bool(&res->extra, "blocked", true); /* returned only after a callback gave up waiting for it */
    }
    reverse_list(reqs, a->v.list.n);
    free(reqs);
}
