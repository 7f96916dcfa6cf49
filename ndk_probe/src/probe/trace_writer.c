/* The trace writer: owns the recorder's state and its one mutex. Every line goes out in one
 * write(2) while the mutex is held, so the trace order is the order in which the probe observed the
 * events; the condvar wakes the waits of the other trace files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "trace_state.h"

/* The single mutable global of the probe (see trace.h): only trace_lock() reaches it. */
static struct trace_state g_state;

void trace_init(int fd) {
    struct trace_state *st = &g_state;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutex_init(&st->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    /* Budgets are CLOCK_MONOTONIC; wall-clock steps must not stretch or cut a wait. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cv, &ca);
    pthread_condattr_destroy(&ca);
    st->fd = fd;
    st->next_id = 1;
    st->gen = 1;
    st->next_worker = 1;
}

void trace_reset(const struct probe_api *api) {
    struct trace_state *st = trace_lock();
    st->api = api;
    memset(st->armed, 0, sizeof st->armed);
    st->busy = 0;
    st->inside = 0;
    st->async_inflight = 0;
    st->async_blocked = 0;
    st->released = false;
    st->gen++;
    st->next_worker = 1;
    memset(st->counts, 0, sizeof st->counts);
    memset(st->cookies, 0, sizeof st->cookies);
    st->nraws = 0;
    st->nbufs = 0;
    st->nsucc = 0;
    st->next_id = 1;
    st->nreqs = 0;
    st->npcs = 0;
    st->owed_any = 0;
    st->spare_floor = 0;
    trace_unlock(st);
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

void trace_event_open(struct jbuf *ev, const char *name) {
    jb_init(ev);
    jb_raw(ev, "{");
    jb_str(ev, "ev", name);
}

void trace_emit_locked(struct trace_state *st, struct jbuf *ev) {
    jb_u64(ev, "t", probe_now_ns());
    jb_raw(ev, "}\n");
    int saved = errno;
    write_all(st->fd, ev->p, ev->len);
    errno = saved;
}

void trace_emit(struct jbuf *ev) {
    struct trace_state *st = trace_lock();
    trace_emit_locked(st, ev);
    trace_unlock(st);
}

struct trace_state *trace_lock(void) {
    pthread_mutex_lock(&g_state.mu);
    return &g_state;
}

void trace_unlock(struct trace_state *st) { pthread_mutex_unlock(&st->mu); }

void trace_sleep_locked(struct trace_state *st) { pthread_cond_wait(&st->cv, &st->mu); }

bool trace_sleep_until_locked(struct trace_state *st, const struct timespec *deadline) {
    return pthread_cond_timedwait(&st->cv, &st->mu, deadline) != ETIMEDOUT;
}

#define TRACE_TELL_AGAIN_NS 5000000u

bool trace_nap_locked(struct trace_state *st, const struct timespec *deadline) {
    if (st->api == NULL || st->api->vnpu_waiting == NULL) {
        return trace_sleep_until_locked(st, deadline);
    }
    struct timespec nap = probe_deadline_ts(TRACE_TELL_AGAIN_NS);
    bool nap_first =
        nap.tv_sec < deadline->tv_sec || (nap.tv_sec == deadline->tv_sec && nap.tv_nsec < deadline->tv_nsec);
    if (!nap_first) {
        return trace_sleep_until_locked(st, deadline);
    }
    (void)trace_sleep_until_locked(st, &nap);
    return true;
}

void trace_wake_all_locked(struct trace_state *st) { pthread_cond_broadcast(&st->cv); }

void trace_tell_waiting_locked(struct trace_state *st) {
    const struct probe_api *api = st->api;
    if (api == NULL || api->vnpu_waiting == NULL) {
        return;
    }
    pthread_mutex_unlock(&st->mu);
    api->vnpu_waiting();
    pthread_mutex_lock(&st->mu);
}

void *trace_grow(void *arr, size_t *cap, size_t need, size_t elem) {
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
