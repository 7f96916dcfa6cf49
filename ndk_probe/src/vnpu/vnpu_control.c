/* vnpu_control(): the virtual device's test hooks (npuconf/vnpu_control.h). Not part of the NDK
 * API; the probe finds it with dlsym(), so on real devices the scenarios that need it are
 * NOT_APPLICABLE. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "npuconf/vnpu_control.h"
#include "vnpu_internal.h"

/* How much later than usual the onPreempt of `preempt_late=` is due (docs/vnpu.md §7): long enough
 * for the application's next calls (a free, a map) to come before it, short enough for the probe's
 * settle budget (2 s; 300 ms while the fuzzer shrinks). The value is the vocabulary's, which the
 * fuzz generator reads too. */
#define VNPU_PREEMPT_LATE_MS NPUCONF_PREEMPT_LATE_MS

static bool parse_u64(const char *s, int base, uint64_t *out) {
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* preempt=<target> (late_ns 0) and preempt_late=<target> (VNPU_PREEMPT_LATE_MS): the same targets
 * and errors; only the onPreempt is due later. */
static int cmd_preempt(struct vnpu_device *dev, const char *arg, uint64_t late_ns) {
    int err = ENOENT;
    vnpu_lock(dev);
    if (strcmp(arg, "lowest") == 0) {
        ANpuBuffer *victim = vnpu_victim_lowest_locked(dev);
        if (victim != NULL)
            err = vnpu_preempt_late_locked(dev, victim, late_ns);
    } else {
        uint64_t addr;
        if (strncmp(arg, "0x", 2) != 0 || !parse_u64(arg + 2, 16, &addr) || addr > UINTPTR_MAX) {
            err = EINVAL;
        } else {
            /* Compared with live buffers only; an unknown address is never dereferenced. */
            for (ANpuBuffer *b = dev->buffers; b != NULL; b = b->next)
                if ((uintptr_t)b == (uintptr_t)addr)
                    err = vnpu_preempt_late_locked(dev, b, late_ns);
        }
    }
    vnpu_unlock(dev);
    return err;
}

/* Reserves capacity, preempting (lowest priority first) until used + reserved fits. The
 * reservation stays in force even when it cannot be met (ENOMEM). */
static int cmd_pressure(struct vnpu_device *dev, uint64_t bytes) {
    int err = 0;
    vnpu_lock(dev);
    dev->reserved = bytes;
    while (err == 0 && vnpu_policy_over_locked(dev)) {
        ANpuBuffer *victim = vnpu_victim_pressure_locked(dev);
        err = victim != NULL ? vnpu_preempt_locked(dev, victim) : ENOMEM;
    }
    vnpu_unlock(dev);
    return err;
}

static int errno_by_name(const char *name, int *out) {
    if (strcmp(name, "none") == 0) {
        *out = 0;
        return 0;
    }
    for (size_t i = 0; i < NPUCONF_ERRNO_COUNT; i++)
        if (strcmp(NPUCONF_ERRNOS[i].name, name) == 0) {
            *out = NPUCONF_ERRNOS[i].number;
            return 0;
        }
    return EINVAL;
}

/* One handler per command of the vocabulary (command_<key>): a command added there without its handler
 * fails the build, and so does a handler no command names (unused). */
static int command_preempt(struct vnpu_device *dev, const char *arg) { return cmd_preempt(dev, arg, 0); }

static int command_preempt_late(struct vnpu_device *dev, const char *arg) {
    return cmd_preempt(dev, arg, (uint64_t)VNPU_PREEMPT_LATE_MS * 1000000u);
}

static int command_pressure(struct vnpu_device *dev, const char *arg) {
    uint64_t n;
    return parse_u64(arg, 10, &n) ? cmd_pressure(dev, n) : EINVAL;
}

static int command_delay_ms(struct vnpu_device *dev, const char *arg) {
    uint64_t n;
    if (!parse_u64(arg, 10, &n) || n > UINT32_MAX)
        return EINVAL;
    vnpu_lock(dev);
    dev->delay_ms = n;
    vnpu_unlock(dev);
    return 0;
}

static int command_callback_thread(struct vnpu_device *dev, const char *arg) {
    bool caller = strcmp(arg, NPUCONF_VNPU_CALLBACK_THREAD_CALLER) == 0;
    if (!caller && strcmp(arg, NPUCONF_VNPU_CALLBACK_THREAD_OTHER) != 0)
        return EINVAL;
    vnpu_lock(dev);
    dev->callback_caller = caller;
    vnpu_unlock(dev);
    return 0;
}

static int command_fail_next(struct vnpu_device *dev, const char *arg) {
    int e;
    if (errno_by_name(arg, &e) != 0)
        return EINVAL;
    vnpu_lock(dev);
    dev->fail_next = e;
    vnpu_unlock(dev);
    return 0;
}

/* command is "<key>=<arg>", eq its first '='. */
static int run(struct vnpu_device *dev, const char *command, const char *eq) {
    static const struct {
        const char *key;
        int (*handle)(struct vnpu_device *dev, const char *arg);
    } commands[] = {
#define COMMAND(key) {#key, command_##key},
        NPUCONF_VNPU_COMMANDS(COMMAND)
#undef COMMAND
    };
    size_t klen = (size_t)(eq - command);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].key) == klen && strncmp(command, commands[i].key, klen) == 0)
            return commands[i].handle(dev, eq + 1);
    return EINVAL;
}

VNPU_API int vnpu_control(const char *command) {
    /* A malformed command is refused before the device is resolved (it may not exist yet). */
    const char *eq = command != NULL ? strchr(command, '=') : NULL;
    int err = eq == NULL ? EINVAL : run(vnpu_dev(), command, eq);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}
