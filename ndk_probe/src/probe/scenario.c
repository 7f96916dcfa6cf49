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
    trace_reset();

    struct jbuf ev;
    jb_init(&ev);
    jb_raw(&ev, "{\"ev\":\"begin\"");
    jb_str(&ev, "scenario", sc->id);
    jb_i64(&ev, "pid", (int64_t)getpid());
    trace_emit(&ev);
    jb_free(&ev);

    for (size_t i = 0; i < sc->nsteps; i++) {
        ops_run(ctx, &sc->steps[i], i, false);
    }
    ctx->next_step = sc->nsteps;
    scenario_teardown(ctx);

    jb_init(&ev);
    jb_raw(&ev, "{\"ev\":\"end\"");
    jb_str(&ev, "scenario", sc->id);
    trace_emit(&ev);
    jb_free(&ev);
}
