/*
 * The virtual NPU's control entry point. It is not part of the NDK API: the probe looks it up
 * with dlsym() at run time, so on a real device (where it is absent) scenarios that need it are
 * NOT_APPLICABLE instead of failing to link.
 */
#ifndef NPUCONF_VNPU_CONTROL_H
#define NPUCONF_VNPU_CONTROL_H

#include <stdint.h>

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

#define VNPU_WAITING_SYMBOL "vnpu_waiting"

/*
 * The application now waits for callbacks (the probe calls it as an await, a settle, a bind or a
 * pause begins, and again each time a callback wakes it while it still waits). Nothing happens unless
 * the device profile sets due_when_waiting=1 (fuzz runs): then a load's onLoad and a late onPreempt
 * are due at once, as long as no API call and no callback came since, instead of after the load's
 * 5 ms or the late onPreempt's quiet time. The steps that must meet them in flight have come.
 */
typedef void (*vnpu_waiting_fn)(void);
void vnpu_waiting(void);

#define VNPU_WAIT_IDLE_SYMBOL "vnpu_wait_idle"

/*
 * A pause (the probe's sleep_ms): with due_when_waiting=1, tells the device the application waits, as
 * vnpu_waiting does, and returns 1 as soon as the device has nothing queued and runs no callback (until
 * the next API call nothing more can come), 0 after timeout_ns. Without the profile key it returns 0 at
 * once.
 */
typedef int (*vnpu_wait_idle_fn)(uint64_t timeout_ns);
int vnpu_wait_idle(uint64_t timeout_ns);

#endif
