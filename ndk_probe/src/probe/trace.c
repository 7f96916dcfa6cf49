#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "vocab.h"

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
    const void *cookie; /* as received by its onAlloc */
    bool may_onpreempt; /* a submission that may have produced it had onPreempt set */
    bool targeted;      /* named by a vnpu preempt=<buffer> (its onPreempt may come before the call returns) */
    bool commanded;     /* a vnpu preempt=<buffer> confirmed preempting it */
    bool credited;      /* an onPreempt was given to it (what onPreempt's actions act on) */
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

/* The single mutable global of the probe (see trace.h). */
static struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
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
    unsigned busy;        /* callbacks running a cb_action job */
    unsigned inside;      /* callbacks between their `cb` and `cb_return` events */
    unsigned gen;         /* scenario generation: thread names are per scenario */
    unsigned next_worker; /* the N of the next "w<N>" */
    unsigned async_inflight; /* allocAsync / loadAsync calls not returned yet */
    unsigned async_blocked;  /* wait_return callbacks that timed out waiting for those calls */
    struct trace_reqinfo *reqs;
    size_t nreqs, capreqs;
    struct trace_pcookie *pcs;
    size_t npcs, cappcs;
    uint64_t owed_any; /* onPreempts owed by preempt=lowest: any cookie's */
} rec;

/* Per-thread facts, set and read only by their own thread. */
static _Thread_local unsigned api_depth;
static _Thread_local char th_name[16];
static _Thread_local unsigned th_gen;
static _Thread_local const char *in_cb;

static void *grow(void *arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return arr;
    }
    size_t cap2 = *cap ? *cap * 2 : 16;
    void *p = realloc(arr, cap2 * elem);
    if (p == NULL) {
        abort(); /* a callback has no way to report failure */
    }
    *cap = cap2;
    return p;
}

void trace_init(int fd) {
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutex_init(&rec.mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    /* Budgets are CLOCK_MONOTONIC; wall-clock steps must not stretch or cut a wait. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rec.cv, &ca);
    pthread_condattr_destroy(&ca);
    rec.fd = fd;
    rec.next_id = 1;
    rec.gen = 1;
    rec.next_worker = 1;
}

void trace_reset(const struct probe_api *api) {
    pthread_mutex_lock(&rec.mu);
    rec.api = api;
    memset(rec.armed, 0, sizeof rec.armed);
    rec.busy = 0;
    rec.inside = 0;
    rec.async_inflight = 0;
    rec.async_blocked = 0;
    rec.gen++;
    rec.next_worker = 1;
    memset(rec.counts, 0, sizeof rec.counts);
    memset(rec.cookies, 0, sizeof rec.cookies);
    rec.nraws = 0;
    rec.nbufs = 0;
    rec.nsucc = 0;
    rec.next_id = 1;
    rec.nreqs = 0;
    rec.npcs = 0;
    rec.owed_any = 0;
    pthread_mutex_unlock(&rec.mu);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; /* the reader is gone; nothing left to tell */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void emit_locked(struct jbuf *ev) {
    jb_u64(ev, "t", probe_now_ns());
    jb_raw(ev, "}\n");
    int saved = errno;
    write_all(rec.fd, ev->p, ev->len);
    errno = saved;
}

void trace_emit(struct jbuf *ev) {
    pthread_mutex_lock(&rec.mu);
    emit_locked(ev);
    pthread_mutex_unlock(&rec.mu);
}

void trace_api_enter(void) { api_depth++; }
void trace_api_leave(void) { api_depth--; }

void trace_set_thread(const char *name) {
    pthread_mutex_lock(&rec.mu);
    snprintf(th_name, sizeof th_name, "%s", name);
    th_gen = rec.gen;
    pthread_mutex_unlock(&rec.mu);
}

static const char *thread_name_locked(void) {
    if (th_gen != rec.gen || th_name[0] == '\0') {
        snprintf(th_name, sizeof th_name, "w%u", rec.next_worker++);
        th_gen = rec.gen;
    }
    return th_name;
}

void trace_thread_name(char out[16]) {
    pthread_mutex_lock(&rec.mu);
    snprintf(out, 16, "%s", thread_name_locked());
    pthread_mutex_unlock(&rec.mu);
}

const char *trace_in_cb(void) { return in_cb; }

const char *trace_set_in_cb(const char *kind) {
    const char *prev = in_cb;
    in_cb = kind;
    return prev;
}

void trace_count_add(enum trace_counter c, uint64_t n) {
    pthread_mutex_lock(&rec.mu);
    rec.counts[c] += n;
    pthread_mutex_unlock(&rec.mu);
}

void trace_arm(const struct probe_cb_action *action, ANpuManager_AllocRequest *req, uint64_t count, size_t step) {
    pthread_mutex_lock(&rec.mu);
    rec.armed[action->kind] = (struct trace_armed){*action, req, action->act == CB_ACT_NONE ? 0 : count, step};
    pthread_mutex_unlock(&rec.mu);
}

void trace_disarm_all(void) {
    pthread_mutex_lock(&rec.mu);
    memset(rec.armed, 0, sizeof rec.armed);
    while (rec.busy > 0) {
        pthread_cond_wait(&rec.cv, &rec.mu);
    }
    pthread_mutex_unlock(&rec.mu);
}

void *trace_cookie_ptr(unsigned slot) { return &rec.cookies[slot]; }

/* The pool slot of `cookie`, or -1 when it is not a probe cookie object. */
static int cookie_slot_locked(const void *cookie) {
    uintptr_t c = (uintptr_t)cookie;
    uintptr_t base = (uintptr_t)&rec.cookies[0];
    if (c < base || c >= (uintptr_t)&rec.cookies[PROBE_SLOTS] || (c - base) % sizeof rec.cookies[0] != 0) {
        return -1;
    }
    return (int)((c - base) / sizeof rec.cookies[0]);
}

void trace_cookie_handed(const struct probe_arg *cookie) {
    pthread_mutex_lock(&rec.mu);
    rec.counts[TC_HANDED]++;
    if (cookie->v.cookie.sel == COOKIE_SLOT) {
        rec.cookies[cookie->v.cookie.slot].handed++;
    }
    pthread_mutex_unlock(&rec.mu);
}

void trace_raw_register(const struct probe_arg *cookie) {
    pthread_mutex_lock(&rec.mu);
    rec.raws = grow(rec.raws, &rec.capraws, rec.nraws + 1, sizeof *rec.raws);
    rec.raws[rec.nraws].bits = cookie->v.cookie.raw;
    program_raw_cookie_text(cookie, rec.raws[rec.nraws].text);
    rec.nraws++;
    pthread_mutex_unlock(&rec.mu);
}

/* Writes the cookie's trace value; *deleted tells whether its deleter already ran for every handing. */
static void cookie_json_locked(struct jbuf *ev, const void *cookie, bool *deleted) {
    *deleted = false;
    if (cookie == NULL) {
        jb_null(ev, "cookie");
        return;
    }
    int slot = cookie_slot_locked(cookie);
    char text[40];
    if (slot >= 0) {
        const struct trace_cookie *c = &rec.cookies[slot];
        *deleted = c->deleted > 0 && c->deleted >= c->handed;
        snprintf(text, sizeof text, "c%d", slot);
        jb_str(ev, "cookie", text);
        return;
    }
    for (size_t i = 0; i < rec.nraws; i++) {
        if (rec.raws[i].bits == (uintptr_t)cookie) {
            jb_str(ev, "cookie", rec.raws[i].text);
            return;
        }
    }
    snprintf(text, sizeof text, "?0x%" PRIxPTR, (uintptr_t)cookie);
    jb_str(ev, "cookie", text);
}

/* Registry index of the latest handle for `buf`, live or freed: onLoad names the buffer passed to
 * loadAsync even when the application freed it while the load was in flight. */
static size_t buf_index_any_locked(ANpuBuffer *buf);

/* Registry index of a live handle for `buf`, assigning the next B<N> at first sight. */
static size_t buf_index_locked(ANpuBuffer *buf) {
    for (size_t i = rec.nbufs; i-- > 0;) {
        if (rec.bufs[i].live && rec.bufs[i].ptr == buf) {
            return i;
        }
    }
    rec.bufs = grow(rec.bufs, &rec.capbufs, rec.nbufs + 1, sizeof *rec.bufs);
    rec.bufs[rec.nbufs] = (struct trace_buf){buf, rec.next_id++, true, NULL, false, false, false, false, 0};
    return rec.nbufs++;
}

static size_t buf_index_any_locked(ANpuBuffer *buf) {
    for (size_t i = rec.nbufs; i-- > 0;) {
        if (rec.bufs[i].ptr == buf) {
            return i;
        }
    }
    return buf_index_locked(buf);
}

static void buf_json_locked(struct jbuf *ev, size_t index) {
    if (index == TRACE_NO_BUF) {
        jb_null(ev, "buf");
        return;
    }
    char text[24];
    snprintf(text, sizeof text, "B%u", rec.bufs[index].id);
    jb_str(ev, "buf", text);
}

static void error_json(struct jbuf *ev, int error) {
    if (error == 0) {
        jb_i64(ev, "error", 0);
    } else {
        char tmp[16];
        jb_str(ev, "error", vocab_errno_name(error, tmp));
    }
}

static struct trace_reqinfo *reqinfo_locked(const ANpuManager_AllocRequest *req, bool create) {
    for (size_t i = 0; i < rec.nreqs; i++) {
        if (rec.reqs[i].req == req) {
            return &rec.reqs[i];
        }
    }
    if (!create) {
        return NULL;
    }
    rec.reqs = grow(rec.reqs, &rec.capreqs, rec.nreqs + 1, sizeof *rec.reqs);
    rec.reqs[rec.nreqs] = (struct trace_reqinfo){req, NULL, false};
    return &rec.reqs[rec.nreqs++];
}

static struct trace_pcookie *pcookie_locked(const void *cookie, bool create) {
    for (size_t i = 0; i < rec.npcs; i++) {
        if (rec.pcs[i].cookie == cookie) {
            return &rec.pcs[i];
        }
    }
    if (!create) {
        return NULL;
    }
    rec.pcs = grow(rec.pcs, &rec.cappcs, rec.npcs + 1, sizeof *rec.pcs);
    rec.pcs[rec.npcs] = (struct trace_pcookie){cookie, 0, 0, 0, 0};
    return &rec.pcs[rec.npcs++];
}

void trace_req_created(const ANpuManager_AllocRequest *req) {
    pthread_mutex_lock(&rec.mu);
    struct trace_reqinfo *r = reqinfo_locked(req, true);
    r->cookie = NULL; /* the defaults: no cookie, no onPreempt (a freed request's address may come back) */
    r->onpreempt = false;
    pthread_mutex_unlock(&rec.mu);
}

void trace_req_cookie(const ANpuManager_AllocRequest *req, const void *cookie) {
    pthread_mutex_lock(&rec.mu);
    reqinfo_locked(req, true)->cookie = cookie;
    pthread_mutex_unlock(&rec.mu);
}

void trace_req_onpreempt(const ANpuManager_AllocRequest *req, bool set) {
    pthread_mutex_lock(&rec.mu);
    reqinfo_locked(req, true)->onpreempt = set;
    pthread_mutex_unlock(&rec.mu);
}

void trace_submitted(ANpuManager_AllocRequest *const *reqs, size_t n) {
    pthread_mutex_lock(&rec.mu);
    for (size_t i = 0; i < n; i++) {
        const struct trace_reqinfo *r = reqinfo_locked(reqs[i], false);
        struct trace_pcookie *pc = pcookie_locked(r != NULL ? r->cookie : NULL, true);
        pc->pending++;
        /* A request the probe knows nothing of may have onPreempt: counted as if it had. */
        pc->pending_onpreempt += r == NULL || r->onpreempt;
    }
    pthread_mutex_unlock(&rec.mu);
}

/* An onAlloc for `cookie`: whether the submission it answers may have had onPreempt. Exact when every
 * submission of that cookie still unanswered agrees; otherwise "may" (the settle then waits longer
 * than needed, never shorter). */
static bool answered_locked(const void *cookie) {
    struct trace_pcookie *pc = pcookie_locked(cookie, false);
    if (pc == NULL || pc->pending == 0) {
        return false; /* a cookie no submission carried: the model judges that callback */
    }
    bool may = pc->pending_onpreempt > 0;
    if (pc->pending_onpreempt == pc->pending) {
        pc->pending_onpreempt--;
    }
    pc->pending--;
    if (pc->pending_onpreempt > pc->pending) {
        pc->pending_onpreempt = pc->pending;
    }
    return may;
}

void trace_preempt_targeted(size_t index, bool on) {
    pthread_mutex_lock(&rec.mu);
    if (index < rec.nbufs && !rec.bufs[index].commanded) {
        rec.bufs[index].targeted = on;
        if (on) {
            const struct trace_pcookie *pc = pcookie_locked(rec.bufs[index].cookie, false);
            rec.bufs[index].seen_before = pc != NULL ? pc->seen : 0;
        }
    }
    pthread_mutex_unlock(&rec.mu);
}

void trace_preempt_commanded(size_t index) {
    pthread_mutex_lock(&rec.mu);
    if (index < rec.nbufs && !rec.bufs[index].commanded) {
        rec.bufs[index].commanded = true;
        rec.bufs[index].targeted = true;
        if (rec.bufs[index].may_onpreempt) {
            /* One more onPreempt of the cookie than were seen before the command (an earlier one, e.g.
             * inside a free, must not end the wait), and than earlier commands already owe. */
            struct trace_pcookie *pc = pcookie_locked(rec.bufs[index].cookie, true);
            uint64_t floor = rec.bufs[index].seen_before > pc->owed ? rec.bufs[index].seen_before : pc->owed;
            pc->owed = floor + 1;
        }
    }
    pthread_mutex_unlock(&rec.mu);
}

void trace_preempt_lowest(void) {
    pthread_mutex_lock(&rec.mu);
    for (size_t i = 0; i < rec.nbufs; i++) {
        if (rec.bufs[i].live && rec.bufs[i].may_onpreempt && !rec.bufs[i].commanded) {
            rec.owed_any++; /* the victim is not named: one onPreempt of any cookie */
            break;
        }
    }
    pthread_mutex_unlock(&rec.mu);
}

static void preempts_locked(uint64_t *expected, uint64_t *got) {
    uint64_t exp = rec.owed_any, have = 0, spare = 0;
    for (size_t i = 0; i < rec.npcs; i++) {
        const struct trace_pcookie *pc = &rec.pcs[i];
        exp += pc->owed;
        have += pc->seen < pc->owed ? pc->seen : pc->owed;
        spare += pc->seen > pc->owed ? pc->seen - pc->owed : 0;
    }
    have += spare < rec.owed_any ? spare : rec.owed_any;
    *expected = exp;
    *got = have;
}

bool trace_wait_preempts(uint64_t budget_ns, uint64_t *expected, uint64_t *got) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    pthread_mutex_lock(&rec.mu);
    preempts_locked(expected, got);
    while (*got < *expected) {
        if (pthread_cond_timedwait(&rec.cv, &rec.mu, &deadline) == ETIMEDOUT) {
            preempts_locked(expected, got);
            break;
        }
        preempts_locked(expected, got);
    }
    pthread_mutex_unlock(&rec.mu);
    return *got >= *expected;
}

/* What onPreempt's actions act on: onPreempt names only its cookie. Among the live buffers received
 * with `cookie` (onAlloc order), the first one a vnpu command named (in flight or confirmed) that has
 * not been given an onPreempt yet, else the first one not given one, else the first one. */
static size_t buffer_of_cookie_locked(const void *cookie) {
    size_t pick[3] = {TRACE_NO_BUF, TRACE_NO_BUF, TRACE_NO_BUF};
    for (size_t i = 0; i < rec.nsucc; i++) {
        const struct trace_buf *b = &rec.bufs[rec.succ[i].buf];
        if (rec.succ[i].cookie != cookie || !b->live) {
            continue;
        }
        size_t rank = b->credited ? 2 : b->targeted ? 0 : 1;
        if (pick[rank] == TRACE_NO_BUF) {
            pick[rank] = rec.succ[i].buf;
        }
    }
    size_t found = pick[0] != TRACE_NO_BUF ? pick[0] : pick[1] != TRACE_NO_BUF ? pick[1] : pick[2];
    if (found != TRACE_NO_BUF) {
        rec.bufs[found].credited = true;
    }
    return found;
}

/* Whether an armed action applies to this callback; if so the job is filled and one use consumed. */
static void decide_locked(enum probe_cb_kind kind, size_t index, struct trace_job *job) {
    memset(job, 0, sizeof *job);
    job->act = CB_ACT_NONE;
    job->buf = TRACE_NO_BUF;
    struct trace_armed *a = &rec.armed[kind];
    if (a->count == 0 || a->action.act == CB_ACT_NONE) {
        return;
    }
    if (a->action.act == CB_ACT_WAIT_RETURN && api_depth > 0) {
        return; /* on the calling thread inside a call: waiting for its return would only time out */
    }
    if (a->action.act != CB_ACT_ALLOC && a->action.act != CB_ACT_WAIT_RETURN && a->action.act != CB_ACT_SLEEP) {
        /* Buffer actions need a buffer: none for a failed onAlloc; onPreempt's was chosen by cookie. */
        if (index == TRACE_NO_BUF || !rec.bufs[index].live) {
            return;
        }
        job->buf = index;
        job->ptr = rec.bufs[index].ptr;
    }
    job->act = a->action.act;
    job->kind = kind;
    job->step = a->step;
    job->priority = a->action.priority;
    job->req_slot = a->action.req_slot;
    job->wait_ns = a->action.wait_ns;
    job->req = a->req;
    job->api = rec.api;
    a->count--;
    rec.busy++;
}

static void callback_event(enum probe_cb_kind kind, void *cookie, bool with_result, int error, ANpuBuffer *buf,
                           struct trace_job *job) {
    struct jbuf ev;
    jb_init(&ev);
    pthread_mutex_lock(&rec.mu);
    jb_raw(&ev, "{\"ev\":\"cb\"");
    jb_str(&ev, "kind", program_cb_kind_name(kind));
    bool deleted;
    cookie_json_locked(&ev, cookie, &deleted);
    size_t index = TRACE_NO_BUF;
    if (with_result) {
        if (buf != NULL) {
            index = kind == CB_KIND_LOAD ? buf_index_any_locked(buf) : buf_index_locked(buf);
        }
        error_json(&ev, error);
        buf_json_locked(&ev, index);
        bool may_onpreempt = kind == CB_KIND_ALLOC && answered_locked(cookie);
        if (kind == CB_KIND_ALLOC && error == 0 && index != TRACE_NO_BUF) {
            rec.succ = grow(rec.succ, &rec.capsucc, rec.nsucc + 1, sizeof *rec.succ);
            rec.succ[rec.nsucc++] = (struct trace_success){index, cookie, false};
            rec.bufs[index].cookie = cookie;
            rec.bufs[index].may_onpreempt = may_onpreempt;
        }
    } else if (kind == CB_KIND_PREEMPT) {
        pcookie_locked(cookie, true)->seen++;
        index = buffer_of_cookie_locked(cookie);
    }
    jb_str(&ev, "thread", api_depth > 0 ? "caller" : "other");
    jb_str(&ev, "th", thread_name_locked());
    if (deleted) {
        jb_bool(&ev, "cookie_deleted", true);
    }
    bool has_buf = kind == CB_KIND_PREEMPT || (with_result && (kind != CB_KIND_ALLOC || error == 0));
    decide_locked(kind, has_buf ? index : TRACE_NO_BUF, job);
    rec.inside++;
    emit_locked(&ev);
    pthread_mutex_unlock(&rec.mu);
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
    struct jbuf ev;
    jb_init(&ev);
    pthread_mutex_lock(&rec.mu);
    /* The callback's last act: the borrow of its cookie ends when it returns (docs/formats.md §5). */
    jb_raw(&ev, "{\"ev\":\"cb_return\"");
    jb_str(&ev, "kind", program_cb_kind_name(kind));
    bool deleted;
    cookie_json_locked(&ev, cookie, &deleted);
    jb_str(&ev, "th", thread_name_locked());
    emit_locked(&ev);
    rec.counts[c]++;
    if (job->act != CB_ACT_NONE) {
        rec.busy--;
    }
    rec.inside--;
    pthread_cond_broadcast(&rec.cv);
    pthread_mutex_unlock(&rec.mu);
    jb_free(&ev);
}

bool trace_wait_callbacks(uint64_t budget_ns) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    pthread_mutex_lock(&rec.mu);
    while (rec.inside > 0) {
        if (pthread_cond_timedwait(&rec.cv, &rec.mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    bool quiet = rec.inside == 0;
    pthread_mutex_unlock(&rec.mu);
    return quiet;
}

void trace_record_deleter(void *cookie, int fn) {
    struct jbuf ev;
    jb_init(&ev);
    pthread_mutex_lock(&rec.mu);
    jb_raw(&ev, "{\"ev\":\"deleter\"");
    bool deleted;
    /* Named before counting, so cookie_deleted marks a deleter run more often than handed over. */
    cookie_json_locked(&ev, cookie, &deleted);
    jb_str(&ev, "thread", api_depth > 0 ? "caller" : "other");
    jb_str(&ev, "th", thread_name_locked());
    jb_i64(&ev, "fn", fn);
    if (deleted) {
        jb_bool(&ev, "cookie_deleted", true);
    }
    int slot = cookie_slot_locked(cookie);
    if (slot >= 0) {
        rec.cookies[slot].deleted++;
    }
    rec.counts[TC_DELETER]++;
    emit_locked(&ev);
    pthread_cond_broadcast(&rec.cv);
    pthread_mutex_unlock(&rec.mu);
    jb_free(&ev);
}

ANpuBuffer *trace_buf_ptr(size_t index) {
    pthread_mutex_lock(&rec.mu);
    ANpuBuffer *p = index < rec.nbufs ? rec.bufs[index].ptr : NULL;
    pthread_mutex_unlock(&rec.mu);
    return p;
}

bool trace_buf_live(size_t index) {
    pthread_mutex_lock(&rec.mu);
    bool live = index < rec.nbufs && rec.bufs[index].live;
    pthread_mutex_unlock(&rec.mu);
    return live;
}

void trace_buf_id(size_t index, char out[24]) {
    pthread_mutex_lock(&rec.mu);
    snprintf(out, 24, "B%u", index < rec.nbufs ? rec.bufs[index].id : 0u);
    pthread_mutex_unlock(&rec.mu);
}

void trace_buf_retire(size_t index) {
    pthread_mutex_lock(&rec.mu);
    if (index < rec.nbufs) {
        rec.bufs[index].live = false;
    }
    pthread_mutex_unlock(&rec.mu);
}

size_t trace_bind_cookie(unsigned cookie_slot) {
    size_t found = TRACE_NO_BUF;
    pthread_mutex_lock(&rec.mu);
    for (size_t i = 0; i < rec.nsucc; i++) {
        if (!rec.succ[i].bound && rec.succ[i].cookie == (const void *)&rec.cookies[cookie_slot]) {
            rec.succ[i].bound = true;
            found = rec.succ[i].buf;
            break;
        }
    }
    pthread_mutex_unlock(&rec.mu);
    return found;
}

size_t trace_bind_nth(uint64_t nth) {
    size_t found = TRACE_NO_BUF;
    pthread_mutex_lock(&rec.mu);
    if (nth < rec.nsucc) {
        rec.succ[nth].bound = true;
        found = rec.succ[nth].buf;
    }
    pthread_mutex_unlock(&rec.mu);
    return found;
}

size_t *trace_unfreed_successes(size_t *n) {
    pthread_mutex_lock(&rec.mu);
    size_t *out = malloc((rec.nsucc ? rec.nsucc : 1) * sizeof *out);
    if (out == NULL) {
        abort();
    }
    *n = 0;
    for (size_t i = 0; i < rec.nsucc; i++) {
        size_t b = rec.succ[i].buf;
        bool dup = false;
        for (size_t j = 0; j < *n; j++) {
            dup = dup || out[j] == b;
        }
        if (!dup && rec.bufs[b].live) {
            out[(*n)++] = b;
        }
    }
    pthread_mutex_unlock(&rec.mu);
    return out;
}

unsigned trace_async_enter(void) {
    pthread_mutex_lock(&rec.mu);
    rec.async_inflight++;
    unsigned blocked = rec.async_blocked;
    pthread_mutex_unlock(&rec.mu);
    return blocked;
}

bool trace_async_leave(unsigned blocked_before) {
    pthread_mutex_lock(&rec.mu);
    rec.async_inflight--;
    bool blocked = rec.async_blocked != blocked_before;
    pthread_cond_broadcast(&rec.cv);
    pthread_mutex_unlock(&rec.mu);
    return blocked;
}

void trace_wait_async_return(uint64_t budget_ns) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    pthread_mutex_lock(&rec.mu);
    while (rec.async_inflight > 0) {
        if (pthread_cond_timedwait(&rec.cv, &rec.mu, &deadline) == ETIMEDOUT) {
            if (rec.async_inflight > 0) {
                rec.async_blocked++;
            }
            break;
        }
    }
    pthread_mutex_unlock(&rec.mu);
}

uint64_t trace_count(enum trace_counter c) {
    pthread_mutex_lock(&rec.mu);
    uint64_t v = rec.counts[c];
    pthread_mutex_unlock(&rec.mu);
    return v;
}

bool trace_wait(enum trace_counter c, uint64_t target, uint64_t budget_ns, uint64_t *got) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    pthread_mutex_lock(&rec.mu);
    while (rec.counts[c] < target) {
        if (pthread_cond_timedwait(&rec.cv, &rec.mu, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    *got = rec.counts[c];
    pthread_mutex_unlock(&rec.mu);
    return *got >= target;
}
