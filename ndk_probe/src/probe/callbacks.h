/*
 * The callbacks the probe hands to the implementation. Each records what it received and, when a
 * cb_action applies to it, calls back into the API (the calls are traced with `in_cb`).
 */
#ifndef NPUCONF_PROBE_CALLBACKS_H
#define NPUCONF_PROBE_CALLBACKS_H

#include <android/npumanager/buffer.h>

#include "vocabulary.h"

struct probe_callbacks {
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_PreemptCallback on_preempt;
    ANpuManager_LoadCallback on_load;
    ANpuManager_CookieDeleter deleter; /* deleters[0] */
    /* Distinct deleter functions: each records its index, so the trace tells which one ran. */
    ANpuManager_CookieDeleter deleters[NPUCONF_COOKIE_DELETERS];
};

extern const struct probe_callbacks PROBE_CALLBACKS;

#endif
