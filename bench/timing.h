/* timing.h — what the C benchmarks here share: a monotonic clock and the
 * comparison that sorts times for their median. */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H

#include <time.h>

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* qsort's comparison of two doubles, ascending. */
static inline int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
