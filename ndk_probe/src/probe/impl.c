#include "impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "trace.h"

/* Compile-time proof that the table's types are buffer.h's (the function is named, never called). */
#define PROBE_API_CHECK(name, ret, params) \
    _Static_assert(_Generic(&name, ret(*) params : 1, default : 0), #name " differs from buffer.h");
PROBE_API_FUNCTIONS(PROBE_API_CHECK)

#define PROBE_API_ENTRY(name, ret, params) {#name, offsetof(struct probe_api, name)},
static const struct {
    const char *name;
    size_t offset;
} API_SYMBOLS[] = {PROBE_API_FUNCTIONS(PROBE_API_ENTRY)};
#define API_SYMBOL_COUNT (sizeof API_SYMBOLS / sizeof API_SYMBOLS[0])

_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "dlsym results must fit function pointers");

/* dlsym() into a function-pointer slot; memcpy keeps the object-to-function conversion defined. */
static bool resolve(void *lib, const char *name, void *slot) {
    void *sym = dlsym(lib, name);
    if (sym != NULL) {
        memcpy(slot, &sym, sizeof sym);
    }
    return sym != NULL;
}

static void write_missing(const bool *missing) {
    struct jbuf ev;
    trace_event_open(&ev, NPUCONF_EV_API_MISSING);
    jb_open(&ev, "symbols", '[');
    for (size_t i = 0; i < API_SYMBOL_COUNT; i++) {
        if (missing[i]) {
            jb_str(&ev, NULL, API_SYMBOLS[i].name);
        }
    }
    jb_close(&ev, ']');
    trace_emit(&ev);
    jb_free(&ev);
}

#ifndef __ANDROID__
/* libvnpu.so next to the probe binary, found through /proc/self/exe. */
static char *default_impl_path(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        return NULL;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL) {
        return NULL;
    }
    slash[1] = '\0';
    static const char lib[] = "libvnpu.so";
    char *path = malloc(strlen(exe) + sizeof lib);
    if (path != NULL) {
        strcpy(path, exe);
        strcat(path, lib);
    }
    return path;
}
#endif

enum impl_status impl_load(const char *path, struct probe_api *api) {
    memset(api, 0, sizeof *api);
    bool explicit_path = true;
    char *owned = NULL;
    if (path == NULL) {
        path = getenv("NPUCONF_IMPL");
        if (path != NULL && path[0] == '\0') {
            path = NULL;
        }
    }
    if (path == NULL) {
        explicit_path = false;
#ifdef __ANDROID__
        path = "libandroid.so";
#else
        owned = default_impl_path();
        path = owned != NULL ? owned : "libvnpu.so";
#endif
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    bool missing[API_SYMBOL_COUNT];
    if (lib == NULL) {
        const char *why = dlerror();
        fprintf(stderr, "npuconf-probe: cannot load %s: %s\n", path, why != NULL ? why : "unknown error");
        free(owned);
        if (explicit_path) {
            return IMPL_LOAD_FAILED;
        }
        /* No implementation where the platform keeps it: the API is missing on this target. */
        for (size_t i = 0; i < API_SYMBOL_COUNT; i++) {
            missing[i] = true;
        }
        write_missing(missing);
        return IMPL_MISSING;
    }
    free(owned);
    bool any_missing = false;
    for (size_t i = 0; i < API_SYMBOL_COUNT; i++) {
        missing[i] = !resolve(lib, API_SYMBOLS[i].name, (char *)api + API_SYMBOLS[i].offset);
        any_missing = any_missing || missing[i];
    }
    if (any_missing) {
        write_missing(missing);
        return IMPL_MISSING;
    }
    resolve(lib, VNPU_CONTROL_SYMBOL, &api->vnpu_control);
    resolve(lib, VNPU_WAITING_SYMBOL, &api->vnpu_waiting);
    resolve(lib, VNPU_WAIT_IDLE_SYMBOL, &api->vnpu_wait_idle);
#ifdef __ANDROID__
    /* Callbacks travel over binder; the library never starts a pool itself. */
    void *binder = dlopen("libbinder_ndk.so", RTLD_NOW | RTLD_LOCAL);
    if (binder != NULL) {
        resolve(binder, "ABinderProcess_setThreadPoolMaxThreadCount", &api->binder_set_max_threads);
        resolve(binder, "ABinderProcess_startThreadPool", &api->binder_start_pool);
    }
#endif
    /* The library stays loaded for the life of the process: its threads may outlive any scenario. */
    return IMPL_OK;
}

void impl_start_threads(const struct probe_api *api) {
    if (api->binder_set_max_threads != NULL) {
        api->binder_set_max_threads(4);
    }
    if (api->binder_start_pool != NULL) {
        api->binder_start_pool();
    }
}
