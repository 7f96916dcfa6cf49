/* Owed onPreempts: what the probe set on its requests, its submissions per cookie, the vnpu
 * preemption commands, and the teardown wait until the onPreempts they owe were seen. */
#include "clock.h"
#include "trace_state.h"

static struct trace_reqinfo *reqinfo_locked(struct trace_state *st, const ANpuManager_AllocRequest *req, bool create) {
    for (size_t i = 0; i < st->nreqs; i++) {
        if (st->reqs[i].req == req) {
            return &st->reqs[i];
        }
    }
    if (!create) {
        return NULL;
    }
    st->reqs = trace_grow(st->reqs, &st->capreqs, st->nreqs + 1, sizeof *st->reqs);
    st->reqs[st->nreqs] = (struct trace_reqinfo){req, NULL, false};
    return &st->reqs[st->nreqs++];
}

struct trace_pcookie *trace_pcookie_locked(struct trace_state *st, const void *cookie, bool create) {
    for (size_t i = 0; i < st->npcs; i++) {
        if (st->pcs[i].cookie == cookie) {
            return &st->pcs[i];
        }
    }
    if (!create) {
        return NULL;
    }
    st->pcs = trace_grow(st->pcs, &st->cappcs, st->npcs + 1, sizeof *st->pcs);
    st->pcs[st->npcs] = (struct trace_pcookie){cookie, 0, 0, 0, 0};
    return &st->pcs[st->npcs++];
}

void trace_req_created(const ANpuManager_AllocRequest *req) {
    struct trace_state *st = trace_lock();
    struct trace_reqinfo *r = reqinfo_locked(st, req, true);
    r->cookie = NULL; /* the defaults: no cookie, no onPreempt (a freed request's address may come back) */
    r->onpreempt = false;
    trace_unlock(st);
}

void trace_req_cookie(const ANpuManager_AllocRequest *req, const void *cookie) {
    struct trace_state *st = trace_lock();
    reqinfo_locked(st, req, true)->cookie = cookie;
    trace_unlock(st);
}

void trace_req_onpreempt(const ANpuManager_AllocRequest *req, bool set) {
    struct trace_state *st = trace_lock();
    reqinfo_locked(st, req, true)->onpreempt = set;
    trace_unlock(st);
}

void trace_submitted(ANpuManager_AllocRequest *const *reqs, size_t n) {
    struct trace_state *st = trace_lock();
    for (size_t i = 0; i < n; i++) {
        const struct trace_reqinfo *r = reqinfo_locked(st, reqs[i], false);
        struct trace_pcookie *pc = trace_pcookie_locked(st, r != NULL ? r->cookie : NULL, true);
        pc->pending++;
        /* A request the probe knows nothing of may have onPreempt: counted as if it had. */
        pc->pending_onpreempt += r == NULL || r->onpreempt;
    }
    trace_unlock(st);
}

/* An onAlloc for `cookie`: whether the submission it answers may have had onPreempt. Exact when every
 * submission of that cookie still unanswered agrees; otherwise "may" (the settle then waits longer
 * than needed, never shorter). */
bool trace_answered_locked(struct trace_state *st, const void *cookie) {
    struct trace_pcookie *pc = trace_pcookie_locked(st, cookie, false);
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
    struct trace_state *st = trace_lock();
    if (index < st->nbufs && !st->bufs[index].commanded) {
        st->bufs[index].targeted = on;
        if (on) {
            const struct trace_pcookie *pc = trace_pcookie_locked(st, st->bufs[index].cookie, false);
            st->bufs[index].seen_before = pc != NULL ? pc->seen : 0;
        }
    }
    trace_unlock(st);
}

void trace_preempt_commanded(size_t index) {
    struct trace_state *st = trace_lock();
    if (index < st->nbufs && !st->bufs[index].commanded) {
        st->bufs[index].commanded = true;
        st->bufs[index].targeted = true;
        if (st->bufs[index].may_onpreempt) {
            /* One more onPreempt of the cookie than were seen before the command (an earlier one, e.g.
             * inside a free, must not end the wait), and than earlier commands already owe. */
            struct trace_pcookie *pc = trace_pcookie_locked(st, st->bufs[index].cookie, true);
            uint64_t floor = st->bufs[index].seen_before > pc->owed ? st->bufs[index].seen_before : pc->owed;
            pc->owed = floor + 1;
        }
    }
    trace_unlock(st);
}

/* The onPreempts seen that no command owed. */
static uint64_t spare_locked(const struct trace_state *st) {
    uint64_t spare = 0;
    for (size_t i = 0; i < st->npcs; i++) {
        const struct trace_pcookie *pc = &st->pcs[i];
        spare += pc->seen > pc->owed ? pc->seen - pc->owed : 0;
    }
    return spare;
}

uint64_t trace_preempt_spare(void) {
    struct trace_state *st = trace_lock();
    uint64_t spare = spare_locked(st);
    trace_unlock(st);
    return spare;
}

void trace_preempt_lowest(uint64_t spare_before) {
    struct trace_state *st = trace_lock();
    for (size_t i = 0; i < st->nbufs; i++) {
        if (st->bufs[i].live && st->bufs[i].may_onpreempt && !st->bufs[i].commanded) {
            /* An onPreempt that came before the first such command (e.g. inside a free, which a device
             * may deliver) must not end the wait for its victim's. */
            if (st->owed_any == 0) {
                st->spare_floor = spare_before;
            }
            st->owed_any++; /* the victim is not named: one onPreempt of any cookie */
            break;
        }
    }
    trace_unlock(st);
}

static void preempts_locked(struct trace_state *st, uint64_t *expected, uint64_t *got) {
    uint64_t exp = st->owed_any, have = 0;
    for (size_t i = 0; i < st->npcs; i++) {
        const struct trace_pcookie *pc = &st->pcs[i];
        exp += pc->owed;
        have += pc->seen < pc->owed ? pc->seen : pc->owed;
    }
    uint64_t spare = spare_locked(st);
    spare = spare > st->spare_floor ? spare - st->spare_floor : 0;
    have += spare < st->owed_any ? spare : st->owed_any;
    *expected = exp;
    *got = have;
}

bool trace_wait_preempts(uint64_t budget_ns, uint64_t *expected, uint64_t *got) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    struct trace_state *st = trace_lock();
    preempts_locked(st, expected, got);
    bool told = false; /* as in trace_wait */
    while (*got < *expected) {
        if (!told) {
            told = true;
            trace_tell_waiting_locked(st);
        } else if (!trace_nap_locked(st, &deadline)) {
            preempts_locked(st, expected, got);
            break;
        } else {
            told = false;
        }
        preempts_locked(st, expected, got);
    }
    trace_unlock(st);
    return *got >= *expected;
}

/* What onPreempt's actions act on: onPreempt names only its cookie. Among the live buffers received
 * with `cookie` (onAlloc order), the first one a vnpu command named (in flight or confirmed) that has
 * not been given an onPreempt yet, else the first one not given one, else the first one. */
size_t trace_buffer_of_cookie_locked(struct trace_state *st, const void *cookie) {
    size_t pick[3] = {TRACE_NO_BUF, TRACE_NO_BUF, TRACE_NO_BUF};
    for (size_t i = 0; i < st->nsucc; i++) {
        const struct trace_buf *b = &st->bufs[st->succ[i].buf];
        if (st->succ[i].cookie != cookie || !b->live) {
            continue;
        }
        size_t rank = b->credited ? 2 : b->targeted ? 0 : 1;
        if (pick[rank] == TRACE_NO_BUF) {
            pick[rank] = st->succ[i].buf;
        }
    }
    size_t found = pick[0] != TRACE_NO_BUF ? pick[0] : pick[1] != TRACE_NO_BUF ? pick[1] : pick[2];
    if (found != TRACE_NO_BUF) {
        st->bufs[found].credited = true;
    }
    return found;
}
