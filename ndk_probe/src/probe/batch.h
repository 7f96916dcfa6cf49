/* Batch mode: one forked child per scenario, so a crash or hang ends one scenario, not the run. */
#ifndef NPUCONF_PROBE_BATCH_H
#define NPUCONF_PROBE_BATCH_H

#include "ctx.h"

/* Runs every scenario of `prog` (forking unless --no-fork) and writes their `exit` events. */
void batch_run(struct probe_ctx *ctx, const struct probe_program *prog);

#endif
