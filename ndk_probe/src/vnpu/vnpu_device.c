/* The one process-wide virtual device: profile, lock, buffer registry, budget, control state and
 * the worker thread that delivers asynchronous callbacks. The API has no context parameter, so
 * this is the library's only global state. Nothing runs at load time: the probe forks after
 * dlopen(), so the device (and its worker) is created by the first API call of the process that
 * uses it. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vnpu_internal.h"

#define VNPU_BAD_PROFILE_EXIT 70 /* EX_SOFTWARE-like: the device is misconfigured */

static struct vnpu_device g_dev;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond; /* CLOCK_MONOTONIC; signals the worker */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_profile_ok;
static char g_profile_err[512];

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void init_cond(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* fork(): the child gets a consistent copy of the state (the lock is held across fork) but no
 * worker; the next enqueue in the child starts one. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void)
{
    pthread_mutex_unlock(&g_lock);
    init_cond();
    g_dev.worker_started = false;
}

static void init_once(void)
{
    init_cond();
    g_profile_ok = vnpu_profile_load(&g_dev.profile, g_profile_err, sizeof g_profile_err) == 0;
    g_dev.next_seq = 1;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

struct vnpu_device *vnpu_dev(void)
{
    pthread_once(&g_once, init_once);
    if (!g_profile_ok) {
        /* Fail loudly and early: every API call ends the process until the profile is fixed. */
        fprintf(stderr, "vnpu: bad device profile: %s\n", g_profile_err);
        _exit(VNPU_BAD_PROFILE_EXIT);
    }
    return &g_dev;
}

_Noreturn void vnpu_null_deref(const char *what)
{
    fprintf(stderr, "vnpu: %s: invalid pointer dereferenced (aosp-2026)\n", what);
    raise(SIGSEGV); /* as the fault would: an app's SIGSEGV handler runs first */
    abort();        /* a handler that returns: end the process all the same */
}

bool vnpu_aosp(void)
{
    return vnpu_dev()->profile.personality == VNPU_AOSP_2026;
}

void vnpu_lock(void)
{
    pthread_mutex_lock(&g_lock);
}

void vnpu_unlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    for (;;) {
        struct vnpu_job *job = g_dev.head;
        if (job == NULL) {
            pthread_cond_wait(&g_cond, &g_lock);
            continue;
        }
        uint64_t now = mono_ns();
        if (job->due_ns > now) {
            /* FIFO: later jobs wait behind a delayed one, so delivery order is submission order. */
            struct timespec until = {(time_t)(job->due_ns / 1000000000u), (long)(job->due_ns % 1000000000u)};
            pthread_cond_timedwait(&g_cond, &g_lock, &until);
            continue;
        }
        g_dev.head = job->next;
        if (g_dev.head == NULL)
            g_dev.tail = NULL;
        pthread_mutex_unlock(&g_lock);
        vnpu_job_run(job);
        pthread_mutex_lock(&g_lock);
    }
    return NULL;
}

static void start_worker_locked(void)
{
    pthread_attr_t attr;
    pthread_t tid;
    sigset_t all, old;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The worker inherits this mask: process signals (timeouts, SIGCHLD) go to the app's threads.
     * Fault signals stay open so a crash in a user callback is reported as usual. */
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS};
    sigfillset(&all);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&tid, &attr, worker_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        fprintf(stderr, "vnpu: cannot start the callback thread: %s\n", strerror(rc));
        abort();
    }
    g_dev.worker_started = true;
}

void vnpu_enqueue_locked(struct vnpu_job *job)
{
    vnpu_enqueue_late_locked(job, 0);
}

/* The queue is strictly FIFO by insertion and the worker only ever takes the head (worker_main):
 * a job due late (preempt_late=) holds every job queued after it until it has run. That keeps the
 * orders the model relies on (onAlloc before that buffer's onLoad and onPreempt, callbacks in
 * submission order); it only delays the later callbacks, which the text allows. */
void vnpu_enqueue_late_locked(struct vnpu_job *job, uint64_t extra_ns)
{
    uint64_t delay_ns = g_dev.delay_ms * 1000000u + g_dev.profile.callback_delay_us * 1000u + extra_ns;
    job->due_ns = mono_ns() + delay_ns;
    job->next = NULL;
    if (g_dev.tail != NULL)
        g_dev.tail->next = job;
    else
        g_dev.head = job;
    g_dev.tail = job;
    if (!g_dev.worker_started)
        start_worker_locked();
    pthread_cond_signal(&g_cond);
}
