/* The device profile: which (device, type) pairs exist, the capacity, the allocation policy, the
 * personality, a callback delay and when a late onPreempt comes, read once from
 * $NPUCONF_VNPU_PROFILE. A profile that does not parse is an error, never a silent fallback to
 * defaults: a kit run against a device other than the one described would judge the wrong thing. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnpu_internal.h"

#define VNPU_PROFILE_ENV "NPUCONF_VNPU_PROFILE"

static void set_defaults(struct vnpu_profile *p) {
    static const struct vnpu_pair defaults[] = {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 2}};
    memset(p, 0, sizeof *p);
    memcpy(p->pairs, defaults, sizeof defaults);
    p->npairs = sizeof defaults / sizeof defaults[0];
    p->capacity = 268435456u;
    p->policy = VNPU_POLICY_BUDGET;
    p->personality = VNPU_PUBLISHED;
    p->callback_delay_us = 0;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Decimal, no sign, no suffix; the whole string must be consumed. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *out) {
    if (!isdigit((unsigned char)*s))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_pairs(char *s, struct vnpu_profile *p) {
    p->npairs = 0;
    if (*s == '\0')
        return true; /* a device with no supported pair */
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        char *colon = strchr(tok, ':');
        if (colon == NULL || p->npairs == VNPU_MAX_PAIRS)
            return false;
        *colon = '\0';
        uint64_t dev, type;
        if (!parse_u64(trim(tok), INT32_MAX, &dev) || !parse_u64(trim(colon + 1), 4, &type) || type < 1)
            return false;
        p->pairs[p->npairs].device = (int32_t)dev;
        p->pairs[p->npairs].type = (int8_t)type;
        p->npairs++;
    }
    return true;
}

static const char *apply_key(struct vnpu_profile *p, const char *key, char *value) {
    if (strcmp(key, "pairs") == 0)
        return parse_pairs(value, p) ? NULL : "expected <device>:<type 1..4>[,...]";
    if (strcmp(key, "capacity") == 0)
        return parse_u64(value, UINT64_MAX, &p->capacity) ? NULL : "expected a decimal byte count";
    if (strcmp(key, "callback_delay_us") == 0)
        return parse_u64(value, UINT32_MAX, &p->callback_delay_us) ? NULL : "expected a decimal microsecond count";
    if (strcmp(key, "preempt_late_quiet_ms") == 0)
        return parse_u64(value, UINT32_MAX, &p->preempt_late_quiet_ms) ? NULL : "expected a decimal millisecond count";
    if (strcmp(key, "due_when_waiting") == 0)
        return parse_u64(value, 1, &p->due_when_waiting) ? NULL : "expected 0 or 1";
    if (strcmp(key, "policy") == 0) {
        static const struct {
            const char *name;
            enum vnpu_policy_kind kind;
        } policies[] = {
#define POLICY(id, name) {name, VNPU_POLICY_##id},
            NPUCONF_VNPU_POLICIES(POLICY)
#undef POLICY
        };
        for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
            if (strcmp(value, policies[i].name) == 0) {
                p->policy = policies[i].kind;
                return NULL;
            }
        return "expected " NPUCONF_VNPU_POLICIES_CHOICES;
    }
    if (strcmp(key, "personality") == 0) {
        static const struct {
            const char *name;
            enum vnpu_personality kind;
        } personalities[] = {
#define PERSONALITY(id, name) {name, VNPU_##id},
            NPUCONF_VNPU_PERSONALITIES(PERSONALITY)
#undef PERSONALITY
        };
        for (size_t i = 0; i < sizeof personalities / sizeof personalities[0]; i++)
            if (strcmp(value, personalities[i].name) == 0) {
                p->personality = personalities[i].kind;
                return NULL;
            }
        return "expected " NPUCONF_VNPU_PERSONALITIES_CHOICES;
    }
    return "unknown key";
}

int vnpu_profile_load(struct vnpu_profile *out, char *err, size_t errlen) {
    static const char *const keys[] = {
        "pairs", "capacity", "policy", "personality", "callback_delay_us", "preempt_late_quiet_ms", "due_when_waiting"};
    bool seen[sizeof keys / sizeof keys[0]] = {false};
    set_defaults(out);
    const char *path = getenv(VNPU_PROFILE_ENV);
    if (path == NULL || *path == '\0')
        return 0;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open (%s=%s): %s", path, VNPU_PROFILE_ENV, path, strerror(errno));
        return -1;
    }
    char line[4096];
    int rc = 0;
    for (unsigned lineno = 1; rc == 0 && fgets(line, sizeof line, f) != NULL; lineno++) {
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            snprintf(err, errlen, "%s:%u: %s: expected key=value", path, lineno, s);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        char found[64];
        snprintf(found, sizeof found, "%s", value); /* apply_key may cut value up */
        const char *problem = NULL;
        size_t k = 0;
        while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k], key) != 0)
            k++;
        if (k < sizeof keys / sizeof keys[0] && seen[k])
            problem = "duplicate key";
        else
            problem = apply_key(out, key, value);
        if (problem != NULL) {
            snprintf(err, errlen, "%s:%u: %s: %s, found '%s'", path, lineno, key, problem, found);
            rc = -1;
        } else {
            seen[k] = true;
        }
    }
    fclose(f);
    return rc;
}

bool vnpu_profile_has_pair(const struct vnpu_profile *p, int32_t device, int32_t type) {
    for (size_t i = 0; i < p->npairs; i++)
        if (p->pairs[i].device == device && p->pairs[i].type == type)
            return true;
    return false;
}
