/* Preemption, driven by vnpu_control (preempt=..., preempt_late=..., pressure=...). A mapped buffer is never
 * preempted. The published personality only preempts buffers the user holds (onAlloc
 * delivered) with no load in flight; aosp-2026 also preempts a buffer still allocating or
 * loading, which its pending job turns into onAlloc/onLoad(ECANCELED) followed by onPreempt
 * (facts PRE-2). */
#include <errno.h>

#include "vnpu_internal.h"

static int preempt_error_locked(const ANpuBuffer *buf)
{
    if (buf->dead || !buf->user_ref || buf->preempted)
        return ENOENT;
    if (!vnpu_aosp() && !buf->delivered)
        return ENOENT; /* not the user's yet */
    if (buf->nranges != 0)
        return EBUSY;
    if (!vnpu_aosp() && buf->state == VNPU_LOADING)
        return EBUSY;
    return 0;
}

bool vnpu_preemptable_locked(const ANpuBuffer *buf)
{
    return preempt_error_locked(buf) == 0;
}

int vnpu_preempt_locked(ANpuBuffer *buf)
{
    return vnpu_preempt_late_locked(buf, 0);
}

/* preempt_late= differs from preempt= only in when the onPreempt is due: the buffer is preempted
 * now (maps fail ENOENT, its memory is released), the callback comes late_ns later than usual. */
int vnpu_preempt_late_locked(ANpuBuffer *buf, uint64_t late_ns)
{
    int err = preempt_error_locked(buf);
    if (err != 0)
        return err;
    buf->preempted = true;
    vnpu_policy_release_locked(buf);
    if (buf->state != VNPU_ALLOCATED) {
        /* aosp-2026: the running allocation/load job owns the memory until it finishes; it
         * delivers the ECANCELED result and then onPreempt (queued late_ns later, if late). */
        buf->cancel_pending = true;
        buf->cancel_late_ns = late_ns;
        return 0;
    }
    vnpu_buffer_release_memory_locked(buf);
    if (buf->on_preempt != NULL) {
        struct vnpu_job *job = vnpu_job_new(VNPU_JOB_PREEMPT);
        job->buf = buf;
        buf->jobs++;
        vnpu_enqueue_late_locked(job, late_ns);
    }
    return 0;
}
