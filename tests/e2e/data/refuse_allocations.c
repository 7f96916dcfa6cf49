#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
typedef struct ANpuManager_AllocRequest ANpuManager_AllocRequest;
typedef struct ANpuBuffer ANpuBuffer;
typedef void (*alloc_cb)(void *, int, ANpuBuffer *);
typedef int (*free_fn)(ANpuBuffer *const *, size_t);
typedef void (*set_fn)(ANpuManager_AllocRequest *, alloc_cb);
static alloc_cb app_cb;
/* Refuse (ENOMEM) while the count file named by NPUCONF_TEST_REFUSE_FILE holds fewer than
   NPUCONF_TEST_REFUSE_COUNT bytes: the count survives the probe's forks and reruns. */
static int refuse(void) {
    const char *path = getenv("NPUCONF_TEST_REFUSE_FILE");
    const char *count = getenv("NPUCONF_TEST_REFUSE_COUNT");
    if (path == NULL || count == NULL) return 0;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0) return 0;
    off_t size = lseek(fd, 0, SEEK_END);
    int refused = size < atoi(count);
    if (refused && write(fd, "x", 1) != 1) refused = 0;
    close(fd);
    return refused;
}
static void trampoline(void *cookie, int error_num, ANpuBuffer *buf) {
    if (error_num == 0 && buf != NULL && refuse()) {
        free_fn real_free = (free_fn)dlsym(RTLD_NEXT, "ANpuBuffer_free");
        real_free(&buf, 1);
        app_cb(cookie, ENOMEM, NULL);
        return;
    }
    app_cb(cookie, error_num, buf);
}
void ANpuManager_AllocRequest_setOnAlloc(ANpuManager_AllocRequest *request, alloc_cb cb) {
    set_fn real = (set_fn)dlsym(RTLD_NEXT, "ANpuManager_AllocRequest_setOnAlloc");
    if (cb != NULL) app_cb = cb;
    real(request, cb != NULL ? trampoline : NULL);
}
