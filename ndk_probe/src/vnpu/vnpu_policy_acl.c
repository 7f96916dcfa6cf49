/* Policy `acl`: Ascend ACL's aclrtMalloc arithmetic, restated in docs/vnpu.md §6.
 * A block reserves round_up(size, 32) + 32 bytes and starts 64-byte aligned, so it takes
 * round_up(round_up(size, 32) + 32, 64) bytes of normal pages. As under HUGE_FIRST, a request
 * above 1 MiB prefers the huge-page pool (2 MiB pages: the reservation rounded up to 2 MiB) and
 * falls back to normal pages. Normal pool: the capacity (minus the pressure reservation); huge
 * pool: an extra capacity / 8, rounded down to whole 2 MiB pages. */
#include <errno.h>

#include "vnpu_internal.h"

#define ACL_GRANULE        32u
#define ACL_ALIGN          64u
#define ACL_HUGE_PAGE      (2u * 1024u * 1024u)
#define ACL_HUGE_THRESHOLD (1u * 1024u * 1024u)

static uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

static uint64_t huge_capacity(const struct vnpu_device *dev) {
    return dev->profile.capacity / 8 / ACL_HUGE_PAGE * ACL_HUGE_PAGE;
}

int vnpu_acl_place_locked(struct vnpu_device *dev, int64_t size, ANpuBuffer *buf) {
    uint64_t base = round_up((uint64_t)size, ACL_GRANULE) + ACL_GRANULE;
    if ((uint64_t)size > ACL_HUGE_THRESHOLD) {
        uint64_t huge = round_up(base, ACL_HUGE_PAGE);
        if (dev->pol.used_huge + huge <= huge_capacity(dev)) {
            if (buf != NULL) {
                dev->pol.used_huge += huge;
                buf->pol_charge = huge;
                buf->pol_region = VNPU_REGION_HUGE;
            }
            return 0;
        }
    }
    uint64_t charge = round_up(base, ACL_ALIGN);
    uint64_t cap = dev->profile.capacity;
    if (dev->reserved > cap || dev->pol.used_normal > cap - dev->reserved ||
        charge > cap - dev->reserved - dev->pol.used_normal)
        return ENOMEM;
    if (buf != NULL) {
        dev->pol.used_normal += charge;
        buf->pol_charge = charge;
        buf->pol_region = VNPU_REGION_NORMAL;
    }
    return 0;
}

void vnpu_acl_release_locked(struct vnpu_device *dev, ANpuBuffer *buf) {
    if (buf->pol_region == VNPU_REGION_HUGE)
        dev->pol.used_huge -= buf->pol_charge;
    else
        dev->pol.used_normal -= buf->pol_charge;
}
