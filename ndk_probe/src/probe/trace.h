/*
 * The trace writer and recorder: the probe's only mutable global state. Callbacks arrive on any
 * thread with nothing but a cookie and a buffer pointer, so whatever they must update (counters,
 * the buffer-handle registry, the cookie pool) lives here behind one mutex, with one condvar for
 * the await ops. Every line goes out in one write(2) while the mutex is held, so the trace order is
 * the order in which the probe observed the events.
 */
#ifndef NPUCONF_PROBE_TRACE_H
#define NPUCONF_PROBE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <android/npumanager/buffer.h>

#include "json.h"
#include "program.h"

enum trace_counter { TC_ALLOC, TC_LOAD, TC_PREEMPT, TC_DELETER, TC_HANDED, TC__COUNT };

#define TRACE_NO_BUF ((size_t)-1)

/* Once, before anything is written; `fd` receives the trace. */
void trace_init(int fd);
/* Forgets everything a previous scenario left (counters, handles, cookies). */
void trace_reset(void);

/* Appends `,"t":<ns>}` and a newline to an event opened with `{"ev":...` and writes it. */
void trace_emit(struct jbuf *ev);

/* Marks the calling thread as inside an API call, so callbacks can tell caller from other. */
void trace_api_enter(void);
void trace_api_leave(void);

/* The pool cookie object of slot c<slot>: the pointer the API receives for it. */
void *trace_cookie_ptr(unsigned slot);
/* Records that `cookie` was handed over with a deleter (ownership moved to the implementation). */
void trace_cookie_handed(const struct probe_arg *cookie);
/* Remembers a raw value the scenario stored as a cookie, so callbacks can name it. */
void trace_raw_register(const struct probe_arg *cookie);

/* What the callbacks record. */
void trace_record_alloc(void *cookie, int error, ANpuBuffer *buf);
void trace_record_load(void *cookie, int error, ANpuBuffer *buf);
void trace_record_preempt(void *cookie);
void trace_record_deleter(void *cookie);

/* Buffer-handle registry, indexed by the position of the handle in this scenario. */
ANpuBuffer *trace_buf_ptr(size_t index);
bool trace_buf_live(size_t index);
void trace_buf_id(size_t index, char out[24]); /* "B<N>" */
void trace_buf_retire(size_t index);
/* The registry index selected by `bind`, or TRACE_NO_BUF; the match is marked bound. */
size_t trace_bind_cookie(unsigned cookie_slot);
size_t trace_bind_nth(uint64_t nth);
/* Registry indices of successful-onAlloc buffers not freed yet; malloc'd, caller frees. */
size_t *trace_unfreed_successes(size_t *n);

uint64_t trace_count(enum trace_counter c);
/*
 * Waits until counter `c` reaches `target`
 * or `budget_ns` passes. Returns whether it was reached; *got is the counter's final value.
 */
bool trace_wait(enum trace_counter c, uint64_t target, uint64_t budget_ns, uint64_t *got);

#endif
