/*
 * Parallel blocks (docs/formats.md §3): `par_begin N` starts N probe threads that wait at a gate;
 * the scenario opens the gate after par_begin's ret event, so the threads start together and every
 * event of theirs follows it; `par_end` joins them. The block's state lives in the ctx.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "trace.h"

static bool gate_wait(struct probe_par *par) {
    pthread_mutex_lock(&par->mu);
    while (par->gate == GATE_CLOSED) {
        pthread_cond_wait(&par->cv, &par->mu);
    }
    bool open = par->gate == GATE_OPEN;
    pthread_mutex_unlock(&par->mu);
    return open;
}

static void gate_set(struct probe_par *par, enum probe_gate gate) {
    pthread_mutex_lock(&par->mu);
    par->gate = gate;
    pthread_cond_broadcast(&par->cv);
    pthread_mutex_unlock(&par->mu);
}

static void *par_thread(void *arg) {
    struct probe_thread *t = arg;
    char name[16];
    snprintf(name, sizeof name, "t%u", t->k);
    trace_set_thread(name);
    if (!gate_wait(&t->ctx->par)) {
        return NULL;
    }
    const struct probe_scenario *sc = t->ctx->sc;
    for (size_t j = t->first; j < t->end; j++) {
        ops_run(t->ctx, &sc->steps[j], j, false);
    }
    return NULL;
}

static void join_all(struct probe_par *par) {
    for (size_t k = 0; k < par->n; k++) {
        if (par->threads[k].started) {
            pthread_join(par->threads[k].tid, NULL);
            par->threads[k].started = false;
        }
    }
    pthread_cond_destroy(&par->cv);
    pthread_mutex_destroy(&par->mu);
    par->n = 0;
}

void op_par_begin(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    struct probe_par *par = &ctx->par;
    memset(par, 0, sizeof *par);
    pthread_mutex_init(&par->mu, NULL);
    pthread_cond_init(&par->cv, NULL);
    par->gate = GATE_CLOSED;
    par->n = (size_t)st->args[0].v.u64;
    /* The parser guarantees the block: thread k's steps are contiguous, in order k = 0..n-1. */
    const struct probe_step *end = ctx->sc->steps + ctx->sc->nsteps;
    size_t index = (size_t)(st - ctx->sc->steps) + 1;
    for (size_t k = 0; k < par->n; k++) {
        struct probe_thread *t = &par->threads[k];
        t->ctx = ctx;
        t->k = (unsigned)k;
        t->first = index;
        while (ctx->sc->steps + index < end && ctx->sc->steps[index].thread == (int)k) {
            index++;
        }
        t->end = index;
    }
    for (size_t k = 0; k < par->n; k++) {
        int err = pthread_create(&par->threads[k].tid, NULL, par_thread, &par->threads[k]);
        if (err != 0) {
            /* The block cannot run as written: release whoever exists without running a step. */
            gate_set(par, GATE_CANCELLED);
            join_all(par);
            res->err = err;
            op_int_result(res, -1);
            return;
        }
        par->threads[k].started = true;
    }
    op_int_result(res, 0);
}

void par_release(struct probe_ctx *ctx) {
    if (ctx->par.n > 0) {
        gate_set(&ctx->par, GATE_OPEN);
    }
}

void op_par_end(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    (void)st;
    if (ctx->par.n > 0) {
        join_all(&ctx->par);
    }
    op_int_result(res, 0);
}
