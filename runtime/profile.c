/* profile.c — where a step's time goes: a table of timed rows, printed on
 * request.
 *
 * Two callers keep one: the generated CPU code times each op of its
 * networks when DLRT_PROFILE=1 (a row per op, named in advance), and the
 * CUDA back end times each launch when DLRT_CUDA_PROFILE=1 (a row per kind
 * of launch, added as they come).  dlrt_profile_close prints the rows,
 * longest first, on stderr: one of the two places in libdlrt that print
 * (with threads.c's warning about OpenBLAS), and only when asked to.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlrt.h"

typedef struct Row {
    char *what;
    double seconds; /* in all */
    double least;   /* the shortest call */
    long calls;
} Row;

struct DlrtProfile {
    char *title; /* the environment variable that asked for it */
    Row *rows;
    int nrows, cap;
};

double dlrt_clock(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

DlrtProfile *dlrt_profile_open(const char *title, int nrows, const char *const *names) {
    const char *want = getenv(title);
    if (!want || strcmp(want, "1") != 0)
        return NULL;
    DlrtProfile *p = calloc(1, sizeof *p);
    if (!p || !(p->title = strdup(title))) {
        free(p);
        fprintf(stderr, "%s: out of memory; nothing is timed\n", title);
        return NULL;
    }
    for (int i = 0; i < nrows; i++)
        if (dlrt_profile_row(p, names[i]) != i) { /* names repeat, or out of memory */
            fprintf(stderr, "%s: cannot keep row '%s'; nothing is timed\n", title, names[i]);
            dlrt_profile_close(p); /* no row has a call: prints nothing */
            return NULL;
        }
    return p;
}

int dlrt_profile_row(DlrtProfile *p, const char *what) {
    for (int i = 0; i < p->nrows; i++)
        if (strcmp(p->rows[i].what, what) == 0)
            return i;
    if (p->nrows == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        Row *rows = realloc(p->rows, sizeof *rows * (size_t)cap);
        if (!rows)
            return -1;
        p->rows = rows, p->cap = cap;
    }
    char *copy = strdup(what);
    if (!copy)
        return -1;
    p->rows[p->nrows] = (Row){.what = copy, .least = INFINITY};
    return p->nrows++;
}

void dlrt_profile_add(DlrtProfile *p, int row, double seconds) {
    if (row < 0 || row >= p->nrows)
        return; /* a row that could not be kept: that call goes untimed */
    Row *r = &p->rows[row];
    r->seconds += seconds;
    r->least = seconds < r->least ? seconds : r->least;
    r->calls++;
}

double dlrt_profile_lap(DlrtProfile *p, int row, double since) {
    double now = dlrt_clock();
    dlrt_profile_add(p, row, now - since);
    return now;
}

static int longer_first(const void *a, const void *b) {
    double x = ((const Row *)a)->seconds, y = ((const Row *)b)->seconds;
    return (x < y) - (x > y);
}

void dlrt_profile_close(DlrtProfile *p) {
    if (!p)
        return;
    int called = 0;
    double total = 0;
    for (int i = 0; i < p->nrows; i++)
        if (p->rows[i].calls) {
            p->rows[called++] = p->rows[i];
            total += p->rows[i].seconds;
        } else
            free(p->rows[i].what);
    p->nrows = called;
    if (called) {
        qsort(p->rows, (size_t)called, sizeof *p->rows, longer_first);
        fprintf(stderr, "%s: %d rows, %.3f ms in all\n%10s %8s %6s %10s %10s  %s\n", p->title,
                called, 1e3 * total, "ms", "calls", "%", "us/call", "min us", "what");
        for (int i = 0; i < called; i++) {
            const Row *r = &p->rows[i];
            fprintf(stderr, "%10.3f %8ld %6.2f %10.1f %10.1f  %s\n", 1e3 * r->seconds, r->calls,
                    total > 0 ? 100 * r->seconds / total : 0.0,
                    1e6 * r->seconds / (double)r->calls, 1e6 * r->least, r->what);
        }
    }
    for (int i = 0; i < p->nrows; i++)
        free(p->rows[i].what);
    free(p->rows);
    free(p->title);
    free(p);
}
