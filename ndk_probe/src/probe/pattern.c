#include "pattern.h"

/* volatile: the bytes are device memory the implementation may change behind the compiler's back. */
uint64_t fnv1a64(uint64_t h, const volatile unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}
