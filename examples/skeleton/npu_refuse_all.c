/* A skeleton implementation of android/npumanager/buffer.h for a device with no NPU memory.
 *
 * It is a starting point for an OEM port, and a complete implementation in its own right: it
 * supports no (device, type) pair, so isSupported answers "no" for every request and every
 * allocation is answered with an error. Everything the text asks of a device without buffers is
 * real: requests keep their fields, a snapshot is taken at allocAsync, cookies are owned and their
 * deleters run exactly once (shared between a request and its snapshots), owned file descriptors are
 * closed, and the calls the text says crash the process do crash it.
 *
 * Replace refuse_reason() and the ANpuBuffer_* bodies with calls into your driver to grow it into a
 * real port; docs/guide.md shows how to run the kit against it:
 *
 *   cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -pthread -I ndk_probe/include \
 *      -o libnpu_refuse_all.so examples/skeleton/npu_refuse_all.c
 *   npuconf run --target local --impl ./libnpu_refuse_all.so
 */
#include <android/npumanager/buffer.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* A (cookie, deleter) pair given to setCookie, shared by a request and the snapshots taken of it. */
struct cookie_holder {
    atomic_int refs;
    void *value;
    ANpuManager_CookieDeleter deleter;
};

struct ANpuManager_AllocRequest {
    struct cookie_holder *cookie; /* NULL until setCookie gives one */
    int32_t device;
    ANpuBuffer_Type type;
    int64_t size;
    int32_t priority;
    int32_t prot;
    int fd; /* owned; -1 for none */
    int64_t file_offset, segment_length, buffer_offset;
    ANpuManager_AllocCallback on_alloc;
    ANpuManager_PreemptCallback on_preempt;
};

/* No ANpuBuffer is ever created by this implementation; the type stays opaque. */
struct ANpuBuffer {
    int unused;
};

static struct cookie_holder *holder_new(void *value, ANpuManager_CookieDeleter deleter)
{
    struct cookie_holder *h = malloc(sizeof *h);
    if (h == NULL)
        abort(); /* the API has no way to report it */
    atomic_init(&h->refs, 1);
    h->value = value;
    h->deleter = deleter;
    return h;
}

static struct cookie_holder *holder_ref(struct cookie_holder *h)
{
    if (h != NULL)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
    return h;
}

static void holder_unref(struct cookie_holder *h)
{
    if (h == NULL || atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (h->deleter != NULL) /* called even for a NULL cookie; never without a deleter */
        h->deleter(h->value);
    free(h);
}

static void close_owned(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* The errno an allocation of `r` is answered with. The text names EINVAL for an unset type and a
 * negative device; every other request is refused because no pair is supported. */
static int refuse_reason(const struct ANpuManager_AllocRequest *r)
{
    if (r->type == ANPUBUFFER_TYPE_UNKNOWN || r->device < 0)
        return EINVAL;
    return ENOTSUP;
}

EXPORT ANpuManager_AllocRequest *ANpuManager_AllocRequest_create(void)
{
    ANpuManager_AllocRequest *r = calloc(1, sizeof *r);
    if (r == NULL)
        abort(); /* the result is _Nonnull: there is no way to say "no memory" */
    r->device = -1;
    r->type = ANPUBUFFER_TYPE_UNKNOWN;
    r->priority = ANPUBUFFER_PRIORITY_DEFAULT;
    r->prot = PROT_READ;
    r->fd = -1;
    return r;
}

EXPORT void ANpuManager_AllocRequest_free(ANpuManager_AllocRequest *request)
{
    if (request == NULL)
        return;
    holder_unref(request->cookie);
    close_owned(request->fd);
    free(request);
}

EXPORT void ANpuManager_AllocRequest_setCookie(ANpuManager_AllocRequest *request, void *cookie,
                                               ANpuManager_CookieDeleter cookieDeleter)
{
    struct cookie_holder *previous = request->cookie;
    request->cookie = (cookie == NULL && cookieDeleter == NULL) ? NULL : holder_new(cookie, cookieDeleter);
    holder_unref(previous); /* the previous cookie is deleted with its own deleter */
}

EXPORT void ANpuManager_AllocRequest_setDeviceNumber(ANpuManager_AllocRequest *request, int32_t deviceNumber)
{
    request->device = deviceNumber;
}

EXPORT void ANpuManager_AllocRequest_setBufferType(ANpuManager_AllocRequest *request, ANpuBuffer_Type bufferType)
{
    request->type = bufferType;
}

EXPORT void ANpuManager_AllocRequest_setSize(ANpuManager_AllocRequest *request, int64_t size)
{
    request->size = size;
}

EXPORT void ANpuManager_AllocRequest_setBufferPriority(ANpuManager_AllocRequest *request, int32_t bufferPriority)
{
    request->priority = bufferPriority;
}

EXPORT void ANpuManager_AllocRequest_setFileSegmentToLoad(ANpuManager_AllocRequest *request, int fdToOwn,
                                                          int64_t fileOffset, int64_t segmentLength,
                                                          int64_t bufferOffset)
{
    if (request->fd != fdToOwn)
        close_owned(request->fd);
    request->fd = fdToOwn;
    request->file_offset = fileOffset;
    request->segment_length = segmentLength;
    request->buffer_offset = bufferOffset;
}

EXPORT void ANpuManager_AllocRequest_setProtectionFlags(ANpuManager_AllocRequest *request, int32_t prot)
{
    request->prot = prot;
}

EXPORT void ANpuManager_AllocRequest_setOnAlloc(ANpuManager_AllocRequest *request, ANpuManager_AllocCallback onAlloc)
{
    if (onAlloc == NULL)
        abort(); /* "setOnAlloc() must be called with a non-NULL value. Otherwise, the process will crash." */
    request->on_alloc = onAlloc;
}

EXPORT void ANpuManager_AllocRequest_setOnPreempt(ANpuManager_AllocRequest *request,
                                                  ANpuManager_PreemptCallback onPreempt)
{
    request->on_preempt = onPreempt;
}

EXPORT int ANpuManager_isSupported(ANpuManager_AllocRequest *const *requests, size_t requestsLen,
                                   bool *outIsSupported)
{
    (void)requests; /* no request is supported, whatever it asks for */
    for (size_t i = 0; i < requestsLen; i++)
        outIsSupported[i] = false;
    return 0;
}

EXPORT void ANpuManager_allocAsync(ANpuManager_AllocRequest *const *requests, size_t requestsLen)
{
    /* The snapshot: what each onAlloc will see, taken before any callback runs (a callback may
     * change or free the requests). Every request is checked first, so a batch with a request
     * lacking onAlloc crashes before any callback. */
    struct snapshot {
        ANpuManager_AllocCallback on_alloc;
        struct cookie_holder *cookie;
        int error;
    };
    if (requestsLen == 0)
        return;
    for (size_t i = 0; i < requestsLen; i++)
        if (requests[i]->on_alloc == NULL)
            abort(); /* "setOnAlloc() must be called before calling ANpuManager_allocAsync()" */
    struct snapshot *taken = calloc(requestsLen, sizeof *taken);
    if (taken == NULL)
        abort();
    for (size_t i = 0; i < requestsLen; i++) {
        taken[i].on_alloc = requests[i]->on_alloc;
        taken[i].cookie = holder_ref(requests[i]->cookie);
        taken[i].error = refuse_reason(requests[i]);
    }
    /* Every error here is known at once, so each onAlloc runs on this thread, inside this call. */
    for (size_t i = 0; i < requestsLen; i++) {
        taken[i].on_alloc(taken[i].cookie != NULL ? taken[i].cookie->value : NULL, taken[i].error, NULL);
        holder_unref(taken[i].cookie);
    }
    free(taken);
}

/* No buffer is ever handed out, so none of these can be given one this implementation made. */

EXPORT int ANpuBuffer_free(ANpuBuffer *const *buffers, size_t buffersLen)
{
    (void)buffers;
    if (buffersLen == 0)
        return 0;
    errno = EINVAL;
    return -1;
}

EXPORT void *ANpuBuffer_map(ANpuBuffer *buf, void *addr, size_t length, int prot, int flags, off_t offset)
{
    (void)buf, (void)addr, (void)length, (void)prot, (void)flags, (void)offset;
    errno = EINVAL;
    return MAP_FAILED;
}

EXPORT int ANpuBuffer_unmap(ANpuBuffer *buf, void *addr, size_t length)
{
    (void)buf, (void)addr, (void)length;
    errno = EINVAL;
    return -1;
}

EXPORT int ANpuBuffer_setPriority(ANpuBuffer *buf, int32_t newBufferPriority)
{
    (void)buf, (void)newBufferPriority;
    errno = EINVAL;
    return -1;
}

EXPORT void ANpuBuffer_loadAsync(ANpuBuffer *buf, int fdToOwn, int64_t fileOffset, int64_t segmentLength,
                                 int64_t bufferOffset, ANpuManager_LoadCallback onLoad)
{
    (void)fileOffset, (void)segmentLength, (void)bufferOffset;
    if (onLoad == NULL)
        abort(); /* "This must be non-NULL. Otherwise, the process will crash." */
    close_owned(fdToOwn);
    onLoad(NULL, EINVAL, buf);
}
