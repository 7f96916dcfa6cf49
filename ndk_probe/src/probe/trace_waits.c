/* The counters the await ops and the settle waits read, and wait_return's view of the asynchronous
 * calls in flight. */
#include "clock.h"
#include "trace_state.h"

void trace_count_add(enum trace_counter c, uint64_t n) {
    struct trace_state *st = trace_lock();
    st->counts[c] += n;
    trace_unlock(st);
}

uint64_t trace_count(enum trace_counter c) {
    struct trace_state *st = trace_lock();
    uint64_t v = st->counts[c];
    trace_unlock(st);
    return v;
}

bool trace_wait(enum trace_counter c, uint64_t target, uint64_t budget_ns, uint64_t *got) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    struct trace_state *st = trace_lock();
    bool told = false; /* the device was told this program waits, since the last wake */
    while (st->counts[c] < target) {
        if (!told) {
            told = true;
            trace_tell_waiting_locked(st);
            continue;
        }
        if (!trace_nap_locked(st, &deadline)) {
            break;
        }
        told = false;
    }
    *got = st->counts[c];
    trace_unlock(st);
    return *got >= target;
}

unsigned trace_async_enter(void) {
    struct trace_state *st = trace_lock();
    st->async_inflight++;
    unsigned blocked = st->async_blocked;
    trace_unlock(st);
    return blocked;
}

bool trace_async_leave(unsigned blocked_before) {
    struct trace_state *st = trace_lock();
    st->async_inflight--;
    bool blocked = st->async_blocked != blocked_before;
    trace_wake_all_locked(st);
    trace_unlock(st);
    return blocked;
}

void trace_wait_async_return(uint64_t budget_ns) {
    struct timespec deadline = probe_deadline_ts(budget_ns);
    struct trace_state *st = trace_lock();
    while (st->async_inflight > 0) {
        if (!trace_sleep_until_locked(st, &deadline)) {
            if (st->async_inflight > 0) {
                st->async_blocked++;
            }
            break;
        }
    }
    trace_unlock(st);
}
