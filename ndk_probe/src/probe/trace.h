/*
 * The trace writer and recorder: the probe's only mutable global state. Callbacks arrive on any
 * thread with nothing but a cookie and a buffer pointer, so whatever they must update (counters,
 * the buffer-handle registry, the cookie pool) lives here behind one mutex, with one condvar for
 * the await ops. Every line goes out in one write(2) while the mutex is held, so the trace order is
 * the order in which the probe observed the events.
 *
 * One file per concern, all behind the writer's lock (trace_state.h): trace_writer.c (the state, the
 * lock, writing), trace_thread.c (thread names), trace_names.c (cookie and error names),
 * trace_bufs.c (buffer handles), trace_cb.c (callback events and cb_actions), trace_preempt.c (owed
 * onPreempts), trace_waits.c (counters and the async-return wait).
 */
#ifndef NPUCONF_PROBE_TRACE_H
#define NPUCONF_PROBE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <android/npumanager/buffer.h>

#include "impl.h"
#include "json.h"
#include "program.h"

/*
 * TC_ALLOC/LOAD/PREEMPT count callbacks that have finished (including the API calls a cb_action
 * made from them); TC_SUB_ALLOC/LOAD count the onAlloc/onLoad calls owed (requests submitted,
 * loadAsync calls with a callback), on whichever thread submitted them.
 */
/* TC_ALLOC counts onAllocs returned, TC_ALLOC_SEEN onAllocs started (their `cb` written). */
enum trace_counter {
    TC_ALLOC,
    TC_LOAD,
    TC_PREEMPT,
    TC_DELETER,
    TC_HANDED,
    TC_SUB_ALLOC,
    TC_SUB_LOAD,
    TC_ALLOC_SEEN,
    TC__COUNT
};

#define TRACE_NO_BUF ((size_t)-1)

/* Once, before anything is written; `fd` receives the trace. */
void trace_init(int fd);
/* Forgets everything a previous scenario left (counters, handles, cookies, cb actions). */
void trace_reset(const struct probe_api *api);

/* Starts event `name` (an NPUCONF_EV_* of the vocabulary): `{"ev":<name>` in a new buffer. */
void trace_event_open(struct jbuf *ev, const char *name);
/* Appends `,"t":<ns>}` and a newline to an event opened with trace_event_open and writes it. */
void trace_emit(struct jbuf *ev);

/* Marks the calling thread as inside an API call, so callbacks can tell caller from other (nests). */
void trace_api_enter(void);
void trace_api_leave(void);

/* The `th` of events written by the calling thread: "main", "t<k>", or "w<N>" for a thread the
 * probe did not start (named at first sight, per scenario). */
void trace_set_thread(const char *name);
void trace_thread_name(char out[16]);
/* The callback kind whose cb_action the calling thread is running (for `in_cb`), or NULL. */
const char *trace_in_cb(void);
const char *trace_set_in_cb(const char *kind); /* returns the previous value */
void trace_count_add(enum trace_counter c, uint64_t n);

/* What a callback does after its `cb` event when a cb_action applies to it. */
struct trace_job {
    enum probe_cb_act act; /* CB_ACT_NONE: nothing */
    enum probe_cb_kind kind;
    size_t step; /* the cb_action step that armed it */
    int32_t priority;
    unsigned req_slot;
    uint64_t wait_ns; /* wait_return */
    ANpuManager_AllocRequest *req;
    size_t buf; /* registry index, or TRACE_NO_BUF */
    ANpuBuffer *ptr;
    const struct probe_api *api;
};

/* Asynchrony made observable (cb_action wait_return): an allocAsync/loadAsync brackets its call with
 * enter/leave; leave tells whether a wait_return callback timed out waiting for a call to return
 * meanwhile (the call blocked until its callback had run). */
unsigned trace_async_enter(void);
bool trace_async_leave(unsigned blocked_before);
void trace_wait_async_return(uint64_t budget_ns);

/* Arms (or with CB_ACT_NONE disarms) the action for the next `count` callbacks of its kind. */
void trace_arm(const struct probe_cb_action *action, ANpuManager_AllocRequest *req, uint64_t count, size_t step);
/* Teardown: disarms every action and waits until no callback is still running one. */
void trace_disarm_all(void);
/* cb_action hold_<ms>: waits until trace_release_holds() (teardown begins) or `budget_ns` passes. */
void trace_hold(uint64_t budget_ns);
/* The scenario's steps are done: every held callback may return. */
void trace_release_holds(void);

/* The pool cookie object of slot c<slot>: the pointer the API receives for it. */
void *trace_cookie_ptr(unsigned slot);
/* Records that `cookie` was handed over with a deleter (ownership moved to the implementation). */
void trace_cookie_handed(const struct probe_arg *cookie);
/* Remembers a raw value the scenario stored as a cookie, so callbacks can name it. */
void trace_raw_register(const struct probe_arg *cookie);

/* What the callbacks record: the `cb` event, and the job an armed action gives this callback. */
void trace_record_alloc(void *cookie, int error, ANpuBuffer *buf, struct trace_job *job);
void trace_record_load(void *cookie, int error, ANpuBuffer *buf, struct trace_job *job);
void trace_record_preempt(void *cookie, struct trace_job *job);
/* After the job (if any) ran: writes the `cb_return` event and counts the callback for the await ops
 * and the settle waits. The callback returns right after it. */
void trace_callback_done(enum trace_counter c, enum probe_cb_kind kind, void *cookie, const struct trace_job *job);
/* Teardown: waits until no callback is between its `cb` and `cb_return` events; false on timeout. */
bool trace_wait_callbacks(uint64_t budget_ns);
void trace_record_deleter(void *cookie, int fn);

/* Buffer-handle registry, indexed by the position of the handle in this scenario. */
ANpuBuffer *trace_buf_ptr(size_t index);
bool trace_buf_live(size_t index);
/* A registry index as the trace names the buffer ("B<N>"), or null for TRACE_NO_BUF. */
void trace_buf_json(struct jbuf *jb, const char *key, size_t index);
void trace_buf_retire(size_t index);
/* The registry index selected by `bind`, or TRACE_NO_BUF; the match is marked bound. */
size_t trace_bind_cookie(unsigned cookie_slot);
size_t trace_bind_nth(uint64_t nth);
/* Registry indices of successful-onAlloc buffers not freed yet; malloc'd, caller frees. */
size_t *trace_unfreed_successes(size_t *n);

/* What the probe set on its requests, and its submissions: which onAlloc may carry onPreempt. */
void trace_req_created(const ANpuManager_AllocRequest *req);
void trace_req_cookie(const ANpuManager_AllocRequest *req, const void *cookie);
void trace_req_onpreempt(const ANpuManager_AllocRequest *req, bool set);
void trace_submitted(ANpuManager_AllocRequest *const *reqs, size_t n);
/* A vnpu preempt=<buffer> (registry index) or preempt=lowest returned 0 (preempt_late= alike): the
 * onPreempt is owed when the buffer's submission may have had one. */
void trace_preempt_commanded(size_t index);
/* Around the command: the buffer it names, so an onPreempt delivered inside the call acts on it. */
void trace_preempt_targeted(size_t index, bool on);
/* Before a preempt=lowest: the onPreempts seen so far that no command owed. After it returned 0,
 * trace_preempt_lowest with that count: those are not its victim's, while one delivered inside the call
 * (the device may call back before the command returns) is. */
uint64_t trace_preempt_spare(void);
void trace_preempt_lowest(uint64_t spare_before);
/* Teardown: waits until, per cookie, as many onPreempts were seen as commanded preemptions owe (and
 * preempt=lowest's from any cookie's surplus), or `budget_ns` passes. Returns whether reached. */
bool trace_wait_preempts(uint64_t budget_ns, uint64_t *expected, uint64_t *got);

uint64_t trace_count(enum trace_counter c);
/*
 * Waits until counter `c` reaches `target`
 * or `budget_ns` passes. Returns whether it was reached; *got is the counter's final value.
 */
bool trace_wait(enum trace_counter c, uint64_t target, uint64_t budget_ns, uint64_t *got);

#endif
