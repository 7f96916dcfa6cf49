/*
 * Per-run and per-scenario state. It lives on main()'s stack and travels by pointer; only what
 * callbacks must reach lives in the recorder (trace.c). The threads of a parallel block share it:
 * the slot tables are the scenario author's to keep race-free (one slot, one thread at a time);
 * what every op may touch (the superseded list) is behind `mu`.
 */
#ifndef NPUCONF_PROBE_CTX_H
#define NPUCONF_PROBE_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "impl.h"
#include "program.h"

#define PROBE_MAP_RANGES      8
#define PROBE_SUPERSEDED_MAPS 64

struct probe_options {
    const char *impl_path;
    double timeout_multiplier;
    uint64_t settle_ms;
    bool no_fork;
    const char *program_path;
};

struct probe_req_slot {
    ANpuManager_AllocRequest *req;
    bool live;
};

/* A still-mapped part of a mapping, relative to the address ANpuBuffer_map() returned. */
struct probe_map_range {
    size_t off;
    size_t len;
};

struct probe_map_slot {
    unsigned char *base;
    size_t len;      /* as mapped */
    int64_t buf_off; /* the buffer offset passed to ANpuBuffer_map() */
    size_t buf;      /* registry index of the mapped buffer */
    size_t nranges;  /* 0: nothing of it is mapped */
    struct probe_map_range ranges[PROBE_MAP_RANGES];
    /* The file object /proc/self/maps showed at `base` when it was made (scenarios with a map_gone or a
     * map_prot step only): what map_gone looks for once the scenario unmapped it, and what map_prot
     * compares the pages with once the first ones are unmapped. */
    bool identified;
    unsigned dev_major, dev_minor;
    unsigned long inode;
    unsigned long long base_off; /* the file offset mapped at `base` */
};

/* A mapping whose slot was reused by a later buf_map while parts of it were still mapped. */
struct probe_superseded_map {
    unsigned slot;
    struct probe_map_slot map;
};

struct probe_file_slot {
    bool live;
    bool handed; /* fd given to the implementation, which now owns it */
    int fd;      /* the descriptor f<N> hands over */
    int watch;   /* a private dup: same open file description, never handed over */
    dev_t dev;
    ino_t ino;
};

struct probe_ctx;

/* One probe thread of a parallel block: it runs steps [first, end) of the scenario. */
struct probe_thread {
    struct probe_ctx *ctx;
    pthread_t tid;
    unsigned k;
    size_t first, end;
    bool started;
};

enum probe_gate { GATE_CLOSED, GATE_OPEN, GATE_CANCELLED };

/* The open parallel block: its threads wait at the gate until par_release() opens it. */
struct probe_par {
    size_t n;
    struct probe_thread threads[PROBE_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum probe_gate gate;
};

struct probe_ctx {
    const struct probe_api *api;
    const struct probe_options *opt;
    const struct probe_scenario *sc;
    struct probe_req_slot req[PROBE_SLOTS];
    size_t buf[PROBE_SLOTS]; /* registry index + 1; 0 when unbound */
    struct probe_map_slot map[PROBE_SLOTS];
    /* Kept so teardown still unmaps them; beyond the table's size they stay mapped. */
    struct probe_superseded_map superseded[PROBE_SUPERSEDED_MAPS];
    size_t nsuperseded;
    struct probe_file_slot file[PROBE_SLOTS];
    pthread_mutex_t mu; /* guards `superseded` / `nsuperseded` */
    struct probe_par par;
    size_t next_step; /* teardown calls continue the step numbering */
};

#endif
