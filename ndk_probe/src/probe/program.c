#include "program.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vocab.h"

#define PROGRAM_FORMAT_VERSION "2"

struct parser {
    unsigned line;
    char *err;
    size_t errlen;
};

static bool fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct parser *p, const char *fmt, ...) {
    int n = snprintf(p->err, p->errlen, "line %u: ", p->line);
    if (n < 0 || (size_t)n >= p->errlen) {
        return false;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (*s == '\0') {
        return false;
    }
    uint64_t v = 0;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_i64(const char *s, int64_t *out) {
    bool neg = *s == '-';
    uint64_t mag;
    if (!parse_u64(neg ? s + 1 : s, &mag)) {
        return false;
    }
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1) {
            return false;
        }
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX) {
            return false;
        }
        *out = (int64_t)mag;
    }
    return true;
}

static bool parse_i32(const char *s, int64_t *out) {
    return parse_i64(s, out) && *out >= INT32_MIN && *out <= INT32_MAX;
}

/* The letter each slot kind is written with; 0 for the kinds that are not slots. */
static const char SLOT_LETTERS[sizeof NPUCONF_ARG_KIND_NAMES / sizeof NPUCONF_ARG_KIND_NAMES[0]] = {
    [ARG_REQ] = 'r',     [ARG_REQS] = 'r', [ARG_BUF] = 'b',  [ARG_BUFS] = 'b',  [ARG_COOKIE] = 'c',
    [ARG_BINDSEL] = 'c', [ARG_MAP] = 'm',  [ARG_FILE] = 'f', [ARG_FDSEL] = 'f',
};

char program_slot_letter(enum npuconf_arg_kind kind) { return SLOT_LETTERS[kind]; }

bool program_parse_slot(const char *s, enum npuconf_arg_kind kind, unsigned *out) {
    uint64_t n;
    if (s[0] != SLOT_LETTERS[kind] || (s[1] == '0' && s[2] != '\0') || !parse_u64(s + 1, &n) || n >= PROBE_SLOTS) {
        return false;
    }
    *out = (unsigned)n;
    return true;
}

/* `NONE`, a `|`-joined subset of `names`, or a decimal int32. */
static bool parse_bits(char *s, const char *const *names, const int *values, size_t n, bool allow_none, int64_t *out) {
    if (allow_none && strcmp(s, "NONE") == 0) {
        *out = 0;
        return true;
    }
    if ((s[0] >= '0' && s[0] <= '9') || s[0] == '-') {
        return parse_i32(s, out);
    }
    int64_t v = 0;
    char *save = NULL;
    size_t len = strlen(s);
    if (len == 0 || s[0] == '|' || s[len - 1] == '|' || strstr(s, "||") != NULL) {
        return false;
    }
    char copy[64];
    if (len >= sizeof copy) {
        return false;
    }
    memcpy(copy, s, len + 1);
    for (char *tok = strtok_r(copy, "|", &save); tok != NULL; tok = strtok_r(NULL, "|", &save)) {
        size_t i = 0;
        while (i < n && strcmp(tok, names[i]) != 0) {
            i++;
        }
        if (i == n) {
            return false;
        }
        v |= values[i];
    }
    *out = v;
    return true;
}

static bool parse_list(struct parser *p, char *s, enum npuconf_arg_kind kind, struct probe_arg *arg) {
    arg->v.list.n = 0;
    arg->v.list.slots = NULL;
    if (strcmp(s, "-") == 0) {
        return true;
    }
    size_t n = 1;
    for (const char *c = s; *c != '\0'; c++) {
        n += *c == ',';
    }
    arg->v.list.slots = malloc(n);
    if (arg->v.list.slots == NULL) {
        return fail(p, "out of memory");
    }
    char *cur = s;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(cur, ',');
        if (comma != NULL) {
            *comma = '\0';
        }
        unsigned slot;
        if (!program_parse_slot(cur, kind, &slot)) {
            return fail(p, "expected a %c<N> slot (N < %d) in the list, found '%s'", SLOT_LETTERS[kind], PROBE_SLOTS,
                        cur);
        }
        arg->v.list.slots[i] = (unsigned char)slot;
        arg->v.list.n++;
        cur = comma != NULL ? comma + 1 : cur;
    }
    return true;
}

static bool printable_token(const char *s) {
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e) {
            return false;
        }
    }
    return true;
}

static bool parse_cookie(char *tok, struct probe_arg *arg) {
    if (strcmp(tok, "null") == 0) {
        arg->v.cookie.sel = COOKIE_NULL;
        return true;
    }
    if (program_parse_slot(tok, ARG_COOKIE, &arg->v.cookie.slot)) {
        arg->v.cookie.sel = COOKIE_SLOT;
        return true;
    }
    if (strncmp(tok, "raw:", 4) != 0) {
        return false;
    }
    arg->v.cookie.sel = COOKIE_RAW;
    const char *num = tok + 4;
    if (num[0] == '-') {
        int64_t v;
        if (!parse_i64(num, &v)) {
            return false;
        }
        /* Whether it fits a pointer is decided per target when the op runs, not here. */
        arg->v.cookie.raw_negative = true;
        arg->v.cookie.raw_value = v;
        arg->v.cookie.raw_fits = v >= (int64_t)INTPTR_MIN;
        arg->v.cookie.raw = arg->v.cookie.raw_fits ? (uintptr_t)(intptr_t)v : 0;
        return true;
    }
    uint64_t u;
    if (!parse_u64(num, &u)) {
        return false;
    }
    arg->v.cookie.raw_negative = false;
    arg->v.cookie.raw_unsigned = u;
    arg->v.cookie.raw_fits = u <= (uint64_t)UINTPTR_MAX;
    arg->v.cookie.raw = arg->v.cookie.raw_fits ? (uintptr_t)u : 0;
    return true;
}

static bool parse_arg(struct parser *p, const struct npuconf_op_arg *spec, char *tok, struct probe_arg *arg) {
    static const char *const prot_names[] = {"READ", "WRITE", "EXEC"};
    static const int prot_values[] = {PROT_READ, PROT_WRITE, PROT_EXEC};
    static const char *const flag_names[] = {"SHARED", "PRIVATE", "FIXED"};
    static const int flag_values[] = {MAP_SHARED, MAP_PRIVATE, MAP_FIXED};
    const char *kind = NPUCONF_ARG_KIND_NAMES[spec->kind];
    arg->kind = spec->kind;
    bool ok = false;
    const char *expected = "";
    char slot_form[8];
    switch (spec->kind) {
    case ARG_REQ:
    case ARG_BUF:
    case ARG_MAP:
    case ARG_FILE:
        ok = program_parse_slot(tok, spec->kind, &arg->v.slot);
        snprintf(slot_form, sizeof slot_form, "%c<N>", SLOT_LETTERS[spec->kind]);
        expected = slot_form;
        break;
    case ARG_COOKIE:
        ok = parse_cookie(tok, arg);
        expected = "c<N>, null or raw:<decimal>";
        break;
    case ARG_REQS:
    case ARG_BUFS:
        return parse_list(p, tok, spec->kind, arg);
    case ARG_I32:
        ok = parse_i32(tok, &arg->v.i64);
        expected = "a decimal int32";
        break;
    case ARG_I64:
        ok = parse_i64(tok, &arg->v.i64);
        expected = "a decimal int64";
        break;
    case ARG_U64:
        ok = parse_u64(tok, &arg->v.u64);
        expected = "a decimal uint64";
        break;
    case ARG_PROT:
        ok = parse_bits(tok, prot_names, prot_values, 3, true, &arg->v.i64);
        expected = "NONE, a |-joined subset of READ, WRITE, EXEC, or a decimal";
        break;
    case ARG_MAPFLAGS:
        ok = parse_bits(tok, flag_names, flag_values, 3, false, &arg->v.i64);
        expected = "a |-joined subset of SHARED, PRIVATE, FIXED, or a decimal";
        break;
    case ARG_BOOL:
        ok = strcmp(tok, "0") == 0 || strcmp(tok, "1") == 0;
        arg->v.flag = tok[0] == '1';
        expected = "0 or 1";
        break;
    case ARG_ERRNO: {
        int e = vocab_errno_by_name(tok);
        ok = e >= 0;
        arg->v.i64 = e;
        expected = "an errno name of the vocabulary";
        break;
    }
    case ARG_FDSEL:
        if (program_parse_slot(tok, ARG_FDSEL, &arg->v.fdsel.slot)) {
            arg->v.fdsel.is_file = true;
            ok = true;
        } else if (strncmp(tok, "fd:", 3) == 0) {
            int64_t fd = -1;
            ok = parse_i32(tok + 3, &fd);
            arg->v.fdsel.is_file = false;
            arg->v.fdsel.fd = (int)fd;
        }
        expected = "f<N> or fd:<decimal>";
        break;
    case ARG_BINDSEL:
        if (strncmp(tok, "cookie:", 7) == 0) {
            arg->v.bindsel.by_cookie = true;
            ok = program_parse_slot(tok + 7, ARG_BINDSEL, &arg->v.bindsel.slot);
        } else if (strncmp(tok, "nth:", 4) == 0) {
            arg->v.bindsel.by_cookie = false;
            ok = parse_u64(tok + 4, &arg->v.bindsel.nth);
        }
        expected = "cookie:c<N> or nth:<K>";
        break;
    case ARG_TEXT:
        ok = printable_token(tok);
        arg->v.text = tok;
        expected = "printable ASCII without spaces";
        break;
    }
    if (!ok) {
        return fail(p, "argument %s:%s: expected %s, found '%s'", spec->name, kind, expected, tok);
    }
    return true;
}

/* Splits a line into tokens in place; exactly one space between tokens. */
static bool tokenize(struct parser *p, char *line, char **toks, size_t max, size_t *n) {
    *n = 0;
    char *cur = line;
    for (;;) {
        char *sp = strchr(cur, ' ');
        if (sp != NULL) {
            *sp = '\0';
        }
        if (*cur == '\0') {
            return fail(p, "empty token: tokens are separated by exactly one space");
        }
        if (*n == max) {
            return fail(p, "too many tokens");
        }
        toks[(*n)++] = cur;
        if (sp == NULL) {
            return true;
        }
        cur = sp + 1;
    }
}

static bool valid_id(const char *s) {
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9'))) {
        return false;
    }
    for (; *s != '\0'; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
            return false;
        }
    }
    return true;
}

static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) {
        return true;
    }
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) {
        cap2 *= 2;
    }
    void *p = realloc(*arr, cap2 * elem);
    if (p == NULL) {
        return false;
    }
    *arr = p;
    *cap = cap2;
    return true;
}

static bool parse_op_line(struct parser *p, char **toks, size_t ntoks, struct probe_step *st) {
    memset(st, 0, sizeof *st); /* program_free() reads a half-parsed step too */
    st->thread = -1;
    int op = vocab_op_by_name(toks[0]);
    if (op < 0) {
        return fail(p, "unknown op '%s' (see npuconf-probe --list)", toks[0]);
    }
    const struct npuconf_op_info *info = &NPUCONF_OPS[op];
    st->op = (enum npuconf_op)op;
    st->line = p->line;
    if (ntoks - 1 != info->nargs) {
        return fail(p, "op %s takes %zu argument(s), found %zu", info->name, info->nargs, ntoks - 1);
    }
    for (size_t a = 0; a < info->nargs; a++) {
        if (!parse_arg(p, &info->args[a], toks[a + 1], &st->args[a])) {
            return false;
        }
    }
    if (st->op == OP_CB_ACTION) {
        struct probe_cb_action act;
        if (!program_cb_action(st->args[0].v.text, st->args[1].v.text, &act)) {
            return fail(p,
                        "cb_action: expected kind alloc|load|preempt and action none|free_buf|set_priority_<n>|"
                        "map_unmap|wait_return|new_request|alloc_r<N>|sleep_<ms>|hold_<ms>, found '%s %s'",
                        st->args[0].v.text, st->args[1].v.text);
        }
        if ((act.act == CB_ACT_NONE) != (st->args[2].v.u64 == 0)) {
            return fail(p, "cb_action: count must be 0 for action none and at least 1 otherwise, found %llu",
                        (unsigned long long)st->args[2].v.u64);
        }
    }
    if (st->op == OP_PAR_BEGIN) {
        uint64_t n = st->args[0].v.u64;
        if (n < PROBE_MIN_THREADS || n > PROBE_MAX_THREADS) {
            return fail(p, "par_begin: expected %d to %d threads, found %llu", PROBE_MIN_THREADS, PROBE_MAX_THREADS,
                        (unsigned long long)n);
        }
    }
    return true;
}

/* The open parallel block of a scenario while its `@k` lines are read. */
struct par_block {
    bool open;
    uint64_t n;
    int last; /* thread of the previous `@k` line, -1 before the first */
};

/* `@<k>`: k decimal, canonical, below the block's thread count. */
static bool parse_thread_prefix(const char *tok, const struct par_block *blk, int *k) {
    uint64_t v;
    if (tok[0] != '@' || (tok[1] == '0' && tok[2] != '\0') || !parse_u64(tok + 1, &v) || v >= blk->n) {
        return false;
    }
    *k = (int)v;
    return true;
}

/* Checks where a step may stand relative to parallel blocks, and updates the block. */
static bool place_step(struct parser *p, struct par_block *blk, struct probe_step *st) {
    bool par_op = st->op == OP_PAR_BEGIN || st->op == OP_PAR_END;
    if (st->thread >= 0) {
        if (par_op) {
            return fail(p, "%s inside a parallel block: blocks do not nest", NPUCONF_OPS[st->op].name);
        }
        if (st->thread < blk->last || st->thread > blk->last + 1) {
            return fail(p,
                        "@%d after @%d: the steps of thread k follow those of thread k-1 (each thread has at "
                        "least one step)",
                        st->thread, blk->last);
        }
        blk->last = st->thread;
        return true;
    }
    if (blk->open) {
        if (st->op != OP_PAR_END) {
            return fail(p, "inside a parallel block every step is prefixed @<k>, or the block ends with par_end");
        }
        if ((uint64_t)(blk->last + 1) != blk->n) {
            return fail(p, "par_end: the block has %llu threads but steps for %d", (unsigned long long)blk->n,
                        blk->last + 1);
        }
        blk->open = false;
        return true;
    }
    if (st->op == OP_PAR_END) {
        return fail(p, "par_end without par_begin");
    }
    if (st->op == OP_PAR_BEGIN) {
        *blk = (struct par_block){true, st->args[0].v.u64, -1};
    }
    return true;
}

bool program_parse(char *text, size_t len, struct probe_program *prog, char *err, size_t errlen) {
    struct parser p = {0, err, errlen};
    memset(prog, 0, sizeof *prog);
    prog->text = text;
    size_t cap_sc = 0, cap_st = 0;
    struct probe_scenario *sc = NULL; /* the open scenario */
    char *toks[NPUCONF_MAX_OP_ARGS + 3];
    struct par_block blk = {false, 0, -1};
    size_t ntoks;
    char *cur = text;
    char *end = text + len;
    bool header = false;
    while (cur < end) {
        char *nl = memchr(cur, '\n', (size_t)(end - cur));
        char *line_end = nl != NULL ? nl : end;
        p.line++;
        char *line = cur;
        if (memchr(line, '\0', (size_t)(line_end - line)) != NULL) {
            return fail(&p, "NUL byte");
        }
        *line_end = '\0';
        cur = nl != NULL ? nl + 1 : end;
        if (*line == '\0') {
            return fail(&p, "empty line");
        }
        if (!tokenize(&p, line, toks, sizeof toks / sizeof toks[0], &ntoks)) {
            return false;
        }
        if (!header) {
            if (ntoks != 3 || strcmp(toks[0], "npuconf-program") != 0) {
                return fail(&p, "expected 'npuconf-program %s <vocabulary hash>'", PROGRAM_FORMAT_VERSION);
            }
            if (strcmp(toks[1], PROGRAM_FORMAT_VERSION) != 0) {
                return fail(&p, "program format %s, this probe reads format %s", toks[1], PROGRAM_FORMAT_VERSION);
            }
            if (strcmp(toks[2], NPUCONF_VOCAB_HASH) != 0) {
                return fail(&p, "program vocabulary hash %s differs from the probe's %s: rebuild the probe", toks[2],
                            NPUCONF_VOCAB_HASH);
            }
            header = true;
            continue;
        }
        if (sc == NULL) {
            if (strcmp(toks[0], "scenario") != 0 || ntoks != 3) {
                return fail(&p, "expected 'scenario <id> <timeout_ms>'");
            }
            if (!valid_id(toks[1])) {
                return fail(&p, "scenario id '%s' is not [a-z0-9][a-z0-9_.-]*", toks[1]);
            }
            uint64_t timeout;
            if (!parse_u64(toks[2], &timeout) || timeout == 0) {
                return fail(&p, "timeout_ms: expected a positive decimal, found '%s'", toks[2]);
            }
            if (!grow((void **)&prog->scenarios, &cap_sc, prog->nscenarios + 1, sizeof *prog->scenarios)) {
                return fail(&p, "out of memory");
            }
            sc = &prog->scenarios[prog->nscenarios++];
            memset(sc, 0, sizeof *sc);
            sc->id = toks[1];
            sc->timeout_ms = timeout;
            sc->line = p.line;
            cap_st = 0;
            blk = (struct par_block){false, 0, -1};
            continue;
        }
        if (strcmp(toks[0], "end") == 0) {
            if (ntoks != 1) {
                return fail(&p, "'end' takes no argument");
            }
            if (blk.open) {
                return fail(&p, "scenario %s ends inside a parallel block: missing par_end", sc->id);
            }
            sc = NULL;
            continue;
        }
        if (strcmp(toks[0], "scenario") == 0) {
            return fail(&p, "scenario %s is not closed by 'end'", sc->id);
        }
        if (!grow((void **)&sc->steps, &cap_st, sc->nsteps + 1, sizeof *sc->steps)) {
            return fail(&p, "out of memory");
        }
        struct probe_step *st = &sc->steps[sc->nsteps++];
        memset(st, 0, sizeof *st); /* program_free() reads a step that failed to parse too */
        int thread = -1;
        char **op_toks = toks;
        if (toks[0][0] == '@') {
            if (!blk.open) {
                return fail(&p, "'%s' outside a parallel block (par_begin N ... par_end)", toks[0]);
            }
            if (!parse_thread_prefix(toks[0], &blk, &thread)) {
                return fail(&p, "expected @<k> with k < %llu, found '%s'", (unsigned long long)blk.n, toks[0]);
            }
            if (ntoks < 2) {
                return fail(&p, "'%s' without an op", toks[0]);
            }
            op_toks++;
            ntoks--;
        }
        if (!parse_op_line(&p, op_toks, ntoks, st)) {
            return false;
        }
        st->thread = thread;
        if (!place_step(&p, &blk, st)) {
            return false;
        }
    }
    if (!header) {
        p.line = 1;
        return fail(&p, "empty program: expected 'npuconf-program %s <vocabulary hash>'", PROGRAM_FORMAT_VERSION);
    }
    if (sc != NULL) {
        return fail(&p, "end of program inside scenario %s: missing 'end'", sc->id);
    }
    return true;
}

void program_free(struct probe_program *prog) {
    for (size_t s = 0; s < prog->nscenarios; s++) {
        struct probe_scenario *sc = &prog->scenarios[s];
        for (size_t i = 0; i < sc->nsteps; i++) {
            const struct npuconf_op_info *info = &NPUCONF_OPS[sc->steps[i].op];
            for (size_t a = 0; a < info->nargs; a++) {
                if (info->args[a].kind == ARG_REQS || info->args[a].kind == ARG_BUFS) {
                    free(sc->steps[i].args[a].v.list.slots);
                }
            }
        }
        free(sc->steps);
    }
    free(prog->scenarios);
    free(prog->text);
    memset(prog, 0, sizeof *prog);
}

#define CB_KIND_NAME(id, name) [CB_KIND_##id] = name,
static const char *const CB_KIND_NAMES[CB_KIND__COUNT] = {NPUCONF_CALLBACK_KINDS(CB_KIND_NAME)};
#undef CB_KIND_NAME

const char *program_cb_kind_name(enum probe_cb_kind kind) { return CB_KIND_NAMES[kind]; }

/* The value after a cb_action word that takes one (nothing after the others). */
static bool cb_action_value(const char *value, struct probe_cb_action *out) {
    int64_t priority;
    switch (out->act) {
    case CB_ACT_SET_PRIORITY:
        if (!parse_i32(value, &priority)) {
            return false;
        }
        out->priority = (int32_t)priority;
        return true;
    case CB_ACT_ALLOC:
        return program_parse_slot(value, ARG_REQ, &out->req_slot);
    case CB_ACT_SLEEP:
        return parse_u64(value, &out->sleep_ms) && out->sleep_ms >= NPUCONF_CB_SLEEP_MIN &&
               out->sleep_ms <= NPUCONF_CB_SLEEP_MAX;
    case CB_ACT_HOLD:
        return parse_u64(value, &out->sleep_ms) && out->sleep_ms >= NPUCONF_CB_HOLD_MIN &&
               out->sleep_ms <= NPUCONF_CB_HOLD_MAX;
    case CB_ACT_NONE:
    case CB_ACT_FREE_BUF:
    case CB_ACT_MAP_UNMAP:
    case CB_ACT_WAIT_RETURN:
    case CB_ACT_NEW_REQUEST:
        return true;
    }
    return false;
}

bool program_cb_action(const char *kind, const char *action, struct probe_cb_action *out) {
    memset(out, 0, sizeof *out);
    int k = 0;
    while (k < CB_KIND__COUNT && strcmp(kind, CB_KIND_NAMES[k]) != 0) {
        k++;
    }
    if (k == CB_KIND__COUNT) {
        return false;
    }
    out->kind = (enum probe_cb_kind)k;
    static const struct {
        const char *word;
        enum probe_cb_act act;
    } words[] = {
#define CB_WORD(id, word) {word, CB_ACT_##id},
        NPUCONF_CB_ACTIONS(CB_WORD)
#undef CB_WORD
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].word);
        bool takes_value = words[i].word[n - 1] == '_';
        if (takes_value ? strncmp(action, words[i].word, n) == 0 : strcmp(action, words[i].word) == 0) {
            out->act = words[i].act;
            return cb_action_value(action + n, out);
        }
    }
    return false;
}

void program_raw_cookie_text(const struct probe_arg *arg, char out[32]) {
    if (arg->v.cookie.raw_negative) {
        snprintf(out, 32, "raw:%" PRId64, arg->v.cookie.raw_value);
    } else {
        snprintf(out, 32, "raw:%" PRIu64, arg->v.cookie.raw_unsigned);
    }
}
