/*
 * A growable buffer for building one JSON line. Events are built field by field and handed to
 * the trace writer whole, so that every line reaches stdout in a single write(2).
 */
#ifndef NPUCONF_PROBE_JSON_H
#define NPUCONF_PROBE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jbuf {
    char *p;
    size_t len;
    size_t cap;
};

void jb_init(struct jbuf *jb);
void jb_free(struct jbuf *jb);
void jb_raw(struct jbuf *jb, const char *s);
void jb_rawn(struct jbuf *jb, const char *s, size_t n);
/* A separator when needed, then "key": (a no-op key when key is NULL, for array elements). */
void jb_key(struct jbuf *jb, const char *key);
void jb_str(struct jbuf *jb, const char *key, const char *value); /* NULL value: null */
void jb_i64(struct jbuf *jb, const char *key, int64_t value);
void jb_u64(struct jbuf *jb, const char *key, uint64_t value);
void jb_bool(struct jbuf *jb, const char *key, bool value);
void jb_null(struct jbuf *jb, const char *key);
void jb_open(struct jbuf *jb, const char *key, char bracket); /* '{' or '[' */
void jb_close(struct jbuf *jb, char bracket);

#endif
