/* Callback jobs: delivering onAlloc (after the load-on-alloc copy), onLoad (after the copy) and
 * onPreempt, the queue they wait in and the worker thread that runs them. A job runs on the
 * worker, or inline inside allocAsync when callback_thread=caller is set. The copy and the user
 * callbacks run without the vnpu lock. A job may queue another (a late onPreempt), so the queue
 * lives here with the jobs. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vnpu_internal.h"

#define VNPU_COPY_CHUNK (64 * 1024)

struct vnpu_job *vnpu_job_new(enum vnpu_job_kind kind) {
    struct vnpu_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        abort();
    job->kind = kind;
    job->fd = -1;
    return job;
}

int vnpu_check_file_bounds(int fd, int64_t off, int64_t len) {
    struct stat64 st;
    if (fstat64(fd, &st) != 0)
        return errno;
    if (S_ISREG(st.st_mode) && (off > st.st_size || len > st.st_size - off))
        return EINVAL;
    return 0;
}

int vnpu_copy_segment(int src, int64_t off, int64_t len, int dst, int64_t dst_off) {
    char *chunk = malloc(VNPU_COPY_CHUNK);
    if (chunk == NULL)
        return ENOMEM;
    int err = 0;
    while (len > 0 && err == 0) {
        size_t want = len < VNPU_COPY_CHUNK ? (size_t)len : VNPU_COPY_CHUNK;
        /* pread: the position of the app's file description is never touched. */
        ssize_t got = pread64(src, chunk, want, off);
        if (got < 0) {
            err = errno == EINTR ? 0 : errno;
            continue;
        }
        if (got == 0) {
            err = EINVAL; /* the segment runs past the end of the file */
            break;
        }
        for (ssize_t put = 0; put < got && err == 0;) {
            ssize_t n = pwrite64(dst, chunk + put, (size_t)(got - put), dst_off + put);
            if (n < 0 && errno != EINTR)
                err = errno;
            else if (n > 0)
                put += n;
        }
        off += got;
        dst_off += got;
        len -= got;
    }
    free(chunk);
    return err;
}

/* aosp-2026: the onPreempt owed after an onLoad(ECANCELED), on this thread at once, or (the buffer
 * was preempted by preempt_late=) as a notice of its own, due that much later. */
static void cancelled_preempt(struct vnpu_device *dev, ANpuBuffer *buf, void *cookie) {
    if (buf->on_preempt == NULL)
        return;
    vnpu_lock(dev);
    uint64_t late_ns = buf->cancel_late_ns;
    if (late_ns != 0) {
        struct vnpu_job *job = vnpu_job_new(VNPU_JOB_PREEMPT);
        job->buf = buf;
        job->error = ECANCELED; /* the client is Preempted already: only the callback is left */
        buf->jobs++;
        buf->quiet_jobs++;
        vnpu_enqueue_late_locked(dev, job, late_ns);
    }
    vnpu_unlock(dev);
    if (late_ns == 0)
        buf->on_preempt(cookie);
}

/* Drops the job's reference on its buffer after the callbacks returned. */
static void job_done(struct vnpu_device *dev, ANpuBuffer *buf) {
    ANpuBuffer *reap = NULL;
    vnpu_lock(dev);
    buf->jobs--;
    struct vnpu_cookie *cookie = vnpu_buffer_take_cookie_locked(dev, buf); /* aosp-2026: freed meanwhile */
    vnpu_buffer_settle_locked(dev, buf, &reap);
    vnpu_unlock(dev);
    vnpu_buffer_reap(reap);
    vnpu_cookie_unref(cookie);
}

static void run_alloc(struct vnpu_device *dev, struct vnpu_job *job) {
    ANpuBuffer *buf = job->buf;
    if (buf == NULL) { /* refused at admission */
        job->on_alloc(vnpu_cookie_value(job->cookie), job->error, NULL);
        vnpu_cookie_unref(job->cookie); /* the submission's reference, after onAlloc returned */
        return;
    }
    int err = 0;
    if (job->fd >= 0) {
        err = vnpu_copy_segment(job->fd, job->file_offset, job->length, buf->memfd, job->buffer_offset);
        close(job->fd);
    }
    void *cookie = vnpu_cookie_value(buf->cookie);
    vnpu_lock(dev);
    if (err != 0) {
        buf->user_ref = false; /* never handed out */
        vnpu_policy_release_locked(dev, buf);
        vnpu_buffer_release_memory_locked(buf);
    } else {
        buf->state = VNPU_ALLOCATED;
        buf->delivered = true;
    }
    vnpu_unlock(dev);
    job->on_alloc(cookie, err, err != 0 ? NULL : buf);
    job_done(dev, buf);
}

static void run_load(struct vnpu_device *dev, struct vnpu_job *job) {
    ANpuBuffer *buf = job->buf;
    int err = job->error;
    bool aosp = vnpu_aosp(dev);
    bool copying = job->fd >= 0;
    /* The job owns the buffer's Loading state when it copies, and under aosp-2026 whenever the
     * client sent the load (the client moves to Loading before the service answers, LOAD-4). */
    bool owns_loading = copying || (aosp && !job->immediate);
    if (copying) {
        err = vnpu_copy_segment(job->fd, job->file_offset, job->length, buf->memfd, job->buffer_offset);
        close(job->fd);
    }
    bool cancelled = false;
    vnpu_lock(dev);
    if (owns_loading) {
        buf->state = VNPU_ALLOCATED;
        cancelled = buf->cancel_pending;
        if (cancelled) {
            buf->cancel_pending = false;
            buf->client_preempted = true; /* the notice overtook the load's reply */
            vnpu_buffer_release_memory_locked(buf);
            err = ECANCELED;
        }
    }
    if (err != 0 && !job->immediate && aosp)
        buf->load_poisoned = true; /* the service's entry stays LOADING (facts LOAD-6) */
    /* aosp-2026: the reply of a buffer freed meanwhile finds no entry in the client map and is
     * dropped (facts ALLOC-ASYNC-4, LOAD-7): no onLoad; the cookie was let go at the free. */
    bool dropped = false;
    if (!job->immediate && aosp) {
        buf->quiet_jobs--;
        dropped = !buf->user_ref;
    }
    void *cookie = vnpu_cookie_value(buf->cookie);
    vnpu_unlock(dev);
    if (!dropped) {
        job->on_load(cookie, err, buf);
        if (cancelled)
            cancelled_preempt(dev, buf, cookie);
    }
    job_done(dev, buf);
}

/* A preemption notice. Published: the buffer was preempted when it was queued; only the onPreempt is
 * left. aosp-2026 (npu_allocator_client.rs onNotifyPreempted, npu_buffer_impl.rs state_to_preempted):
 * a notice for a freed buffer finds no entry and is ignored; a load sent since is answered
 * ECANCELED by its job; otherwise the client turns Preempted now (its descriptor closes, a mapping
 * keeps the memory), answers a wedged load ECANCELED, and calls onPreempt if set. */
static void run_notice(struct vnpu_device *dev, struct vnpu_job *job) {
    ANpuBuffer *buf = job->buf;
    ANpuManager_LoadCallback wedged = NULL;
    bool call = true;
    vnpu_lock(dev);
    if (vnpu_aosp(dev)) {
        buf->quiet_jobs--;
        if (!buf->user_ref) {
            call = false;
        } else if (job->error == ECANCELED) {
            /* the late onPreempt after an onLoad(ECANCELED): the client is Preempted already */
        } else if (buf->state == VNPU_LOADING && buf->wedged_on_load == NULL) {
            buf->cancel_pending = true; /* the load job answers ECANCELED, then onPreempt */
            buf->cancel_late_ns = 0;
            call = false;
        } else {
            buf->client_preempted = true;
            vnpu_buffer_release_memory_locked(buf);
            wedged = buf->wedged_on_load;
            buf->wedged_on_load = NULL;
            if (wedged != NULL)
                buf->state = VNPU_ALLOCATED;
        }
    }
    void *cookie = vnpu_cookie_value(buf->cookie);
    vnpu_unlock(dev);
    if (wedged != NULL)
        wedged(cookie, ECANCELED, buf);
    if (call && buf->on_preempt != NULL)
        buf->on_preempt(cookie);
    job_done(dev, buf);
}

void vnpu_job_run(struct vnpu_device *dev, struct vnpu_job *job) {
    switch (job->kind) {
    case VNPU_JOB_ALLOC:
        run_alloc(dev, job);
        break;
    case VNPU_JOB_LOAD:
        run_load(dev, job);
        break;
    case VNPU_JOB_PREEMPT:
        run_notice(dev, job);
        break;
    }
    free(job);
}

/* When a job may run: its due time; a late onPreempt on a quiet device as soon as the application has
 * made no API call for quiet_ns, since the next calls are what must come before it. */
static uint64_t job_due_locked(const struct vnpu_device *dev, const struct vnpu_job *job) {
    uint64_t due = job->due_ns;
    uint64_t last_call = atomic_load_explicit(&dev->last_call_ns, memory_order_relaxed);
    if (job->quiet_ns != 0) {
        uint64_t quiet = last_call + job->quiet_ns;
        if (quiet < job->earliest_ns)
            quiet = job->earliest_ns;
        if (quiet < due)
            due = quiet;
    }
    /* due_when_waiting: the application waits (vnpu_waiting), and has made no call since. */
    if (job->when_waiting && dev->waiting_ns != 0 && dev->waiting_ns >= last_call) {
        uint64_t now_due = dev->waiting_ns > job->earliest_ns ? dev->waiting_ns : job->earliest_ns;
        if (now_due < due)
            due = now_due;
    }
    return due;
}

static void *worker_main(void *arg) {
    struct vnpu_device *dev = arg;
    vnpu_lock(dev);
    for (;;) {
        struct vnpu_job *job = dev->head;
        if (job == NULL) {
            pthread_cond_broadcast(&dev->ran);
            pthread_cond_wait(&dev->wake, &dev->lock);
            continue;
        }
        uint64_t due = job_due_locked(dev, job);
        if (due > vnpu_now_ns()) {
            /* FIFO: later jobs wait behind a delayed one, so delivery order is submission order. An API
             * call meanwhile moves a quiet job's due time on: it is looked at again when this one comes. */
            struct timespec until = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)};
            pthread_cond_timedwait(&dev->wake, &dev->lock, &until);
            continue;
        }
        dev->head = job->next;
        if (dev->head == NULL)
            dev->tail = NULL;
        dev->running = true;
        vnpu_unlock(dev);
        vnpu_job_run(dev, job);
        vnpu_lock(dev);
        dev->running = false;
        dev->waiting_ns = 0; /* a callback may have ended the wait: the application says again */
        pthread_cond_broadcast(&dev->ran);
    }
    return NULL;
}

static void start_worker_locked(struct vnpu_device *dev) {
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
    int rc = pthread_create(&tid, &attr, worker_main, dev);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        fprintf(stderr, "vnpu: cannot start the callback thread: %s\n", strerror(rc));
        abort();
    }
    dev->worker_started = true;
}

void vnpu_enqueue_locked(struct vnpu_device *dev, struct vnpu_job *job) { vnpu_enqueue_late_locked(dev, job, 0); }

/* The queue is strictly FIFO by insertion and the worker only ever takes the head (worker_main):
 * a job due late (preempt_late=) holds every job queued after it until it has run. That keeps the
 * orders the model relies on (onAlloc before that buffer's onLoad and onPreempt, callbacks in
 * submission order); it only delays the later callbacks, which the text allows. */
void vnpu_enqueue_late_locked(struct vnpu_device *dev, struct vnpu_job *job, uint64_t extra_ns) {
    uint64_t delay_ns = dev->delay_ms * 1000000u + dev->profile.callback_delay_us * 1000u;
    uint64_t now = vnpu_now_ns();
    job->due_ns = now + delay_ns + extra_ns;
    /* An onPreempt queued late is preempt_late='s (a load's floor is not: it keeps its 5 ms). */
    if (job->kind == VNPU_JOB_PREEMPT && extra_ns > 0 && dev->profile.preempt_late_quiet_ms > 0) {
        job->quiet_ns = dev->profile.preempt_late_quiet_ms * 1000000u;
        job->earliest_ns = now + delay_ns;
    }
    /* A load's floor and a late onPreempt keep the steps that follow in their window; once the
     * application waits, those steps have come. */
    if (extra_ns > 0 && dev->profile.due_when_waiting) {
        job->when_waiting = true;
        job->earliest_ns = now + delay_ns;
    }
    job->next = NULL;
    if (dev->tail != NULL)
        dev->tail->next = job;
    else
        dev->head = job;
    dev->tail = job;
    if (!dev->worker_started)
        start_worker_locked(dev);
    pthread_cond_signal(&dev->wake);
}
