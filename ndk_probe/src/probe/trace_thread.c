/* The calling thread as events name it: its `th` name (per scenario), whether it is inside an API
 * call (callbacks tell caller from other) and which callback's cb_action it runs. Per-thread facts
 * are set and read only by their own thread. */
#include <stdio.h>

#include "trace_state.h"

static _Thread_local unsigned api_depth;
static _Thread_local char th_name[16];
static _Thread_local unsigned th_gen;
static _Thread_local const char *in_cb;

void trace_api_enter(void) { api_depth++; }

void trace_api_leave(void) { api_depth--; }

unsigned trace_api_depth(void) { return api_depth; }

void trace_set_thread(const char *name) {
    struct trace_state *st = trace_lock();
    snprintf(th_name, sizeof th_name, "%s", name);
    th_gen = st->gen;
    trace_unlock(st);
}

const char *trace_thread_name_locked(struct trace_state *st) {
    if (th_gen != st->gen || th_name[0] == '\0') {
        snprintf(th_name, sizeof th_name, "w%u", st->next_worker++);
        th_gen = st->gen;
    }
    return th_name;
}

void trace_thread_name(char out[16]) {
    struct trace_state *st = trace_lock();
    snprintf(out, 16, "%s", trace_thread_name_locked(st));
    trace_unlock(st);
}

const char *trace_in_cb(void) { return in_cb; }

const char *trace_set_in_cb(const char *kind) {
    const char *prev = in_cb;
    in_cb = kind;
    return prev;
}
