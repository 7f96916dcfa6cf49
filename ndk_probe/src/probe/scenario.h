/* Running one scenario: begin, its steps, the teardown of docs/formats.md §4, end. */
#ifndef NPUCONF_PROBE_SCENARIO_H
#define NPUCONF_PROBE_SCENARIO_H

#include "ctx.h"

/* Resets `ctx` to empty slots for `sc`, then runs it and writes every event up to `end`. */
void scenario_run(struct probe_ctx *ctx, const struct probe_scenario *sc);
/* Settles and cleans up after the last step (teardown.c). */
void scenario_teardown(struct probe_ctx *ctx);

#endif
