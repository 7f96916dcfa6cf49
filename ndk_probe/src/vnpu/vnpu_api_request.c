/* ANpuManager_AllocRequest_*: plain value objects. Setters store raw values; validation happens
 * when the request is submitted, as the API describes. Requests are not locked: the API makes
 * concurrent use of one request undefined. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vnpu_internal.h"

void vnpu_request_check(const ANpuManager_AllocRequest *req) {
    if (req == NULL || req->magic != VNPU_REQUEST_MAGIC) {
        fprintf(stderr, "vnpu: %p is not a live ANpuManager_AllocRequest\n", (const void *)req);
        abort();
    }
}

/* Whether the request's fd means "load this segment" in the active personality. */
static bool is_no_file(const struct vnpu_device *dev, int fd) {
    return vnpu_aosp(dev) ? fd < 0 : fd == -1; /* aosp-2026: any negative fd (D11) */
}

VNPU_API ANpuManager_AllocRequest *ANpuManager_AllocRequest_create(void) {
    vnpu_dev();
    ANpuManager_AllocRequest *req = calloc(1, sizeof *req);
    if (req == NULL)
        abort(); /* create never returns NULL */
    req->magic = VNPU_REQUEST_MAGIC;
    req->device = -1;
    req->type = ANPUBUFFER_TYPE_UNKNOWN;
    req->size = 0;
    req->priority = ANPUBUFFER_PRIORITY_DEFAULT;
    req->prot = PROT_READ;
    req->fd = -1;
    return req;
}

VNPU_API void ANpuManager_AllocRequest_free(ANpuManager_AllocRequest *req) {
    struct vnpu_device *dev = vnpu_dev();
    if (req == NULL) {
        if (vnpu_aosp(dev)) /* aosp-2026 rebuilds an owning pointer from NULL (D4, facts REQ-FREE-2) */
            vnpu_null_deref("ANpuManager_AllocRequest_free");
        return;
    }
    vnpu_request_check(req);
    if (!is_no_file(dev, req->fd))
        close(req->fd);
    struct vnpu_cookie *cookie = req->cookie;
    req->magic = 0;
    free(req);
    vnpu_cookie_unref(cookie); /* runs the deleter unless a submission still holds it */
}

VNPU_API void ANpuManager_AllocRequest_setCookie(ANpuManager_AllocRequest *req, void *cookie,
                                                 ANpuManager_CookieDeleter deleter) {
    vnpu_dev();
    vnpu_request_check(req);
    struct vnpu_cookie *old = req->cookie;
    req->cookie = NULL;
#ifdef VNPU_DEFECT_KEEP_REPLACED_COOKIE
    old = NULL; /* deliberate defect for the kit's own tests: the replaced holder leaks */
#endif
    /* The previous cookie goes first (its deleter runs now unless a submission still holds it),
     * then the new one is set, in the order the API describes. */
    vnpu_cookie_unref(old);
    req->cookie = cookie == NULL && deleter == NULL ? NULL : vnpu_cookie_new(cookie, deleter);
}

VNPU_API void ANpuManager_AllocRequest_setDeviceNumber(ANpuManager_AllocRequest *req, int32_t deviceNumber) {
    vnpu_dev();
    vnpu_request_check(req);
    req->device = deviceNumber;
}

VNPU_API void ANpuManager_AllocRequest_setBufferType(ANpuManager_AllocRequest *req, ANpuBuffer_Type bufferType) {
    vnpu_dev();
    vnpu_request_check(req);
    req->type = bufferType;
}

VNPU_API void ANpuManager_AllocRequest_setSize(ANpuManager_AllocRequest *req, int64_t size) {
    vnpu_dev();
    vnpu_request_check(req);
    req->size = size;
}

VNPU_API void ANpuManager_AllocRequest_setBufferPriority(ANpuManager_AllocRequest *req, int32_t bufferPriority) {
    vnpu_dev();
    vnpu_request_check(req);
    req->priority = bufferPriority;
}

VNPU_API void ANpuManager_AllocRequest_setFileSegmentToLoad(ANpuManager_AllocRequest *req, int fdToOwn,
                                                            int64_t fileOffset, int64_t segmentLength,
                                                            int64_t bufferOffset) {
    struct vnpu_device *dev = vnpu_dev();
    vnpu_request_check(req);
    if (!is_no_file(dev, req->fd) && req->fd != fdToOwn)
        close(req->fd); /* the replaced fd was ours */
    req->fd = fdToOwn;
    req->file_offset = fileOffset;
    req->length = segmentLength;
    req->buffer_offset = bufferOffset;
}

VNPU_API void ANpuManager_AllocRequest_setProtectionFlags(ANpuManager_AllocRequest *req, int32_t prot) {
    vnpu_dev();
    vnpu_request_check(req);
    req->prot = prot;
}

VNPU_API void ANpuManager_AllocRequest_setOnAlloc(ANpuManager_AllocRequest *req, ANpuManager_AllocCallback onAlloc) {
    struct vnpu_device *dev = vnpu_dev();
    /* aosp-2026: alloc_request.rs checks only the callback, then stores it through the request
     * reference: a NULL request faults (SIGSEGV), a NULL callback panics first (abort). */
    if (req == NULL && onAlloc != NULL && vnpu_aosp(dev))
        vnpu_null_deref("ANpuManager_AllocRequest_setOnAlloc");
    vnpu_request_check(req);
    if (onAlloc == NULL) {
        fprintf(stderr, "vnpu: ANpuManager_AllocRequest_setOnAlloc: onAlloc is NULL\n");
        abort(); /* documented: the process crashes */
    }
    req->on_alloc = onAlloc;
}

VNPU_API void ANpuManager_AllocRequest_setOnPreempt(ANpuManager_AllocRequest *req,
                                                    ANpuManager_PreemptCallback onPreempt) {
    vnpu_dev();
    vnpu_request_check(req);
    req->on_preempt = onPreempt;
}
