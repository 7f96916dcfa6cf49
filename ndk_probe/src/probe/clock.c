#include "clock.h"

#include <errno.h>

uint64_t probe_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t probe_scaled_ns(uint64_t ms, double multiplier) {
    double ns = (double)ms * multiplier * 1e6;
    /* Keep far below UINT64_MAX so deadline sums cannot wrap. */
    if (!(ns < 9.0e18)) {
        return UINT64_C(9000000000000000000);
    }
    return ns <= 0 ? 0 : (uint64_t)ns;
}

struct timespec probe_ns_to_ts(uint64_t ns) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    /* 32-bit time_t: clamp rather than wrap into the past. */
    if ((uint64_t)ts.tv_sec != ns / 1000000000u || ts.tv_sec < 0) {
        ts.tv_sec = (time_t)INT32_MAX;
        ts.tv_nsec = 0;
    }
    return ts;
}

struct timespec probe_deadline_ts(uint64_t ns_from_now) {
    return probe_ns_to_ts(probe_now_ns() + ns_from_now);
}

void probe_sleep_ns(uint64_t ns) {
    struct timespec left = probe_ns_to_ts(ns);
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}
