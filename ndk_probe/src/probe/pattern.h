/* The data pattern and digest of docs/formats.md §5, shared with the reference model. */
#ifndef NPUCONF_PROBE_PATTERN_H
#define NPUCONF_PROBE_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* pattern(seed, k) = (seed * 131 + k * 7 + (k >> 8) * 13) & 0xff, in wrapping uint64 arithmetic. */
static inline unsigned char pattern_byte(uint64_t seed, uint64_t k) {
    return (unsigned char)((seed * 131u + k * 7u + (k >> 8) * 13u) & 0xffu);
}

#define FNV1A64_INIT UINT64_C(0xcbf29ce484222325)
uint64_t fnv1a64(uint64_t h, const volatile unsigned char *p, size_t n);

#endif
