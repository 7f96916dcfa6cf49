/*
 * npuconf-probe: runs probe programs against an implementation of android/npumanager/buffer.h and
 * writes a JSON-lines trace on stdout (docs/formats.md §3–§5, docs/probe.md).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"
#include "ctx.h"
#include "impl.h"
#include "ops.h"
#include "program.h"
#include "trace.h"
#include "vocab.h"

static const char USAGE[] =
    "usage: npuconf-probe --list\n"
    "       npuconf-probe [--impl LIB.so] [--timeout-multiplier X] [--settle-ms N] [--no-fork] PROGRAM|-\n";

/* Everything main owns, on its stack. */
struct probe_main {
    struct probe_options opt;
    struct probe_program prog;
    struct probe_api api;
    struct probe_ctx ctx;
};

static int usage_error(const char *what, const char *value) {
    fprintf(stderr, "npuconf-probe: %s%s%s\n%s", what, value != NULL ? ": " : "", value != NULL ? value : "", USAGE);
    return PROBE_EXIT_USAGE;
}

/* The value of `--name VALUE` or `--name=VALUE`; advances *i past it. */
static const char *option_value(int argc, char **argv, int *i, const char *name, bool *matched) {
    size_t n = strlen(name);
    *matched = false;
    if (strncmp(argv[*i], name, n) != 0) {
        return NULL;
    }
    if (argv[*i][n] == '=') {
        *matched = true;
        return argv[*i] + n + 1;
    }
    if (argv[*i][n] != '\0') {
        return NULL;
    }
    *matched = true;
    if (*i + 1 >= argc) {
        return NULL;
    }
    return argv[++*i];
}

static bool parse_u64_opt(const char *s, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

/* Returns -1 to go on, else the exit code. */
static int parse_cli(int argc, char **argv, struct probe_options *opt) {
    opt->timeout_multiplier = 1.0;
    opt->settle_ms = 2000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool m;
        const char *v;
        if (strcmp(a, "--list") == 0) {
            if (argc != 2) {
                return usage_error("--list takes no other argument", NULL);
            }
            vocab_print_list(stdout);
            return fflush(stdout) == 0 ? PROBE_EXIT_OK : PROBE_EXIT_USAGE;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            return PROBE_EXIT_OK;
        } else if (strcmp(a, "--no-fork") == 0) {
            opt->no_fork = true;
        } else if ((v = option_value(argc, argv, &i, "--impl", &m)), m) {
            if (v == NULL || *v == '\0') {
                return usage_error("--impl needs a library path", NULL);
            }
            opt->impl_path = v;
        } else if ((v = option_value(argc, argv, &i, "--timeout-multiplier", &m)), m) {
            char *end = NULL;
            double x = v != NULL ? strtod(v, &end) : 0;
            if (v == NULL || *v == '\0' || *end != '\0' || !isfinite(x) || x <= 0) {
                return usage_error("--timeout-multiplier needs a positive number", v);
            }
            opt->timeout_multiplier = x;
        } else if ((v = option_value(argc, argv, &i, "--settle-ms", &m)), m) {
            if (!parse_u64_opt(v, &opt->settle_ms)) {
                return usage_error("--settle-ms needs a decimal number of milliseconds", v);
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option", a);
        } else if (opt->program_path != NULL) {
            return usage_error("more than one program", a);
        } else {
            opt->program_path = a;
        }
    }
    if (opt->program_path == NULL) {
        return usage_error("no program given", NULL);
    }
    return -1;
}

/* The whole program text, with room for the parser's terminating NUL. */
static char *read_program(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

int main(int argc, char **argv) {
    struct probe_main m;
    memset(&m, 0, sizeof m);
    int rc = parse_cli(argc, argv, &m.opt);
    if (rc >= 0) {
        return rc;
    }
    if (!ops_complete()) {
        abort(); /* a vocabulary op without a handler is a probe bug */
    }

    size_t len = 0;
    char *text = read_program(m.opt.program_path, &len);
    if (text == NULL) {
        fprintf(stderr, "npuconf-probe: cannot read program %s: %s\n", m.opt.program_path, strerror(errno));
        return PROBE_EXIT_USAGE;
    }
    char err[512];
    if (!program_parse(text, len, &m.prog, err, sizeof err)) {
        fprintf(stderr, "npuconf-probe: bad program %s: %s\n", m.opt.program_path, err);
        program_free(&m.prog);
        return PROBE_EXIT_BAD_PROGRAM;
    }

    trace_init(STDOUT_FILENO);
    switch (impl_load(m.opt.impl_path, &m.api)) {
    case IMPL_OK:
        break;
    case IMPL_LOAD_FAILED:
        program_free(&m.prog);
        return PROBE_EXIT_USAGE;
    case IMPL_MISSING:
        program_free(&m.prog);
        return PROBE_EXIT_API_MISSING;
    }

    m.ctx.api = &m.api;
    m.ctx.opt = &m.opt;
    batch_run(&m.ctx, &m.prog);
    program_free(&m.prog);
    return PROBE_EXIT_OK;
}
