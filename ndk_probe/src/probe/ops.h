/*
 * Op handlers. The dispatcher (ops_dispatch.c) writes the `call` event, runs the handler and
 * writes the `ret` event from the handler's result, so every op gets the same envelope.
 */
#ifndef NPUCONF_PROBE_OPS_H
#define NPUCONF_PROBE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "ctx.h"
#include "json.h"
#include "program.h"

struct op_result {
    bool has_ret; /* false: "ret":null (void functions) */
    int64_t ret;
    bool failed; /* the op reported failure: "errno" carries a name */
    int err;
    uint64_t dur_ns;
    char skipped[96];  /* non-empty: the API was not called, and why */
    struct jbuf extra; /* op-specific fields, each written with a leading key */
};

typedef void (*op_handler)(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res);

/* Runs one step: call event, handler, ret event. `teardown` marks the call event. */
void ops_run(struct probe_ctx *ctx, const struct probe_step *st, size_t step, bool teardown);
/* Whether every op of the vocabulary has a handler (checked once at start). */
bool ops_complete(void);

/* The envelope of a call, for calls that are not program steps too (teardown, a cb_action's calls):
 * ops_call_begin writes the `call` event with `args` (freed here) and readies `res`; ops_ret_event
 * writes the `ret` event from `res`. ops_teardown_begin does the first for a teardown call, numbered
 * after the program's steps, and returns its step. */
void ops_call_begin(size_t step, enum npuconf_op op, struct jbuf *args, bool teardown, struct op_result *res);
size_t ops_teardown_begin(struct probe_ctx *ctx, enum npuconf_op op, struct jbuf *args, struct op_result *res);
void ops_ret_event(size_t step, enum npuconf_op op, struct op_result *res);
/* A slot argument of `kind` as the trace writes it: <letter><N> (program_slot_letter). */
void ops_slot_json(struct jbuf *jb, const char *key, enum npuconf_arg_kind kind, unsigned slot);

/* Brackets an implementation call: the caller flag, errno = 0, timing and the saved errno. */
#define API_CALL(res, stmt)                       \
    do {                                          \
        uint64_t api_t0_ = probe_now_ns();        \
        trace_api_enter();                        \
        errno = 0;                                \
        stmt;                                     \
        (res)->err = errno;                       \
        trace_api_leave();                        \
        (res)->dur_ns = probe_now_ns() - api_t0_; \
    } while (0)

void op_skip(struct op_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Registry index bound to b<slot>, or TRACE_NO_BUF. */
size_t op_buf(const struct probe_ctx *ctx, unsigned slot);
/* Whether a u64 argument fits size_t here; otherwise the op is skipped with a reason. */
bool op_fits_size(struct op_result *res, const char *what, uint64_t v);
/* int result of an implementation function: failure is -1, as the API documents. */
void op_int_result(struct op_result *res, int ret);

/* ops_request.c */
void op_req_create(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_free(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_free_null(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_onalloc_null_req(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_device(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_type(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_size(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_priority(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_prot(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_cookie(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_onalloc(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_onpreempt(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_req_set_file(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_is_supported(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_alloc(struct probe_ctx *, const struct probe_step *, struct op_result *);
/* ANpuManager_AllocRequest_create through the API: the request is known to the trace, or `res` marks
 * the NULL it returned. For req_create and a cb_action's new request. */
ANpuManager_AllocRequest *ops_req_create(const struct probe_api *api, struct op_result *res);
/* ops_buffer.c */
void op_buf_free(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_buf_set_priority(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_buf_load(struct probe_ctx *, const struct probe_step *, struct op_result *);
/* One buf_free call outside the program's steps (teardown, a cb_action): registry buffer `index`, at
 * `ptr`, freed alone through the API, retired when that succeeded, with its call and ret events. */
void ops_free_buf(const struct probe_api *api, size_t step, bool teardown, size_t index, ANpuBuffer *ptr);
/* ops_map.c */
void op_buf_map(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_buf_unmap(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_map_write(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_map_read(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_map_prot(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_map_gone(struct probe_ctx *, const struct probe_step *, struct op_result *);
/* Unmaps [off, off+len) of a mapping through the API and updates its ranges (teardown too). */
void map_unmap_range(struct probe_map_slot *m, const struct probe_api *api, size_t off, size_t len,
                     struct op_result *res);
/* ops_file.c */
void op_file_new(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_file_seek(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_fd_check(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_await_closed(struct probe_ctx *, const struct probe_step *, struct op_result *);
/* The descriptor an fdsel argument hands over, or false (skipped) when f<N> is unbound. */
bool file_fdsel(struct probe_ctx *ctx, const struct probe_arg *arg, struct op_result *res, int *fd);
/* Closes the probe's own descriptors (used between scenarios in --no-fork mode). */
void file_close_all(struct probe_ctx *ctx);
/* Teardown: awaits each handed-over descriptor closed, within budget_ms × the multiplier in all. */
void file_await_closed_all(struct probe_ctx *ctx, uint64_t budget_ms);
/* ops_helpers.c */
void op_cookie_new(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_await_alloc(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_await_load(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_await_preempt(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_bind(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_vnpu(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_sleep_ms(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_cb_action(struct probe_ctx *, const struct probe_step *, struct op_result *);
/* ops_parallel.c: par_begin starts the block's threads (held until par_release), par_end joins them. */
void op_par_begin(struct probe_ctx *, const struct probe_step *, struct op_result *);
void op_par_end(struct probe_ctx *, const struct probe_step *, struct op_result *);
void par_release(struct probe_ctx *ctx);

#endif
