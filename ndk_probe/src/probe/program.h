/*
 * Probe programs (docs/formats.md §3), parsed whole before anything runs so that a bad program
 * is reported once, with its line number, and never half-executed.
 */
#ifndef NPUCONF_PROBE_PROGRAM_H
#define NPUCONF_PROBE_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocabulary.h"

#define PROBE_SLOTS       256
#define PROBE_MAX_THREADS 16 /* probe threads of one parallel block (par_begin N: 2 <= N <= 16) */
#define PROBE_MIN_THREADS 2

enum cookie_sel { COOKIE_SLOT, COOKIE_NULL, COOKIE_RAW };

struct probe_arg {
    enum npuconf_arg_kind kind;
    union {
        unsigned slot;    /* req, buf, map, file */
        int64_t i64;      /* i32, i64, prot, mapflags, errno (the number) */
        uint64_t u64;     /* u64 */
        bool flag;        /* bool */
        const char *text; /* text (points into the program's text buffer) */
        struct {
            size_t n;
            unsigned char *slots;
        } list; /* reqs, bufs */
        struct {
            enum cookie_sel sel;
            unsigned slot;
            uintptr_t raw;     /* the pointer bits handed to the API (when raw_fits) */
            int64_t raw_value; /* as written, for the trace */
            bool raw_negative;
            uint64_t raw_unsigned;
            bool raw_fits; /* whether the value fits a pointer on this target */
        } cookie;
        struct {
            bool is_file;
            unsigned slot;
            int fd;
        } fdsel;
        struct {
            bool by_cookie;
            unsigned slot;
            uint64_t nth;
        } bindsel;
    } v;
};

struct probe_step {
    enum npuconf_op op;
    unsigned line;
    int thread; /* -1: the scenario's main thread; k: probe thread t<k> of the enclosing parallel block */
    struct probe_arg args[NPUCONF_MAX_OP_ARGS > 0 ? NPUCONF_MAX_OP_ARGS : 1];
};

struct probe_scenario {
    const char *id;
    uint64_t timeout_ms;
    unsigned line;
    size_t nsteps;
    struct probe_step *steps;
};

struct probe_program {
    char *text; /* owns the bytes every `const char *` above points into */
    size_t nscenarios;
    struct probe_scenario *scenarios;
};

/*
 * Parses `len` bytes of `text` (which must have room for a terminating NUL at text[len]; `prog`
 * takes it over even on failure). On failure returns false and writes one line into `err` naming
 * the line number.
 */
bool program_parse(char *text, size_t len, struct probe_program *prog, char *err, size_t errlen);
void program_free(struct probe_program *prog);
/* What a cb_action step asks callbacks to do (its `kind` and `action` text arguments). */
#define PROBE_CB_KIND(id, name) CB_KIND_##id,
enum probe_cb_kind { NPUCONF_CALLBACK_KINDS(PROBE_CB_KIND) CB_KIND__COUNT };
#undef PROBE_CB_KIND
/* CB_ACT_WAIT_RETURN: the callback waits, bounded, until no allocAsync/loadAsync is in flight (issue 11 e).
 * CB_ACT_SLEEP: the callback sleeps sleep_<ms> (x the timeout multiplier) before it returns.
 * CB_ACT_HOLD: the callback waits until the scenario's steps are done (teardown begins), at most hold_<ms>
 * (x the timeout multiplier): a callback that still runs while the program goes on, ended by the program.
 * CB_ACT_NEW_REQUEST: the callback creates a request, sets its cookie (NULL, no deleter) and frees it. */
#define PROBE_CB_ACT(id, word) CB_ACT_##id,
enum probe_cb_act { NPUCONF_CB_ACTIONS(PROBE_CB_ACT) }; /* from vocabulary.yaml; CB_ACT_NONE first (0) */
#undef PROBE_CB_ACT

struct probe_cb_action {
    enum probe_cb_kind kind;
    enum probe_cb_act act;
    int32_t priority;  /* set_priority_<n> */
    unsigned req_slot; /* alloc_r<N> */
    uint64_t wait_ns;  /* wait_return: how long the callback waits (set when armed, timeout multiplier applied) */
    uint64_t sleep_ms; /* sleep_<ms> or hold_<ms>; wait_ns is set from it when armed */
};

#define WAIT_RETURN_MS 400 /* wait_return's wait before the multiplier */

/* Parses cb_action's kind and action; false when either is not one the probe knows. */
bool program_cb_action(const char *kind, const char *action, struct probe_cb_action *out);
/* "alloc", "load" or "preempt". */
const char *program_cb_kind_name(enum probe_cb_kind kind);

/* The letter a slot of `kind` is written with (r<N>, b<N>, c<N>, m<N>, f<N>): a list kind takes its
 * elements', fdsel a file's, bindsel a cookie's; 0 for the kinds that are not slots. */
char program_slot_letter(enum npuconf_arg_kind kind);
/* A slot of `kind`, <letter><N> with N < PROBE_SLOTS written canonically (no leading zeros). */
bool program_parse_slot(const char *s, enum npuconf_arg_kind kind, unsigned *out);

/* "raw:<decimal>" as the scenario wrote it. */
void program_raw_cookie_text(const struct probe_arg *arg, char out[32]);

#endif
