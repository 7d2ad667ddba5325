/* conv_cache: the speed of one of dlc's forward convolutions at batch 1
 * (the runtime's dlrt_conv2d_forward_folded, as GoogLeNet's inference calls
 * it) with its operands in the caches, in L3 only, and in memory only.
 *
 *   cc -O2 -fopenmp -I runtime bench/conv_cache.c build/libdlrt.a \
 *       -lopenblas -lz -lm -o conv_cache
 *   ./conv_cache [REPEATS [THREADS]]
 *
 * For each of GoogLeNet's layer shapes below it runs the convolution
 * REPEATS times (101 by default) on THREADS workers (2), each time after
 * touching nothing ("warm"), after reading 4 MB of other memory (the
 * private L2 caches flushed: "from L3"), or after reading 96 MB ("from
 * memory"), and prints the median time and GFLOP/s of each.  It answers
 * where a layer's time goes inside the network, where the layer before it
 * has just pushed its weights out of L2 and the network's 26 MB of weights
 * and its im2col buffers compete for L3: bench/README.md has the numbers. */
#include <stdio.h>
#include <stdlib.h>

#include "dlrt.h"
#include "timing.h"

static float *random_floats(int64_t count, float lo) {
    float *v = malloc((size_t)count * sizeof *v);
    if (!v) {
        fprintf(stderr, "conv_cache: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < count; i++)
        v[i] = lo + rand() / (float)RAND_MAX;
    return v;
}

/* Reads `bytes` of buf, a cache line at a time, so that what was cached
 * before is evicted; returns a sum so that the reads are not removed. */
static unsigned flush(const unsigned char *buf, size_t bytes) {
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i += 64)
        sum += buf[i];
    return sum;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 101, threads = argc > 2 ? atoi(argv[2]) : 2;
    if (repeats < 1 || threads < 1) {
        fprintf(stderr, "usage: conv_cache [REPEATS >= 1 [THREADS >= 1]]\n");
        return 2;
    }
    dlrt_set_threads(threads);
    /* c, h (= w), f, k: GoogLeNet's 3x3 and 1x1 layers on 28x28, 14x14 and 7x7 */
    static const int shapes[][4] = {{96, 28, 128, 3},  {128, 28, 192, 3}, {160, 14, 320, 3},
                                    {160, 7, 320, 3},  {192, 7, 384, 3},  {192, 28, 64, 1},
                                    {528, 14, 256, 1}, {832, 7, 384, 1}};
    static const size_t flushes[] = {0, 4u << 20, 96u << 20};
    static const char *const names[] = {"warm", "from L3", "from memory"};
    unsigned char *junk = calloc(96u << 20, 1);
    double *t = malloc((size_t)repeats * sizeof *t);
    if (!junk || !t)
        return 1;
    unsigned sink = 0;
    printf("%-22s %20s %20s %20s\n", "c, h x w, f, k", names[0], names[1], names[2]);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int c = shapes[s][0], h = shapes[s][1], f = shapes[s][2], k = shapes[s][3];
        DlrtConv cv = {.c = c, .h = h, .w = h, .f = f, .oh = h, .ow = h, .kh = k, .kw = k,
                       .sh = 1, .sw = 1, .ph = k / 2, .pw = k / 2, .dh = 1, .dw = 1,
                       .groups = 1, .act = DLRT_ACT_RELU};
        float *x = random_floats((int64_t)c * h * h, 0);
        float *w = random_floats((int64_t)f * c * k * k, -.5f);
        float *scale = random_floats(f, .5f), *shift = random_floats(f, -.5f);
        float *y = random_floats((int64_t)f * h * h, 0);
        float *work = random_floats(dlrt_conv2d_workspace(&cv, threads), 0);
        double gflop = 2.0 * f * c * k * k * h * h / 1e9;
        char label[40];
        snprintf(label, sizeof label, "%d, %dx%d, %d, %dx%d", c, h, h, f, k, k);
        printf("%-22s", label);
        for (int state = 0; state < 3; state++) {
            for (int r = 0; r < repeats; r++) {
                sink += flush(junk, flushes[state]);
                double t0 = now();
                dlrt_conv2d_forward_folded(&cv, 1, x, w, scale, shift, y, work, threads);
                t[r] = now() - t0;
            }
            qsort(t, (size_t)repeats, sizeof *t, by_value);
            double median = t[repeats / 2];
            printf(" %8.3f ms %6.1f GF", median * 1e3, gflop / median);
        }
        printf("\n");
        free(x), free(w), free(scale), free(shift), free(y), free(work);
    }
    free(junk), free(t);
    return sink == 1; /* never: keeps the flushes' reads */
}
