#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jb_init(struct jbuf *jb) {
    jb->cap = 256;
    jb->len = 0;
    jb->p = malloc(jb->cap);
    if (jb->p == NULL) {
        /* The probe cannot report anything without memory; dying loudly beats a torn trace. */
        abort();
    }
    jb->p[0] = '\0';
}

void jb_free(struct jbuf *jb) {
    free(jb->p);
    jb->p = NULL;
    jb->len = jb->cap = 0;
}

void jb_rawn(struct jbuf *jb, const char *s, size_t n) {
    if (jb->len + n + 1 > jb->cap) {
        size_t cap = jb->cap;
        while (jb->len + n + 1 > cap) {
            cap *= 2;
        }
        char *p = realloc(jb->p, cap);
        if (p == NULL) {
            abort();
        }
        jb->p = p;
        jb->cap = cap;
    }
    memcpy(jb->p + jb->len, s, n);
    jb->len += n;
    jb->p[jb->len] = '\0';
}

void jb_raw(struct jbuf *jb, const char *s) { jb_rawn(jb, s, strlen(s)); }

void jb_key(struct jbuf *jb, const char *key) {
    if (jb->len > 0) {
        char last = jb->p[jb->len - 1];
        if (last != '{' && last != '[' && last != ':') {
            jb_raw(jb, ",");
        }
    }
    if (key != NULL) {
        jb_raw(jb, "\"");
        jb_raw(jb, key);
        jb_raw(jb, "\":");
    }
}

static void jb_escaped(struct jbuf *jb, const char *s) {
    static const char hex[] = "0123456789abcdef";
    jb_raw(jb, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            char esc[2] = {'\\', (char)*c};
            jb_rawn(jb, esc, 2);
        } else if (*c < 0x20 || *c == 0x7f) {
            char esc[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 0xf]};
            jb_rawn(jb, esc, 6);
        } else {
            jb_rawn(jb, (const char *)c, 1);
        }
    }
    jb_raw(jb, "\"");
}

void jb_str(struct jbuf *jb, const char *key, const char *value) {
    jb_key(jb, key);
    if (value == NULL) {
        jb_raw(jb, "null");
    } else {
        jb_escaped(jb, value);
    }
}

void jb_i64(struct jbuf *jb, const char *key, int64_t value) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" PRId64, value);
    jb_key(jb, key);
    jb_raw(jb, tmp);
}

void jb_u64(struct jbuf *jb, const char *key, uint64_t value) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" PRIu64, value);
    jb_key(jb, key);
    jb_raw(jb, tmp);
}

void jb_bool(struct jbuf *jb, const char *key, bool value) {
    jb_key(jb, key);
    jb_raw(jb, value ? "true" : "false");
}

void jb_null(struct jbuf *jb, const char *key) {
    jb_key(jb, key);
    jb_raw(jb, "null");
}

void jb_open(struct jbuf *jb, const char *key, char bracket) {
    jb_key(jb, key);
    jb_rawn(jb, &bracket, 1);
}

void jb_close(struct jbuf *jb, char bracket) { jb_rawn(jb, &bracket, 1); }
