#include "batch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "ops.h"
#include "scenario.h"
#include "trace.h"
#include "vocab.h"

enum exit_status { EXIT_OK, EXIT_CODE, EXIT_SIGNAL, EXIT_TIMEOUT };

static void exit_event(const struct probe_scenario *sc, enum exit_status status, int code, int sig) {
    static const char *const names[] = {"ok", "code", "signal", "timeout"};
    struct jbuf ev;
    trace_event_open(&ev, NPUCONF_EV_EXIT);
    jb_str(&ev, "scenario", sc->id);
    jb_str(&ev, "status", names[status]);
    if (status == EXIT_OK || status == EXIT_CODE) {
        jb_i64(&ev, "code", code);
    } else {
        jb_null(&ev, "code");
    }
    if (status == EXIT_SIGNAL) {
        char tmp[16];
        jb_str(&ev, "signal", vocab_signal_name(sig, tmp));
    } else {
        jb_null(&ev, "signal");
    }
    trace_emit(&ev);
    jb_free(&ev);
}

static void report(const struct probe_scenario *sc, int wstatus) {
    if (WIFEXITED(wstatus)) {
        int code = WEXITSTATUS(wstatus);
        exit_event(sc, code == 0 ? EXIT_OK : EXIT_CODE, code, 0);
    } else if (WIFSIGNALED(wstatus)) {
        exit_event(sc, EXIT_SIGNAL, 0, WTERMSIG(wstatus));
    } else {
        exit_event(sc, EXIT_CODE, -1, 0);
    }
}

/*
 * Waits for `pid` until the deadline. SIGCHLD is blocked, so sigtimedwait() sleeps until the child
 * ends (or the slice passes) without spinning; the slice only bounds a missed wake-up.
 */
static void wait_child(const struct probe_scenario *sc, pid_t pid, uint64_t budget_ns) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    uint64_t deadline = probe_now_ns() + budget_ns;
    for (;;) {
        int wstatus;
        pid_t r = waitpid(pid, &wstatus, WNOHANG);
        if (r == pid) {
            report(sc, wstatus);
            return;
        }
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "npuconf-probe: waitpid(%ld): %s\n", (long)pid, strerror(errno));
            exit_event(sc, EXIT_CODE, -1, 0);
            return;
        }
        uint64_t now = probe_now_ns();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            /* Reap it now: a timed-out scenario must not leave a zombie behind. */
            while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
            }
            exit_event(sc, EXIT_TIMEOUT, 0, 0);
            return;
        }
        uint64_t slice = deadline - now;
        if (slice > UINT64_C(100000000)) {
            slice = UINT64_C(100000000);
        }
        struct timespec ts = probe_ns_to_ts(slice);
        sigtimedwait(&chld, NULL, &ts);
    }
}

static void run_forked(struct probe_ctx *ctx, const struct probe_program *prog) {
    /* Default SIGCHLD disposition: if inherited as SIG_IGN, children would be reaped unseen. */
    signal(SIGCHLD, SIG_DFL);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    for (size_t s = 0; s < prog->nscenarios; s++) {
        const struct probe_scenario *sc = &prog->scenarios[s];
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "npuconf-probe: fork for scenario %s: %s\n", sc->id, strerror(errno));
            exit_event(sc, EXIT_CODE, -1, 0);
            continue;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            /* Threads do not survive fork(): the binder pool is started in each child. */
            impl_start_threads(ctx->api);
            scenario_run(ctx, sc);
            /* _exit: no atexit handlers or library destructors racing the implementation's threads. */
            _exit(0);
        }
        wait_child(sc, pid, probe_scaled_ns(sc->timeout_ms, ctx->opt->timeout_multiplier));
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void run_in_process(struct probe_ctx *ctx, const struct probe_program *prog) {
    impl_start_threads(ctx->api);
    for (size_t s = 0; s < prog->nscenarios; s++) {
        scenario_run(ctx, &prog->scenarios[s]);
        file_close_all(ctx);
        exit_event(&prog->scenarios[s], EXIT_OK, 0, 0);
    }
}

void batch_run(struct probe_ctx *ctx, const struct probe_program *prog) {
    if (ctx->opt->no_fork) {
        run_in_process(ctx, prog);
    } else {
        run_forked(ctx, prog);
    }
}
