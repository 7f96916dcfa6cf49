/*
 * The trace recorder's state and the functions its files share. The state is one struct owned by
 * the writer (trace_writer.c): the only way to it is trace_lock(), which returns it with the one
 * mutex held, and every *_locked function takes it as `st`. Each other trace_*.c file keeps one
 * concern of it (see trace.h for the public side).
 */
#ifndef NPUCONF_PROBE_TRACE_STATE_H
#define NPUCONF_PROBE_TRACE_STATE_H

#include <pthread.h>
#include <time.h>

#include "trace.h"

/* One probe cookie object; its address is what the implementation receives. */
struct trace_cookie {
    unsigned handed;  /* setCookie calls with a deleter */
    unsigned deleted; /* deleter calls */
};

struct trace_raw {
    uintptr_t bits;
    char text[32];
};

struct trace_buf {
    ANpuBuffer *ptr;
    unsigned id;
    bool live;
    const void *cookie;   /* as received by its onAlloc */
    bool may_onpreempt;   /* a submission that may have produced it had onPreempt set */
    bool targeted;        /* named by a vnpu preempt=<buffer> (its onPreempt may come before the call returns) */
    bool commanded;       /* a vnpu preempt=<buffer> confirmed preempting it */
    bool credited;        /* an onPreempt was given to it (what onPreempt's actions act on) */
    uint64_t seen_before; /* onPreempts of its cookie seen before the command naming it was made */
};

/* What the probe set on a request it created (the implementation's own state is not readable). */
struct trace_reqinfo {
    const ANpuManager_AllocRequest *req;
    const void *cookie;
    bool onpreempt;
};

/* Per cookie value: submissions not answered yet (and how many of them had onPreempt), onPreempts
 * owed by commanded preemptions, and onPreempts seen. onPreempt names only the cookie. */
struct trace_pcookie {
    const void *cookie;
    uint64_t pending, pending_onpreempt;
    uint64_t owed, seen;
};

struct trace_success {
    size_t buf;         /* registry index */
    const void *cookie; /* as received by onAlloc */
    bool bound;
};

/* An armed cb_action: the next `count` callbacks of its kind it applies to run it. */
struct trace_armed {
    struct probe_cb_action action;
    ANpuManager_AllocRequest *req; /* alloc_r<N>: the request in r<N> when it was armed */
    uint64_t count;
    size_t step;
};

struct trace_state {
    /* the writer (trace_writer.c): the lock, its condvar and the trace fd */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    /* the rest, by concern: counters (trace_waits.c), cookie names (trace_names.c), buffer handles
     * (trace_bufs.c), cb_actions and callbacks in flight (trace_cb.c), thread names
     * (trace_thread.c), requests and owed onPreempts (trace_preempt.c) */
    uint64_t counts[TC__COUNT];
    struct trace_cookie cookies[PROBE_SLOTS];
    struct trace_raw *raws;
    size_t nraws, capraws;
    struct trace_buf *bufs;
    size_t nbufs, capbufs;
    unsigned next_id;
    struct trace_success *succ;
    size_t nsucc, capsucc;
    const struct probe_api *api;
    struct trace_armed armed[CB_KIND__COUNT];
    unsigned busy;           /* callbacks running a cb_action job */
    unsigned inside;         /* callbacks between their `cb` and `cb_return` events */
    unsigned gen;            /* scenario generation: thread names are per scenario */
    unsigned next_worker;    /* the N of the next "w<N>" */
    unsigned async_inflight; /* allocAsync / loadAsync calls not returned yet */
    unsigned async_blocked;  /* wait_return callbacks that timed out waiting for those calls */
    bool released;           /* the scenario's steps are done: held callbacks return (cb_action hold) */
    struct trace_reqinfo *reqs;
    size_t nreqs, capreqs;
    struct trace_pcookie *pcs;
    size_t npcs, cappcs;
    uint64_t owed_any;    /* onPreempts owed by preempt=lowest: any cookie's */
    uint64_t spare_floor; /* onPreempts no command owed, seen before the first preempt=lowest: not its */
};

/* ---- the writer and its lock (trace_writer.c) ---- */

struct trace_state *trace_lock(void);
void trace_unlock(struct trace_state *st);
/* Appends `,"t":<ns>}` and a newline to the event and writes it in one write(2). */
void trace_emit_locked(struct trace_state *st, struct jbuf *ev);
/* Sleeps until woken; the lock is released meanwhile. */
void trace_sleep_locked(struct trace_state *st);
/* The same, or until the CLOCK_MONOTONIC deadline: false once it has passed. */
bool trace_sleep_until_locked(struct trace_state *st, const struct timespec *deadline);
/* As trace_sleep_until_locked, but where the device is told of waits (vnpu_waiting) at most
 * TRACE_TELL_AGAIN_NS at a time, then true as if woken, so that the waiter tells it again: a job the
 * device ran without a callback the probe sees clears what it was told. False once `deadline` passed. */
bool trace_nap_locked(struct trace_state *st, const struct timespec *deadline);
/* Wakes every waiter: a counter, a callback or a preemption changed. */
void trace_wake_all_locked(struct trace_state *st);
/* Tells the device the application now waits for callbacks (vnpu_waiting, where the library has it),
 * the lock released meanwhile: a waiter calls it before it sleeps, then checks its condition again. */
void trace_tell_waiting_locked(struct trace_state *st);
/* Makes room for `need` elements in a growing array (aborts when memory runs out). */
void *trace_grow(void *arr, size_t *cap, size_t need, size_t elem);

/* ---- the calling thread (trace_thread.c) ---- */

/* How deep the calling thread is inside API calls (0: not in one). */
unsigned trace_api_depth(void);
const char *trace_thread_name_locked(struct trace_state *st);

/* ---- how events name cookies and errors (trace_names.c) ---- */

/* The pool slot of `cookie`, or -1 when it is not a probe cookie object. */
int trace_cookie_slot_locked(struct trace_state *st, const void *cookie);
/* Writes the cookie's trace value; *deleted tells whether its deleter already ran for every handing. */
void trace_cookie_json_locked(struct trace_state *st, struct jbuf *ev, const void *cookie, bool *deleted);
void trace_error_json(struct jbuf *ev, int error);

/* ---- the buffer-handle registry (trace_bufs.c) ---- */

/* Registry index of a live handle for `buf`, assigning the next B<N> at first sight. */
size_t trace_buf_index_locked(struct trace_state *st, ANpuBuffer *buf);
/* Registry index of the latest handle for `buf`, live or freed: onLoad names the buffer passed to
 * loadAsync even when the application freed it while the load was in flight. */
size_t trace_buf_index_any_locked(struct trace_state *st, ANpuBuffer *buf);
void trace_buf_json_locked(struct trace_state *st, struct jbuf *jb, const char *key, size_t index);

/* ---- requests and owed onPreempts (trace_preempt.c) ---- */

struct trace_pcookie *trace_pcookie_locked(struct trace_state *st, const void *cookie, bool create);
/* An onAlloc for `cookie`: whether the submission it answers may have had onPreempt. */
bool trace_answered_locked(struct trace_state *st, const void *cookie);
/* The buffer an onPreempt of `cookie` acts on (registry index), or TRACE_NO_BUF. */
size_t trace_buffer_of_cookie_locked(struct trace_state *st, const void *cookie);

#endif
