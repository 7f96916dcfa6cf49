/*
 * The implementation under test, resolved at run time with dlopen()/dlsym(): the probe links
 * against no NPU library, so one binary runs against libvnpu, any Linux library exporting the API,
 * or the device's libandroid.so.
 */
#ifndef NPUCONF_PROBE_IMPL_H
#define NPUCONF_PROBE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <android/npumanager/buffer.h>
#include <npuconf/vnpu_control.h>

/* X(name, return type, parameter list): the 18 public functions, spelled as in buffer.h. */
#define PROBE_API_FUNCTIONS(X)                                                                                   \
    X(ANpuManager_AllocRequest_create, ANpuManager_AllocRequest *, (void))                                       \
    X(ANpuManager_AllocRequest_free, void, (ANpuManager_AllocRequest *))                                         \
    X(ANpuManager_AllocRequest_setCookie, void, (ANpuManager_AllocRequest *, void *, ANpuManager_CookieDeleter)) \
    X(ANpuManager_AllocRequest_setDeviceNumber, void, (ANpuManager_AllocRequest *, int32_t))                     \
    X(ANpuManager_AllocRequest_setBufferType, void, (ANpuManager_AllocRequest *, ANpuBuffer_Type))               \
    X(ANpuManager_AllocRequest_setSize, void, (ANpuManager_AllocRequest *, int64_t))                             \
    X(ANpuManager_AllocRequest_setBufferPriority, void, (ANpuManager_AllocRequest *, int32_t))                   \
    X(ANpuManager_AllocRequest_setFileSegmentToLoad, void,                                                       \
      (ANpuManager_AllocRequest *, int, int64_t, int64_t, int64_t))                                              \
    X(ANpuManager_AllocRequest_setProtectionFlags, void, (ANpuManager_AllocRequest *, int32_t))                  \
    X(ANpuManager_AllocRequest_setOnAlloc, void, (ANpuManager_AllocRequest *, ANpuManager_AllocCallback))        \
    X(ANpuManager_AllocRequest_setOnPreempt, void, (ANpuManager_AllocRequest *, ANpuManager_PreemptCallback))    \
    X(ANpuManager_isSupported, int, (ANpuManager_AllocRequest *const *, size_t, bool *))                         \
    X(ANpuManager_allocAsync, void, (ANpuManager_AllocRequest *const *, size_t))                                 \
    X(ANpuBuffer_free, int, (ANpuBuffer *const *, size_t))                                                       \
    X(ANpuBuffer_map, void *, (ANpuBuffer *, void *, size_t, int, int, off_t))                                   \
    X(ANpuBuffer_unmap, int, (ANpuBuffer *, void *, size_t))                                                     \
    X(ANpuBuffer_setPriority, int, (ANpuBuffer *, int32_t))                                                      \
    X(ANpuBuffer_loadAsync, void, (ANpuBuffer *, int, int64_t, int64_t, int64_t, ANpuManager_LoadCallback))

#define PROBE_API_MEMBER(name, ret, params) ret(*name) params;

struct probe_api {
    PROBE_API_FUNCTIONS(PROBE_API_MEMBER)
    vnpu_control_fn vnpu_control;             /* optional: absent on real devices */
    vnpu_waiting_fn vnpu_waiting;             /* optional: the vnpu's, told as the probe starts to wait */
    vnpu_wait_idle_fn vnpu_wait_idle;         /* optional: the vnpu's, a pause that ends once it is idle */
    bool (*binder_set_max_threads)(uint32_t); /* Android: libbinder_ndk.so, optional */
    void (*binder_start_pool)(void);
};

enum impl_status { IMPL_OK, IMPL_LOAD_FAILED, IMPL_MISSING };

/*
 * Loads `path` (NULL: $NPUCONF_IMPL, then the platform default) and resolves the functions.
 * IMPL_LOAD_FAILED: the library given explicitly could not be loaded (message on stderr).
 * IMPL_MISSING: the `{"ev":"api_missing",...}` line was written to the trace.
 */
enum impl_status impl_load(const char *path, struct probe_api *api);
/* Android: starts the binder thread pool; called in the process that runs scenarios (after fork). */
void impl_start_threads(const struct probe_api *api);

#endif
