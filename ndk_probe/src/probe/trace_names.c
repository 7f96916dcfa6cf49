/* How events name cookies (pool slots c<N>, raw values the scenario stored, else the address) and
 * errors; the cookie pool counts handings and deleter runs for `cookie_deleted`. */
#include <inttypes.h>
#include <stdio.h>

#include "trace_state.h"
#include "vocab.h"

void *trace_cookie_ptr(unsigned slot) {
    struct trace_state *st = trace_lock();
    void *p = &st->cookies[slot];
    trace_unlock(st);
    return p;
}

int trace_cookie_slot_locked(struct trace_state *st, const void *cookie) {
    uintptr_t c = (uintptr_t)cookie;
    uintptr_t base = (uintptr_t)&st->cookies[0];
    if (c < base || c >= (uintptr_t)&st->cookies[PROBE_SLOTS] || (c - base) % sizeof st->cookies[0] != 0) {
        return -1;
    }
    return (int)((c - base) / sizeof st->cookies[0]);
}

void trace_cookie_handed(const struct probe_arg *cookie) {
    struct trace_state *st = trace_lock();
    st->counts[TC_HANDED]++;
    if (cookie->v.cookie.sel == COOKIE_SLOT) {
        st->cookies[cookie->v.cookie.slot].handed++;
    }
    trace_unlock(st);
}

void trace_raw_register(const struct probe_arg *cookie) {
    struct trace_state *st = trace_lock();
    st->raws = trace_grow(st->raws, &st->capraws, st->nraws + 1, sizeof *st->raws);
    st->raws[st->nraws].bits = cookie->v.cookie.raw;
    program_raw_cookie_text(cookie, st->raws[st->nraws].text);
    st->nraws++;
    trace_unlock(st);
}

void trace_cookie_json_locked(struct trace_state *st, struct jbuf *ev, const void *cookie, bool *deleted) {
    *deleted = false;
    if (cookie == NULL) {
        jb_null(ev, "cookie");
        return;
    }
    int slot = trace_cookie_slot_locked(st, cookie);
    char text[40];
    if (slot >= 0) {
        const struct trace_cookie *c = &st->cookies[slot];
        *deleted = c->deleted > 0 && c->deleted >= c->handed;
        snprintf(text, sizeof text, "c%d", slot);
        jb_str(ev, "cookie", text);
        return;
    }
    for (size_t i = 0; i < st->nraws; i++) {
        if (st->raws[i].bits == (uintptr_t)cookie) {
            jb_str(ev, "cookie", st->raws[i].text);
            return;
        }
    }
    snprintf(text, sizeof text, "?0x%" PRIxPTR, (uintptr_t)cookie);
    jb_str(ev, "cookie", text);
}

void trace_error_json(struct jbuf *ev, int error) {
    if (error == 0) {
        jb_i64(ev, "error", 0);
    } else {
        char tmp[16];
        jb_str(ev, "error", vocab_errno_name(error, tmp));
    }
}
