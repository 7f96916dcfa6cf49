/* The one process-wide virtual device: profile, lock, buffer registry, budget, control state and
 * the worker's queue (the worker itself is in vnpu_jobs.c). The API has no context parameter, so
 * this is the library's only global state; the public entry points resolve it here and hand it
 * on. Nothing runs at load time: the probe forks after dlopen(), so the device (and its worker) is
 * created by the first API call of the process that uses it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "npuconf/vnpu_control.h"
#include "vnpu_internal.h"

#define VNPU_BAD_PROFILE_EXIT 70 /* EX_SOFTWARE-like: the device is misconfigured */

static struct vnpu_device g_dev = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_profile_ok;
static char g_profile_err[512];

static void init_cond(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_dev.wake, &attr);
    pthread_cond_init(&g_dev.ran, &attr);
    pthread_condattr_destroy(&attr);
}

/* fork(): the child gets a consistent copy of the state (the lock is held across fork) but no
 * worker; the next enqueue in the child starts one. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_dev.lock); }

static void atfork_parent(void) { pthread_mutex_unlock(&g_dev.lock); }

static void atfork_child(void) {
    pthread_mutex_unlock(&g_dev.lock);
    init_cond();
    g_dev.worker_started = false;
    g_dev.running = false;
    g_dev.waiting_ns = 0;
}

static void init_once(void) {
    init_cond();
    g_profile_ok = vnpu_profile_load(&g_dev.profile, g_profile_err, sizeof g_profile_err) == 0;
    g_dev.next_seq = 1;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

struct vnpu_device *vnpu_dev(void) {
    pthread_once(&g_once, init_once);
    if (!g_profile_ok) {
        /* Fail loudly and early: every API call ends the process until the profile is fixed. */
        fprintf(stderr, "vnpu: bad device profile: %s\n", g_profile_err);
        _exit(VNPU_BAD_PROFILE_EXIT);
    }
    atomic_store_explicit(&g_dev.last_call_ns, vnpu_now_ns(), memory_order_relaxed);
    return &g_dev;
}

/* Not an API call: it leaves last_call_ns alone, and a device that is not initialised yet has nothing
 * queued to make due. */
VNPU_API void vnpu_waiting(void) {
    pthread_once(&g_once, init_once);
    if (!g_profile_ok || !g_dev.profile.due_when_waiting)
        return;
    vnpu_lock(&g_dev);
    g_dev.waiting_ns = vnpu_now_ns();
    if (g_dev.worker_started)
        pthread_cond_signal(&g_dev.wake);
    vnpu_unlock(&g_dev);
}

VNPU_API int vnpu_wait_idle(uint64_t timeout_ns) {
    pthread_once(&g_once, init_once);
    if (!g_profile_ok || !g_dev.profile.due_when_waiting)
        return 0;
    uint64_t deadline = vnpu_now_ns() + timeout_ns;
    struct timespec until = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    vnpu_lock(&g_dev);
    while (g_dev.head != NULL || g_dev.running) {
        g_dev.waiting_ns = vnpu_now_ns(); /* again after each job: the application still waits */
        if (g_dev.worker_started)
            pthread_cond_signal(&g_dev.wake);
        if (pthread_cond_timedwait(&g_dev.ran, &g_dev.lock, &until) == ETIMEDOUT)
            break;
    }
    int idle = g_dev.head == NULL && !g_dev.running;
    vnpu_unlock(&g_dev);
    return idle;
}

_Noreturn void vnpu_null_deref(const char *what) {
    fprintf(stderr, "vnpu: %s: invalid pointer dereferenced (aosp-2026)\n", what);
    raise(SIGSEGV); /* as the fault would: an app's SIGSEGV handler runs first */
    abort();        /* a handler that returns: end the process all the same */
}
