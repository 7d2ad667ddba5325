/* ab_generated: two builds of one network's generated code timed in one
 * process, step by step in alternation, so that the machine's noise (other
 * tenants, frequency) falls on both alike.  bench/ab_generated.sh builds it
 * and says how to use it.
 *
 *   ab_generated BATCH PAIRS THREADS infer|train
 *
 * A_ and B_ name the two builds' functions (ab_generated.sh renames them
 * with objcopy); IN and OUT are the elements of a sample's input and output.
 * Both networks start from the same seed, so the first step also checks
 * that the builds compute the same outputs (their largest relative
 * difference is printed).  Training steps use a learning rate of 0, so
 * every step of both runs on the same weights.  It prints each build's
 * median and minimum step time and the median of the PAIRS ratios B/A
 * (below 1: B is faster); which build goes first alternates by pair.
 * Inference runs frozen (NAME_freeze, as the program's `bench --mode
 * infer` does) in a build that has the function; the symbols are weak, so
 * code from before it still links, and runs unfrozen. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in ISO C mode */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"
#include "timing.h"

typedef struct Net Net;
DlrtStatus A_create(Net **net, int64_t max_batch, uint64_t seed, DlrtError *err);
DlrtStatus B_create(Net **net, int64_t max_batch, uint64_t seed, DlrtError *err);
DlrtStatus A_forward(Net *net, int64_t n, const float *x, float *y, DlrtError *err);
DlrtStatus B_forward(Net *net, int64_t n, const float *x, float *y, DlrtError *err);
DlrtStatus A_freeze(Net *net, DlrtError *err) __attribute__((weak));
DlrtStatus B_freeze(Net *net, DlrtError *err) __attribute__((weak));
DlrtStatus A_train_step(Net *net, int64_t n, const float *x, const int32_t *labels, float lr,
                        float *loss, DlrtError *err);
DlrtStatus B_train_step(Net *net, int64_t n, const float *x, const int32_t *labels, float lr,
                        float *loss, DlrtError *err);

typedef struct Build {
    Net *net;
    DlrtStatus (*forward)(Net *, int64_t, const float *, float *, DlrtError *);
    DlrtStatus (*train_step)(Net *, int64_t, const float *, const int32_t *, float, float *,
                             DlrtError *);
} Build;

/* One step of build b, in seconds; exits on an error. */
static double step(const Build *b, int64_t n, bool train, const float *x, const int32_t *labels,
                   float *y) {
    DlrtError err;
    float loss;
    double t0 = now();
    DlrtStatus s = train ? b->train_step(b->net, n, x, labels, 0, &loss, &err)
                         : b->forward(b->net, n, x, y, &err);
    double t = now() - t0;
    if (s != DLRT_OK) {
        fprintf(stderr, "ab_generated: %s\n", err.message);
        exit(1);
    }
    return t;
}

static void *alloc(size_t bytes) {
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "ab_generated: out of memory\n");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1 || atoi(argv[3]) < 1 ||
        (strcmp(argv[4], "infer") != 0 && strcmp(argv[4], "train") != 0)) {
        fprintf(stderr, "usage: ab_generated BATCH PAIRS THREADS infer|train\n");
        return 2;
    }
    int64_t n = atoi(argv[1]);
    int pairs = atoi(argv[2]);
    bool train = strcmp(argv[4], "train") == 0;
    dlrt_set_threads(atoi(argv[3]));
    Build a = {NULL, A_forward, A_train_step}, b = {NULL, B_forward, B_train_step};
    DlrtError err;
    if (A_create(&a.net, n, 1, &err) != DLRT_OK || B_create(&b.net, n, 1, &err) != DLRT_OK) {
        fprintf(stderr, "ab_generated: %s\n", err.message);
        return 1;
    }
    if (!train && ((A_freeze && A_freeze(a.net, &err) != DLRT_OK) ||
                   (B_freeze && B_freeze(b.net, &err) != DLRT_OK))) {
        fprintf(stderr, "ab_generated: %s\n", err.message);
        return 1;
    }
    printf("A %s, B %s\n", train ? "trains" : A_freeze ? "frozen" : "not frozen",
           train ? "trains" : B_freeze ? "frozen" : "not frozen");
    float *x = alloc(sizeof *x * (size_t)(n * IN));
    float *ya = alloc(sizeof *ya * (size_t)(n * OUT)), *yb = alloc(sizeof *yb * (size_t)(n * OUT));
    int32_t *labels = alloc(sizeof *labels * (size_t)n);
    for (int64_t i = 0; i < n * IN; i++)
        x[i] = rand() / (float)RAND_MAX;
    for (int64_t i = 0; i < n; i++)
        labels[i] = (int32_t)(i % OUT);
    step(&a, n, false, x, labels, ya);
    step(&b, n, false, x, labels, yb);
    double diff = 0;
    for (int64_t i = 0; i < n * OUT; i++)
        diff = fmax(diff, fabs(ya[i] - yb[i]) / (fabs(ya[i]) + 1e-3));
    printf("largest relative difference of the outputs: %.2g\n", diff);
    double *ta = alloc(sizeof *ta * (size_t)pairs), *tb = alloc(sizeof *tb * (size_t)pairs);
    double *ratio = alloc(sizeof *ratio * (size_t)pairs);
    for (int i = 0; i < pairs; i++) {
        if (i % 2) {
            tb[i] = step(&b, n, train, x, labels, yb);
            ta[i] = step(&a, n, train, x, labels, ya);
        } else {
            ta[i] = step(&a, n, train, x, labels, ya);
            tb[i] = step(&b, n, train, x, labels, yb);
        }
        ratio[i] = tb[i] / ta[i];
    }
    qsort(ta, (size_t)pairs, sizeof *ta, by_value);
    qsort(tb, (size_t)pairs, sizeof *tb, by_value);
    qsort(ratio, (size_t)pairs, sizeof *ratio, by_value);
    printf("A: median %.3f ms, min %.3f | B: median %.3f ms, min %.3f | B/A: median %.3f\n",
           ta[pairs / 2] * 1e3, ta[0] * 1e3, tb[pairs / 2] * 1e3, tb[0] * 1e3,
           ratio[pairs / 2]);
    return 0;
}
