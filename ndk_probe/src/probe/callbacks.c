#include "callbacks.h"

#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>

#include "clock.h"
#include "ops.h"
#include "trace.h"

#define CB_MAP_LENGTH 4096 /* map_unmap maps the first page */

static void job_set_priority(const struct trace_job *job) {
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    trace_buf_json(&args, "buf", job->buf);
    jb_i64(&args, "priority", job->priority);
    jb_raw(&args, "}");
    struct op_result res;
    ops_call_begin(job->step, OP_BUF_SET_PRIORITY, &args, false, &res);
    int ret;
    API_CALL(&res, ret = job->api->ANpuBuffer_setPriority(job->ptr, job->priority));
    op_int_result(&res, ret);
    ops_ret_event(job->step, OP_BUF_SET_PRIORITY, &res);
}

/* Maps the first page PROT_READ/MAP_SHARED and, when that worked, unmaps it again. */
static void job_map_unmap(const struct trace_job *job) {
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    jb_null(&args, "map");
    trace_buf_json(&args, "buf", job->buf);
    jb_u64(&args, "length", CB_MAP_LENGTH);
    jb_i64(&args, "prot", PROT_READ);
    jb_i64(&args, "flags", MAP_SHARED);
    jb_i64(&args, "offset", 0);
    jb_raw(&args, "}");
    struct op_result res;
    ops_call_begin(job->step, OP_BUF_MAP, &args, false, &res);
    void *addr;
    API_CALL(&res, addr = job->api->ANpuBuffer_map(job->ptr, NULL, CB_MAP_LENGTH, PROT_READ, MAP_SHARED, 0));
    op_int_result(&res, addr == MAP_FAILED ? -1 : 0);
    ops_ret_event(job->step, OP_BUF_MAP, &res);
    if (addr == MAP_FAILED) {
        return;
    }
    jb_init(&args);
    jb_raw(&args, "{");
    jb_null(&args, "map");
    jb_u64(&args, "offset", 0);
    jb_u64(&args, "length", CB_MAP_LENGTH);
    jb_raw(&args, "}");
    ops_call_begin(job->step, OP_BUF_UNMAP, &args, false, &res);
    int ret;
    API_CALL(&res, ret = job->api->ANpuBuffer_unmap(job->ptr, addr, CB_MAP_LENGTH));
    op_int_result(&res, ret);
    ops_ret_event(job->step, OP_BUF_UNMAP, &res);
}

static void job_alloc(const struct trace_job *job) {
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    jb_open(&args, "reqs", '[');
    ops_slot_json(&args, NULL, ARG_REQ, job->req_slot);
    jb_close(&args, ']');
    jb_raw(&args, "}");
    struct op_result res;
    ops_call_begin(job->step, OP_ALLOC, &args, false, &res);
    ANpuManager_AllocRequest *req = job->req;
    /* Owed before the call: its onAlloc may come before allocAsync returns. */
    trace_count_add(TC_SUB_ALLOC, 1);
    trace_submitted(&req, 1);
    API_CALL(&res, job->api->ANpuManager_allocAsync(&req, 1));
    ops_ret_event(job->step, OP_ALLOC, &res);
}

/* The call event of one of job_new_request's calls, whose request has no slot ("req": null). */
static void unslotted_request_call(const struct trace_job *job, enum npuconf_op op, bool cookie,
                                   struct op_result *res) {
    struct jbuf args;
    jb_init(&args);
    jb_raw(&args, "{");
    jb_null(&args, "req");
    if (cookie) {
        jb_null(&args, "cookie");
        jb_bool(&args, "deleter", false);
    }
    jb_raw(&args, "}");
    ops_call_begin(job->step, op, &args, false, res);
}

/* What the text invites in onPreempt ("to reuse the cookie in a new ANpuManager_AllocRequest object"):
 * a request created, given a cookie (NULL here, with no deleter: nothing to own) and freed again. The
 * request has no slot: its calls carry "req": null. */
static void job_new_request(const struct trace_job *job) {
    struct op_result res;
    unslotted_request_call(job, OP_REQ_CREATE, false, &res);
    ANpuManager_AllocRequest *req = ops_req_create(job->api, &res);
    ops_ret_event(job->step, OP_REQ_CREATE, &res);
    if (req == NULL) {
        return;
    }
    unslotted_request_call(job, OP_REQ_SET_COOKIE, true, &res);
    API_CALL(&res, job->api->ANpuManager_AllocRequest_setCookie(req, NULL, NULL));
    ops_ret_event(job->step, OP_REQ_SET_COOKIE, &res);
    unslotted_request_call(job, OP_REQ_FREE, false, &res);
    API_CALL(&res, job->api->ANpuManager_AllocRequest_free(req));
    ops_ret_event(job->step, OP_REQ_FREE, &res);
}

static void run_job(const struct trace_job *job) {
    if (job->act == CB_ACT_NONE) {
        return;
    }
    int saved = errno; /* the implementation's errno is not the callback's to change */
    const char *prev = trace_set_in_cb(program_cb_kind_name(job->kind));
    switch (job->act) {
    case CB_ACT_FREE_BUF:
        ops_free_buf(job->api, job->step, false, job->buf, job->ptr);
        break;
    case CB_ACT_SET_PRIORITY:
        job_set_priority(job);
        break;
    case CB_ACT_MAP_UNMAP:
        job_map_unmap(job);
        break;
    case CB_ACT_ALLOC:
        job_alloc(job);
        break;
    case CB_ACT_WAIT_RETURN:
        trace_wait_async_return(job->wait_ns);
        break;
    case CB_ACT_NEW_REQUEST:
        job_new_request(job);
        break;
    case CB_ACT_SLEEP:
        probe_sleep_ns(job->wait_ns); /* a slow callback: it still borrows its cookie meanwhile */
        break;
    case CB_ACT_HOLD:
        trace_hold(job->wait_ns); /* the same, until the program's steps are done */
        break;
    case CB_ACT_NONE:
        break;
    }
    trace_set_in_cb(prev);
    errno = saved;
}

static void on_alloc(void *cookie, int error_num, ANpuBuffer *buf) {
    struct trace_job job;
    trace_record_alloc(cookie, error_num, buf, &job);
    run_job(&job);
    trace_callback_done(TC_ALLOC, CB_KIND_ALLOC, cookie, &job);
}

static void on_preempt(void *cookie) {
    struct trace_job job;
    trace_record_preempt(cookie, &job);
    run_job(&job);
    trace_callback_done(TC_PREEMPT, CB_KIND_PREEMPT, cookie, &job);
}

static void on_load(void *cookie, int error_num, ANpuBuffer *buf) {
    struct trace_job job;
    trace_record_load(cookie, error_num, buf, &job);
    run_job(&job);
    trace_callback_done(TC_LOAD, CB_KIND_LOAD, cookie, &job);
}

/* Probe cookies are pool objects, never heap memory: "deleting" one is counting the call. Four
 * distinct functions, so an implementation that deletes a cookie with another hand-over's deleter
 * is seen (the trace names the function that ran). */
static void cookie_deleter0(void *cookie) { trace_record_deleter(cookie, 0); }
static void cookie_deleter1(void *cookie) { trace_record_deleter(cookie, 1); }
static void cookie_deleter2(void *cookie) { trace_record_deleter(cookie, 2); }
static void cookie_deleter3(void *cookie) { trace_record_deleter(cookie, 3); }

_Static_assert(NPUCONF_COOKIE_DELETERS == 4, "one function per deleter index");

const struct probe_callbacks PROBE_CALLBACKS = {
    on_alloc,
    on_preempt,
    on_load,
    cookie_deleter0,
    {cookie_deleter0, cookie_deleter1, cookie_deleter2, cookie_deleter3},
};
