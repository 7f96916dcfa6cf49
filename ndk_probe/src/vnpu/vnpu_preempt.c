/* Preemption, driven by vnpu_control (preempt=..., preempt_late=..., pressure=...). A mapped buffer is never
 * preempted. The published personality only preempts buffers the user holds (onAlloc
 * delivered) with no load in flight; aosp-2026 also preempts a buffer still allocating or
 * loading, which its pending job turns into onAlloc/onLoad(ECANCELED) followed by onPreempt
 * (facts PRE-2). Who may be preempted, and in which order, is vnpu_victim.c's. */
#include <errno.h>

#include "vnpu_internal.h"

int vnpu_preempt_locked(struct vnpu_device *dev, ANpuBuffer *buf) { return vnpu_preempt_late_locked(dev, buf, 0); }

/* preempt_late= differs from preempt= only in when the onPreempt is due: the buffer is preempted
 * now (maps fail ENOENT, its memory is released), the callback comes late_ns later than usual. */
int vnpu_preempt_late_locked(struct vnpu_device *dev, ANpuBuffer *buf, uint64_t late_ns) {
    int err = vnpu_preempt_error_locked(dev, buf);
    if (err != 0)
        return err;
    buf->preempted = true;
    vnpu_policy_release_locked(dev, buf);
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
        vnpu_enqueue_late_locked(dev, job, late_ns);
    }
    return 0;
}
