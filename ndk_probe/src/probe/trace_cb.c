/* Callbacks as the trace records them: their `cb`, `cb_return` and `deleter` events, the cb_actions
 * armed for them, and the teardown waits for callbacks still in flight. */
#include <string.h>

#include "clock.h"
#include "trace_state.h"

void trace_arm(const struct probe_cb_action *action, ANpuManager_AllocRequest *req, uint64_t count, size_t step) {
    struct trace_state *st = trace_lock();
    st->armed[action->kind] = (struct trace_armed){*action, req, action->act == CB_ACT_NONE ? 0 : count, step};
    trace_unlock(st);
}

void trace_hold(uint64_t budget_ns) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    struct trace_state *st = trace_lock();
    while (!st->released) {
        if (!trace_sleep_until_locked(st, &deadline)) {
            break;
        }
    }
    trace_unlock(st);
}

void trace_release_holds(void) {
    struct trace_state *st = trace_lock();
    st->released = true;
    trace_wake_all_locked(st);
    trace_unlock(st);
}

void trace_disarm_all(void) {
    struct trace_state *st = trace_lock();
    memset(st->armed, 0, sizeof st->armed);
    while (st->busy > 0) {
        trace_sleep_locked(st);
    }
    trace_unlock(st);
}

/* Whether an armed action applies to this callback; if so the job is filled and one use consumed. */
static void decide_locked(struct trace_state *st, enum probe_cb_kind kind, size_t index, struct trace_job *job) {
    memset(job, 0, sizeof *job);
    job->act = CB_ACT_NONE;
    job->buf = TRACE_NO_BUF;
    struct trace_armed *a = &st->armed[kind];
    if (a->count == 0 || a->action.act == CB_ACT_NONE) {
        return;
    }
    if ((a->action.act == CB_ACT_WAIT_RETURN || a->action.act == CB_ACT_HOLD) && trace_api_depth() > 0) {
        /* on a thread of the program inside a call: waiting for that call's return, or for the program
         * to finish its steps, would only time out */
        return;
    }
    if (a->action.act != CB_ACT_ALLOC && a->action.act != CB_ACT_WAIT_RETURN && a->action.act != CB_ACT_SLEEP &&
        a->action.act != CB_ACT_HOLD && a->action.act != CB_ACT_NEW_REQUEST) {
        /* Buffer actions need a buffer: none for a failed onAlloc; onPreempt's was chosen by cookie. */
        if (index == TRACE_NO_BUF || !st->bufs[index].live) {
            return;
        }
        job->buf = index;
        job->ptr = st->bufs[index].ptr;
    }
    job->act = a->action.act;
    job->kind = kind;
    job->step = a->step;
    job->priority = a->action.priority;
    job->req_slot = a->action.req_slot;
    job->wait_ns = a->action.wait_ns;
    job->req = a->req;
    job->api = st->api;
    a->count--;
    st->busy++;
}

/* Opens the event of a callback (`kind`) or of a deleter (kind NULL) and takes the trace lock:
 * {"ev":<name>, the kind, the cookie. *deleted: the cookie's deleter ran already. */
static struct trace_state *open_event(struct jbuf *ev, const char *name, const char *kind, const void *cookie,
                                      bool *deleted) {
    trace_event_open(ev, name);
    struct trace_state *st = trace_lock();
    if (kind != NULL) {
        jb_str(ev, "kind", kind);
    }
    trace_cookie_json_locked(st, ev, cookie, deleted);
    return st;
}

/* The thread a callback or deleter runs on: inside a call of the program ("caller") or not, and its name. */
static void thread_fields_locked(struct trace_state *st, struct jbuf *ev) {
    jb_str(ev, "thread", trace_api_depth() > 0 ? "caller" : "other");
    jb_str(ev, "th", trace_thread_name_locked(st));
}

static void callback_event(enum probe_cb_kind kind, void *cookie, bool with_result, int error, ANpuBuffer *buf,
                           struct trace_job *job) {
    struct jbuf ev;
    bool deleted;
    struct trace_state *st = open_event(&ev, NPUCONF_EV_CB, program_cb_kind_name(kind), cookie, &deleted);
    size_t index = TRACE_NO_BUF;
    if (with_result) {
        if (buf != NULL) {
            index = kind == CB_KIND_LOAD ? trace_buf_index_any_locked(st, buf) : trace_buf_index_locked(st, buf);
        }
        trace_error_json(&ev, error);
        trace_buf_json_locked(st, &ev, "buf", index);
        bool may_onpreempt = kind == CB_KIND_ALLOC && trace_answered_locked(st, cookie);
        if (kind == CB_KIND_ALLOC && error == 0 && index != TRACE_NO_BUF) {
            st->succ = trace_grow(st->succ, &st->capsucc, st->nsucc + 1, sizeof *st->succ);
            st->succ[st->nsucc++] = (struct trace_success){index, cookie, false};
            st->bufs[index].cookie = cookie;
            st->bufs[index].may_onpreempt = may_onpreempt;
        }
    } else if (kind == CB_KIND_PREEMPT) {
        trace_pcookie_locked(st, cookie, true)->seen++;
        index = trace_buffer_of_cookie_locked(st, cookie);
    }
    thread_fields_locked(st, &ev);
    if (deleted) {
        jb_bool(&ev, "cookie_deleted", true);
    }
    bool has_buf = kind == CB_KIND_PREEMPT || (with_result && (kind != CB_KIND_ALLOC || error == 0));
    decide_locked(st, kind, has_buf ? index : TRACE_NO_BUF, job);
    st->inside++;
    if (kind == CB_KIND_ALLOC) {
        st->counts[TC_ALLOC_SEEN]++; /* bind waits for it: the success above is recorded */
        trace_wake_all_locked(st);
    }
    trace_emit_locked(st, &ev);
    trace_unlock(st);
    jb_free(&ev);
}

void trace_record_alloc(void *cookie, int error, ANpuBuffer *buf, struct trace_job *job) {
    callback_event(CB_KIND_ALLOC, cookie, true, error, buf, job);
}

void trace_record_load(void *cookie, int error, ANpuBuffer *buf, struct trace_job *job) {
    callback_event(CB_KIND_LOAD, cookie, true, error, buf, job);
}

void trace_record_preempt(void *cookie, struct trace_job *job) {
    callback_event(CB_KIND_PREEMPT, cookie, false, 0, NULL, job);
}

void trace_callback_done(enum trace_counter c, enum probe_cb_kind kind, void *cookie, const struct trace_job *job) {
    /* The callback's last act: the borrow of its cookie ends when it returns (docs/formats.md §5). */
    struct jbuf ev;
    bool deleted;
    struct trace_state *st = open_event(&ev, NPUCONF_EV_CB_RETURN, program_cb_kind_name(kind), cookie, &deleted);
    jb_str(&ev, "th", trace_thread_name_locked(st));
    trace_emit_locked(st, &ev);
    st->counts[c]++;
    if (job->act != CB_ACT_NONE) {
        st->busy--;
    }
    st->inside--;
    trace_wake_all_locked(st);
    trace_unlock(st);
    jb_free(&ev);
}

bool trace_wait_callbacks(uint64_t budget_ns) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    struct trace_state *st = trace_lock();
    while (st->inside > 0) {
        if (!trace_sleep_until_locked(st, &deadline)) {
            break;
        }
    }
    bool quiet = st->inside == 0;
    trace_unlock(st);
    return quiet;
}

void trace_record_deleter(void *cookie, int fn) {
    /* Named before counting, so cookie_deleted marks a deleter run more often than handed over. */
    struct jbuf ev;
    bool deleted;
    struct trace_state *st = open_event(&ev, NPUCONF_EV_DELETER, NULL, cookie, &deleted);
    thread_fields_locked(st, &ev);
    jb_i64(&ev, "fn", fn);
    if (deleted) {
        jb_bool(&ev, "cookie_deleted", true);
    }
    int slot = trace_cookie_slot_locked(st, cookie);
    if (slot >= 0) {
        st->cookies[slot].deleted++;
    }
    st->counts[TC_DELETER]++;
    trace_emit_locked(st, &ev);
    trace_wake_all_locked(st);
    trace_unlock(st);
    jb_free(&ev);
}
