/* Cookie holders: the (cookie, deleter) pairs given to setCookie, shared by a request and by
 * everything submitted from it, so the deleter runs exactly once, when the last holder lets go. */
#include <stdlib.h>

#include "vnpu_internal.h"

struct vnpu_cookie *vnpu_cookie_new(void *value, ANpuManager_CookieDeleter deleter) {
    struct vnpu_cookie *c = malloc(sizeof *c);
    if (c == NULL)
        abort(); /* the API has no way to report it */
    atomic_init(&c->refs, 1);
    c->value = value;
    c->deleter = deleter;
    return c;
}

struct vnpu_cookie *vnpu_cookie_ref(struct vnpu_cookie *c) {
    if (c != NULL)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void vnpu_cookie_unref(struct vnpu_cookie *c) {
    if (c == NULL)
        return;
    /* acq_rel: whoever runs the deleter sees every write made before the other releases. */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (c->deleter != NULL) /* also for a NULL cookie; never without a deleter */
        c->deleter(c->value);
    free(c);
}

void *vnpu_cookie_value(const struct vnpu_cookie *c) { return c != NULL ? c->value : NULL; }
