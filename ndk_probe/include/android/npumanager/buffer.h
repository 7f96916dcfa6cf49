/*
 * npuconf's own transcription of the NDK header android/npumanager/buffer.h (API level 37),
 * for host builds where no NDK sysroot provides it. Only the ABI is reproduced: type names,
 * enum values and underlying types, and the 18 function signatures. The normative prose lives in
 * the published NDK reference; conformance/clauses.yaml quotes it clause by clause.
 *
 * ABI facts: ANpuBuffer_Priority is int32_t (0 / 500 / 1000); ANpuBuffer_Type is int8_t with
 * UNKNOWN..AUXILIARY = 0..4. Every function is introduced in API 37.
 */
#ifndef NPUCONF_ANDROID_NPUMANAGER_BUFFER_H
#define NPUCONF_ANDROID_NPUMANAGER_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef _Nonnull
#define _Nonnull
#endif
#ifndef _Nullable
#define _Nullable
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ANpuBuffer ANpuBuffer;
typedef struct ANpuManager_AllocRequest ANpuManager_AllocRequest;

typedef int32_t ANpuBuffer_Priority;
enum {
    ANPUBUFFER_PRIORITY_MIN = 0,
    ANPUBUFFER_PRIORITY_DEFAULT = 500,
    ANPUBUFFER_PRIORITY_MAX = 1000,
};

typedef int8_t ANpuBuffer_Type;
enum {
    ANPUBUFFER_TYPE_UNKNOWN = 0,
    ANPUBUFFER_TYPE_MODEL_EXECUTABLE = 1,
    ANPUBUFFER_TYPE_MODEL_WEIGHTS = 2,
    ANPUBUFFER_TYPE_CACHE = 3,
    ANPUBUFFER_TYPE_AUXILIARY = 4,
};

typedef void (*ANpuManager_AllocCallback)(void *_Nullable cookie, int errorNum, ANpuBuffer *_Nullable buf);
typedef void (*ANpuManager_PreemptCallback)(void *_Nullable cookie);
typedef void (*ANpuManager_LoadCallback)(void *_Nullable cookie, int errorNum, ANpuBuffer *_Nonnull buf);
typedef void (*ANpuManager_CookieDeleter)(void *_Nullable cookie);

ANpuManager_AllocRequest *_Nonnull ANpuManager_AllocRequest_create(void);
void ANpuManager_AllocRequest_free(ANpuManager_AllocRequest *_Nullable request);
void ANpuManager_AllocRequest_setCookie(ANpuManager_AllocRequest *_Nonnull request, void *_Nullable cookie,
                                        ANpuManager_CookieDeleter _Nullable cookieDeleter);
void ANpuManager_AllocRequest_setDeviceNumber(ANpuManager_AllocRequest *_Nonnull request, int32_t deviceNumber);
void ANpuManager_AllocRequest_setBufferType(ANpuManager_AllocRequest *_Nonnull request, ANpuBuffer_Type bufferType);
void ANpuManager_AllocRequest_setSize(ANpuManager_AllocRequest *_Nonnull request, int64_t size);
void ANpuManager_AllocRequest_setBufferPriority(ANpuManager_AllocRequest *_Nonnull request, int32_t bufferPriority);
void ANpuManager_AllocRequest_setFileSegmentToLoad(ANpuManager_AllocRequest *_Nonnull request, int fdToOwn,
                                                   int64_t fileOffset, int64_t segmentLength, int64_t bufferOffset);
void ANpuManager_AllocRequest_setProtectionFlags(ANpuManager_AllocRequest *_Nonnull request, int32_t prot);
void ANpuManager_AllocRequest_setOnAlloc(ANpuManager_AllocRequest *_Nonnull request,
                                         ANpuManager_AllocCallback _Nonnull onAlloc);
void ANpuManager_AllocRequest_setOnPreempt(ANpuManager_AllocRequest *_Nonnull request,
                                           ANpuManager_PreemptCallback _Nullable onPreempt);
int ANpuManager_isSupported(ANpuManager_AllocRequest *_Nonnull const *_Nonnull requests, size_t requestsLen,
                            bool *_Nonnull outIsSupported);
void ANpuManager_allocAsync(ANpuManager_AllocRequest *_Nonnull const *_Nonnull requests, size_t requestsLen);
int ANpuBuffer_free(ANpuBuffer *_Nonnull const *_Nonnull buffers, size_t buffersLen);
void *_Nonnull ANpuBuffer_map(ANpuBuffer *_Nonnull buf, void *_Nullable addr, size_t length, int prot, int flags,
                              off_t offset);
int ANpuBuffer_unmap(ANpuBuffer *_Nonnull buf, void *_Nonnull addr, size_t length);
int ANpuBuffer_setPriority(ANpuBuffer *_Nonnull buf, int32_t newBufferPriority);
void ANpuBuffer_loadAsync(ANpuBuffer *_Nonnull buf, int fdToOwn, int64_t fileOffset, int64_t segmentLength,
                          int64_t bufferOffset, ANpuManager_LoadCallback _Nonnull onLoad);

#ifdef __cplusplus
}
#endif

#endif
