/* The buffer-handle registry: B<N> names in order of first sight, the successful onAllocs `bind`
 * selects from, and which handles are still live. */
#include <stdio.h>
#include <stdlib.h>

#include "trace_state.h"

size_t trace_buf_index_locked(struct trace_state *st, ANpuBuffer *buf) {
    for (size_t i = st->nbufs; i-- > 0;) {
        if (st->bufs[i].live && st->bufs[i].ptr == buf) {
            return i;
        }
    }
    st->bufs = trace_grow(st->bufs, &st->capbufs, st->nbufs + 1, sizeof *st->bufs);
    st->bufs[st->nbufs] = (struct trace_buf){buf, st->next_id++, true, NULL, false, false, false, false, 0};
    return st->nbufs++;
}

size_t trace_buf_index_any_locked(struct trace_state *st, ANpuBuffer *buf) {
    for (size_t i = st->nbufs; i-- > 0;) {
        if (st->bufs[i].ptr == buf) {
            return i;
        }
    }
    return trace_buf_index_locked(st, buf);
}

void trace_buf_json_locked(struct trace_state *st, struct jbuf *jb, const char *key, size_t index) {
    if (index == TRACE_NO_BUF) {
        jb_null(jb, key);
        return;
    }
    char text[24];
    snprintf(text, sizeof text, "B%u", index < st->nbufs ? st->bufs[index].id : 0u);
    jb_str(jb, key, text);
}

void trace_buf_json(struct jbuf *jb, const char *key, size_t index) {
    struct trace_state *st = trace_lock();
    trace_buf_json_locked(st, jb, key, index);
    trace_unlock(st);
}

ANpuBuffer *trace_buf_ptr(size_t index) {
    struct trace_state *st = trace_lock();
    ANpuBuffer *p = index < st->nbufs ? st->bufs[index].ptr : NULL;
    trace_unlock(st);
    return p;
}

bool trace_buf_live(size_t index) {
    struct trace_state *st = trace_lock();
    bool live = index < st->nbufs && st->bufs[index].live;
    trace_unlock(st);
    return live;
}

void trace_buf_retire(size_t index) {
    struct trace_state *st = trace_lock();
    if (index < st->nbufs) {
        st->bufs[index].live = false;
    }
    trace_unlock(st);
}

size_t trace_bind_cookie(unsigned cookie_slot) {
    size_t found = TRACE_NO_BUF;
    struct trace_state *st = trace_lock();
    for (size_t i = 0; i < st->nsucc; i++) {
        if (!st->succ[i].bound && st->succ[i].cookie == (const void *)&st->cookies[cookie_slot]) {
            st->succ[i].bound = true;
            found = st->succ[i].buf;
            break;
        }
    }
    trace_unlock(st);
    return found;
}

size_t trace_bind_nth(uint64_t nth) {
    size_t found = TRACE_NO_BUF;
    struct trace_state *st = trace_lock();
    if (nth < st->nsucc) {
        st->succ[nth].bound = true;
        found = st->succ[nth].buf;
    }
    trace_unlock(st);
    return found;
}

size_t *trace_unfreed_successes(size_t *n) {
    struct trace_state *st = trace_lock();
    size_t *out = malloc((st->nsucc ? st->nsucc : 1) * sizeof *out);
    if (out == NULL) {
        abort();
    }
    *n = 0;
    for (size_t i = 0; i < st->nsucc; i++) {
        size_t b = st->succ[i].buf;
        bool dup = false;
        for (size_t j = 0; j < *n; j++) {
            dup = dup || out[j] == b;
        }
        if (!dup && st->bufs[b].live) {
            out[(*n)++] = b;
        }
    }
    trace_unlock(st);
    return out;
}
