/* The host's digest of the data pattern (docs/formats.md §5): what the reference model's content.fnv1a64 of
 * content.pattern_bytes computes byte by byte in Python, for the kit's judge (host/run/digests.py, which
 * checks it against the model before using it). Built only for the host, never for a device. */
#include <stddef.h>
#include <stdint.h>

#include "pattern.h"

__attribute__((visibility("default"))) uint64_t npuconf_pattern_digest(uint64_t h, uint64_t seed, uint64_t first,
                                                                       uint64_t count);

/* FNV-1a-64 from `h` over pattern(seed, k) for k in [first, first + count). */
uint64_t npuconf_pattern_digest(uint64_t h, uint64_t seed, uint64_t first, uint64_t count) {
    unsigned char block[256];
    while (count > 0) {
        size_t n = count < sizeof block ? (size_t)count : sizeof block;
        for (size_t i = 0; i < n; i++) {
            block[i] = pattern_byte(seed, first + i);
        }
        h = fnv1a64(h, block, n);
        first += n;
        count -= n;
    }
    return h;
}
