#include "callbacks.h"

#include "trace.h"

static void on_alloc(void *cookie, int error_num, ANpuBuffer *buf) { trace_record_alloc(cookie, error_num, buf); }

static void on_preempt(void *cookie) { trace_record_preempt(cookie); }

static void on_load(void *cookie, int error_num, ANpuBuffer *buf) { trace_record_load(cookie, error_num, buf); }

/* Probe cookies are pool objects, never heap memory: "deleting" one is counting the call. */
static void cookie_deleter(void *cookie) { trace_record_deleter(cookie); }

const struct probe_callbacks PROBE_CALLBACKS = {on_alloc, on_preempt, on_load, cookie_deleter};
