/* Ops on buffers received from onAlloc: free, setPriority and loadAsync. */
#include <errno.h>
#include <stdlib.h>

#include "callbacks.h"
#include "clock.h"
#include "ops.h"
#include "trace.h"

/* The buffer bound to b<N>, or NULL (op skipped) when the slot is unbound. */
static ANpuBuffer *buf_arg(struct probe_ctx *ctx, unsigned slot, struct op_result *res, size_t *index) {
    *index = op_buf(ctx, slot);
    if (*index == TRACE_NO_BUF) {
        op_skip(res, "b%u unbound", slot);
        return NULL;
    }
    return trace_buf_ptr(*index);
}

void op_buf_free(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_arg *a = &st->args[0];
    size_t n = a->v.list.n;
    ANpuBuffer **bufs = calloc(n ? n : 1, sizeof *bufs);
    size_t *index = calloc(n ? n : 1, sizeof *index);
    if (bufs == NULL || index == NULL) {
        op_skip(res, "out of memory");
        free(bufs);
        free(index);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if ((bufs[i] = buf_arg(ctx, a->v.list.slots[i], res, &index[i])) == NULL) {
            free(bufs);
            free(index);
            return;
        }
    }
    int ret;
    API_CALL(res, ret = ctx->api->ANpuBuffer_free(bufs, n));
    op_int_result(res, ret);
    if (ret == 0) {
        /* Retired handles are never reused: a pointer seen again later gets a new B<N>. */
        for (size_t i = 0; i < n; i++) {
            trace_buf_retire(index[i]);
        }
    }
    free(bufs);
    free(index);
}

void ops_free_buf(const struct probe_api *api, size_t step, bool teardown, size_t index, ANpuBuffer *ptr) {
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    jb_open(&args, "bufs", '[');
    trace_buf_json(&args, NULL, index);
    jb_close(&args, ']');
    jb_raw(&args, "}");
    struct op_result res;
    ops_call_begin(step, OP_BUF_FREE, &args, teardown, &res);
    int ret;
    API_CALL(&res, ret = api->ANpuBuffer_free(&ptr, 1));
    op_int_result(&res, ret);
    if (ret == 0) {
        trace_buf_retire(index);
    }
    ops_ret_event(step, OP_BUF_FREE, &res);
}

void op_buf_set_priority(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t index;
    ANpuBuffer *buf = buf_arg(ctx, st->args[0].v.slot, res, &index);
    if (buf == NULL) {
        return;
    }
    int ret;
    API_CALL(res, ret = ctx->api->ANpuBuffer_setPriority(buf, (int32_t)st->args[1].v.i64));
    op_int_result(res, ret);
}

void op_buf_load(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    size_t index;
    ANpuBuffer *buf = buf_arg(ctx, st->args[0].v.slot, res, &index);
    int fd;
    if (buf == NULL || !file_fdsel(ctx, &st->args[1], res, &fd)) {
        return;
    }
    bool onload = st->args[5].v.flag;
    ANpuManager_LoadCallback cb = onload ? PROBE_CALLBACKS.on_load : NULL;
    if (onload) {
        trace_count_add(TC_SUB_LOAD, 1);
    }
    unsigned blocked = trace_async_enter();
    API_CALL(res, ctx->api->ANpuBuffer_loadAsync(buf, fd, st->args[2].v.i64, st->args[3].v.i64, st->args[4].v.i64, cb));
    if (trace_async_leave(blocked)) {
        jb_bool(&res->extra, "blocked", true); /* returned only after a callback gave up waiting for it */
    }
}
