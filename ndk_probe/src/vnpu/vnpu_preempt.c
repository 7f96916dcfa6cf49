/* Preemption, driven by vnpu_control (preempt=..., preempt_late=..., pressure=...). A mapped buffer is never
 * preempted. The published personality only preempts buffers the user holds (onAlloc
 * delivered) with no load in flight: the buffer is preempted at once (maps fail ENOENT) and its
 * onPreempt is queued. aosp-2026 splits the service from the client (facts PRE-2, MAP-2): the
 * service preempts at once, and the client learns it only when the notice it sends is delivered
 * (vnpu_jobs.c), so a map in between still succeeds. The notice is queued behind any reply already on
 * its way (oneway calls from one service arrive in order): a buffer still allocating gets its
 * onAlloc(0, buf) first. A load in flight is overtaken: its job delivers onLoad(ECANCELED) and then
 * onPreempt. Who may be preempted, and in which order, is vnpu_victim.c's. */
#include <errno.h>

#include "vnpu_internal.h"

int vnpu_preempt_locked(struct vnpu_device *dev, ANpuBuffer *buf) { return vnpu_preempt_late_locked(dev, buf, 0); }

/* preempt_late= differs from preempt= only in when the onPreempt is due: the buffer is preempted
 * now (published: maps fail ENOENT, its memory is released), the callback comes late_ns later than usual. */
int vnpu_preempt_late_locked(struct vnpu_device *dev, ANpuBuffer *buf, uint64_t late_ns) {
    int err = vnpu_preempt_error_locked(dev, buf);
    if (err != 0)
        return err;
    buf->preempted = true;
    vnpu_policy_release_locked(dev, buf);
    bool aosp = vnpu_aosp(dev);
    if (aosp && buf->state == VNPU_LOADING && buf->wedged_on_load == NULL) {
        /* The running load job owns the memory until it finishes; it delivers onLoad(ECANCELED)
         * and then onPreempt (queued late_ns later, if late). */
        buf->cancel_pending = true;
        buf->cancel_late_ns = late_ns;
        return 0;
    }
    if (!aosp)
        vnpu_buffer_release_memory_locked(buf);
    if (aosp || buf->on_preempt != NULL) {
        struct vnpu_job *job = vnpu_job_new(VNPU_JOB_PREEMPT);
        job->buf = buf;
        buf->jobs++;
        if (aosp)
            buf->quiet_jobs++; /* a notice for a buffer freed meanwhile is dropped */
        vnpu_enqueue_late_locked(dev, job, late_ns);
    }
    return 0;
}
