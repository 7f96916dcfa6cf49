/* CLOCK_MONOTONIC time in nanoseconds, and budget arithmetic with the timeout multiplier. */
#ifndef NPUCONF_PROBE_CLOCK_H
#define NPUCONF_PROBE_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t probe_now_ns(void);
/* ms × multiplier in ns, saturating instead of overflowing. */
uint64_t probe_scaled_ns(uint64_t ms, double multiplier);
/* Absolute CLOCK_MONOTONIC timespec `ns` from now (for pthread_cond_timedwait). */
struct timespec probe_deadline_ts(uint64_t ns_from_now);
struct timespec probe_ns_to_ts(uint64_t ns);
/* Sleeps the whole duration even when signals interrupt it. */
void probe_sleep_ns(uint64_t ns);

#endif
