#include "scenario.h"

#include <string.h>
#include <unistd.h>

#include "json.h"
#include "ops.h"
#include "trace.h"

void scenario_run(struct probe_ctx *ctx, const struct probe_scenario *sc) {
    const struct probe_api *api = ctx->api;
    const struct probe_options *opt = ctx->opt;
    memset(ctx, 0, sizeof *ctx);
    ctx->api = api;
    ctx->opt = opt;
    ctx->sc = sc;
    pthread_mutex_init(&ctx->mu, NULL);
    trace_reset(api);
    trace_set_thread("main");

    struct jbuf ev;
    trace_event_open(&ev, NPUCONF_EV_BEGIN);
    jb_str(&ev, "scenario", sc->id);
    jb_i64(&ev, "pid", (int64_t)getpid());
    jb_i64(&ev, "trace", NPUCONF_TRACE_VERSION);
    trace_emit(&ev);
    jb_free(&ev);

    for (size_t i = 0; i < sc->nsteps; i++) {
        const struct probe_step *st = &sc->steps[i];
        if (st->thread >= 0) {
            continue; /* a step of a parallel block: its probe thread runs it */
        }
        ops_run(ctx, st, i, false);
        if (st->op == OP_PAR_BEGIN) {
            par_release(ctx); /* after par_begin's ret: the threads' events all follow it */
        }
    }
    ctx->next_step = sc->nsteps;
    scenario_teardown(ctx);

    trace_event_open(&ev, NPUCONF_EV_END);
    jb_str(&ev, "scenario", sc->id);
    trace_emit(&ev);
    jb_free(&ev);
    pthread_mutex_destroy(&ctx->mu);
}
