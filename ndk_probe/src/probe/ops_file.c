/* Files the scenario hands to the implementation, and what the probe can still observe of them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "ops.h"
#include "pattern.h"
#include "trace.h"

/* An anonymous file: memfd where the kernel has it, else an unlinked temporary file. */
static int anon_file(void) {
    int fd = memfd_create("npuconf-file", 0);
    if (fd >= 0 || errno != ENOSYS) {
        return fd;
    }
    const char *dir = getenv("TMPDIR");
#ifdef __ANDROID__
    const char *fallback = "/data/local/tmp";
#else
    const char *fallback = "/tmp";
#endif
    if (dir == NULL || dir[0] == '\0') {
        dir = fallback;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/npuconf-file-XXXXXX", dir) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkstemp(path);
    if (fd >= 0) {
        unlink(path);
    }
    return fd;
}

static bool write_pattern(int fd, uint64_t size, uint64_t seed) {
    unsigned char chunk[65536];
    uint64_t pos = 0;
    while (pos < size) {
        size_t n = size - pos < sizeof chunk ? (size_t)(size - pos) : sizeof chunk;
        for (size_t i = 0; i < n; i++) {
            chunk[i] = pattern_byte(seed, pos + i);
        }
        size_t done = 0;
        while (done < n) {
            ssize_t w = write(fd, chunk + done, n - done);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                return false;
            }
            done += (size_t)w;
        }
        pos += n;
    }
    return true;
}

static void fail_errno(struct op_result *res, int err) {
    res->has_ret = true;
    res->ret = -1;
    res->failed = true;
    res->err = err;
}

/* Empties a live slot: the watch descriptor is the probe's, the file's own only if never handed over. */
static void file_release(struct probe_file_slot *f) {
    if (f->live) {
        close(f->watch);
        if (!f->handed) {
            close(f->fd);
        }
        f->live = false;
    }
}

void op_file_new(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    unsigned slot = st->args[0].v.slot;
    struct probe_file_slot *f = &ctx->file[slot];
    file_release(f); /* reusing the slot */
    int fd = anon_file();
    if (fd < 0) {
        fail_errno(res, errno);
        return;
    }
    struct stat sb;
    int watch = -1;
    if (!write_pattern(fd, st->args[1].v.u64, st->args[2].v.u64) || lseek(fd, 0, SEEK_SET) != 0 ||
        fstat(fd, &sb) != 0 || (watch = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        int err = errno;
        close(fd);
        fail_errno(res, err);
        return;
    }
    *f = (struct probe_file_slot){
        .live = true, .handed = false, .fd = fd, .watch = watch, .dev = sb.st_dev, .ino = sb.st_ino};
    op_int_result(res, 0);
}

/* The file slot the step's first argument names, or NULL (the op skipped) when it is unbound. */
static const struct probe_file_slot *live_file(const struct probe_ctx *ctx, const struct probe_step *st,
                                               struct op_result *res) {
    unsigned slot = st->args[0].v.slot;
    const struct probe_file_slot *f = &ctx->file[slot];
    if (!f->live) {
        op_skip(res, "f%u unbound", slot);
        return NULL;
    }
    return f;
}

void op_file_seek(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_file_slot *f = live_file(ctx, st, res);
    int64_t pos = st->args[1].v.i64;
    if (f == NULL) {
        return;
    }
    if ((int64_t)(off_t)pos != pos) {
        op_skip(res, "position %" PRId64 " does not fit off_t", pos);
        return;
    }
    /* Through the private dup: it moves the shared file description even after the hand-over. */
    if (lseek(f->watch, (off_t)pos, SEEK_SET) < 0) {
        fail_errno(res, errno);
        return;
    }
    op_int_result(res, 0);
}

/* Closed: the handed-over number is invalid, or it was reused for another file. */
static bool fd_closed(const struct probe_file_slot *f) {
    struct stat sb;
    return fstat(f->fd, &sb) != 0 || sb.st_dev != f->dev || sb.st_ino != f->ino;
}

static void fd_report(const struct probe_file_slot *f, bool closed, struct op_result *res) {
    off_t pos = lseek(f->watch, 0, SEEK_CUR);
    if (pos < 0) {
        fail_errno(res, errno);
        return;
    }
    op_int_result(res, 0);
    jb_bool(&res->extra, "closed", closed);
    jb_i64(&res->extra, "position", (int64_t)pos);
}

void op_fd_check(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_file_slot *f = live_file(ctx, st, res);
    if (f != NULL) {
        fd_report(f, fd_closed(f), res);
    }
}

/* An implementation may close an owned descriptor on any thread, any time after it stopped needing it:
 * the probe polls every millisecond until the deadline, and a conforming device ends the wait at once. */
static void await_closed_until(const struct probe_file_slot *f, uint64_t deadline_ns, struct op_result *res) {
    uint64_t start = probe_now_ns();
    bool closed = fd_closed(f);
    while (!closed && probe_now_ns() < deadline_ns) {
        probe_sleep_ns(1000000);
        closed = fd_closed(f);
    }
    fd_report(f, closed, res);
    if (res->ret == 0)
        jb_u64(&res->extra, "waited_ms", (probe_now_ns() - start) / 1000000);
}

void op_await_closed(struct probe_ctx *ctx, const struct probe_step *st, struct op_result *res) {
    const struct probe_file_slot *f = live_file(ctx, st, res);
    if (f != NULL) {
        await_closed_until(f, probe_now_ns() + probe_scaled_ns(st->args[1].v.u64, ctx->opt->timeout_multiplier), res);
    }
}

/* Teardown: after everything was given back, each handed-over descriptor is awaited closed (an
 * `await_closed` step marked teardown), all within one budget; a conforming device ends it at once. */
void file_await_closed_all(struct probe_ctx *ctx, uint64_t budget_ms) {
    uint64_t deadline = probe_now_ns() + probe_scaled_ns(budget_ms, ctx->opt->timeout_multiplier);
    for (unsigned slot = 0; slot < PROBE_SLOTS; slot++) {
        const struct probe_file_slot *f = &ctx->file[slot];
        if (!f->live || !f->handed) {
            continue;
        }
        struct jbuf args;
        jb_init(&args);
        jb_raw(&args, "{");
        ops_slot_json(&args, "file", ARG_FILE, slot);
        jb_u64(&args, "timeout_ms", budget_ms);
        jb_raw(&args, "}");
        struct op_result res;
        size_t step = ops_teardown_begin(ctx, OP_AWAIT_CLOSED, &args, &res);
        await_closed_until(f, deadline, &res);
        ops_ret_event(step, OP_AWAIT_CLOSED, &res);
    }
}

bool file_fdsel(struct probe_ctx *ctx, const struct probe_arg *arg, struct op_result *res, int *fd) {
    if (!arg->v.fdsel.is_file) {
        *fd = arg->v.fdsel.fd;
        return true;
    }
    struct probe_file_slot *f = &ctx->file[arg->v.fdsel.slot];
    if (!f->live) {
        op_skip(res, "f%u unbound", arg->v.fdsel.slot);
        return false;
    }
    f->handed = true;
    *fd = f->fd;
    return true;
}

void file_close_all(struct probe_ctx *ctx) {
    for (size_t i = 0; i < PROBE_SLOTS; i++) {
        file_release(&ctx->file[i]);
    }
}
