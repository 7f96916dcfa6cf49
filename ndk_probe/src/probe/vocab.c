#include "vocab.h"

#include <signal.h>
#include <string.h>

int vocab_op_by_name(const char *name) {
    for (int i = 0; i < OP__COUNT; i++) {
        if (strcmp(NPUCONF_OPS[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

const char *vocab_errno_name(int number, char buf[16]) {
    for (size_t i = 0; i < NPUCONF_ERRNO_COUNT; i++) {
        if (NPUCONF_ERRNOS[i].number == number) {
            return NPUCONF_ERRNOS[i].name;
        }
    }
    snprintf(buf, 16, "E#%d", number);
    return buf;
}

int vocab_errno_by_name(const char *name) {
    for (size_t i = 0; i < NPUCONF_ERRNO_COUNT; i++) {
        if (strcmp(NPUCONF_ERRNOS[i].name, name) == 0) {
            return NPUCONF_ERRNOS[i].number;
        }
    }
    return -1;
}

const char *vocab_signal_name(int sig, char buf[16]) {
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
        {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
        {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
        {SIGSYS, "SIGSYS"},   {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i].sig == sig) {
            return names[i].name;
        }
    }
    snprintf(buf, 16, "SIG#%d", sig);
    return buf;
}

void vocab_print_list(FILE *out) {
    fprintf(out, "vocabulary %d %s\n", NPUCONF_VOCAB_VERSION, NPUCONF_VOCAB_HASH);
    for (int i = 0; i < OP__COUNT; i++) {
        const struct npuconf_op_info *op = &NPUCONF_OPS[i];
        fprintf(out, "op %s %s", op->name, op->api != NULL ? op->api : "-");
        for (size_t a = 0; a < op->nargs; a++) {
            fprintf(out, " %s:%s", op->args[a].name, NPUCONF_ARG_KIND_NAMES[op->args[a].kind]);
        }
        fputc('\n', out);
    }
}
