/*
 * The virtual NPU's control entry point. It is not part of the NDK API: the probe looks it up
 * with dlsym() at run time, so on a real device (where it is absent) scenarios that need it are
 * NOT_APPLICABLE instead of failing to link.
 */
#ifndef NPUCONF_VNPU_CONTROL_H
#define NPUCONF_VNPU_CONTROL_H

#define VNPU_CONTROL_SYMBOL "vnpu_control"

/*
 * Runs one control command and returns 0, or -1 with errno set (EINVAL for a malformed command,
 * ENOENT when the named buffer is unknown or nothing can be preempted).
 * Commands (one per call, `key=value`):
 *   preempt=0x<ANpuBuffer address>   preempt that buffer (EBUSY while it is mapped)
 *   preempt=lowest                   preempt the lowest-priority unmapped live buffer
 *   preempt_late=0x<address>|lowest  as preempt=, but the onPreempt comes 100 ms later than it
 *                                    would (the buffer is preempted at once)
 *   pressure=<bytes>                 reserve that much capacity, preempting unmapped buffers
 *                                    (lowest priority first) until the reservation fits
 *   delay_ms=<n>                     delay every later asynchronous callback by n ms
 *   callback_thread=caller|other     deliver later allocation results on the caller's thread
 *                                    (inside allocAsync) or on a vnpu thread (the default)
 *   fail_next=<ERRNO name>           the next allocation fails with that errno
 */
typedef int (*vnpu_control_fn)(const char *command);
int vnpu_control(const char *command);

#endif
