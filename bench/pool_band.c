/* pool_band: the speed of libdlrt's max pooling (dlrt_maxpool_forward) for
 * each band of output rows the tile pass could choose (DlrtPool.band), on
 * the zoo's max pooling shapes.  It is how passes/tile.c's rule for
 * pooling was calibrated (docs/passes.md, "Pooling").
 *
 *   cc -O2 -fopenmp -I runtime bench/pool_band.c build/libdlrt.a \
 *       -lopenblas -lz -lm -o pool_band
 *   ./pool_band [REPEATS [THREADS [BATCH]]]
 *
 * For each shape it runs the pooling REPEATS times (301 by default) on
 * THREADS workers (2) over BATCH samples (1), each call after reading 4 MB
 * of other memory (so the input comes from L3, as in a network, where the
 * convolution before it has just written it), and prints the shortest and
 * the median time of each band: 0 (libdlrt's own choice), then 1, 2, 4,
 * ... output rows, up to a whole plane.  The bands are timed in turns,
 * one call of each in every round, so that the machine's noise falls on
 * all of them alike. */
#include <stdio.h>
#include <stdlib.h>

#include "dlrt.h"
#include "timing.h"

/* Reads `bytes` of buf, a cache line at a time, so that what was cached
 * before is evicted; returns a sum so that the reads are not removed. */
static unsigned flush(const unsigned char *buf, size_t bytes) {
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i += 64)
        sum += buf[i];
    return sum;
}

enum { MAX_BANDS = 12 };

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 301, threads = argc > 2 ? atoi(argv[2]) : 2;
    int batch = argc > 3 ? atoi(argv[3]) : 1;
    if (repeats < 1 || threads < 1 || batch < 1) {
        fprintf(stderr, "usage: pool_band [REPEATS >= 1 [THREADS >= 1 [BATCH >= 1]]]\n");
        return 2;
    }
    dlrt_set_threads(threads);
    /* c, h (= w), k, s, p, ceil mode: ResNet's (3x3, stride 2, padded),
       AlexNet's, GoogLeNet's strided and centred ones, a 5x5 centred one */
    static const int shapes[][6] = {{64, 112, 3, 2, 1, 0}, {64, 55, 3, 2, 0, 0},
                                    {64, 112, 3, 2, 0, 1}, {192, 56, 3, 2, 0, 1},
                                    {192, 28, 3, 1, 1, 0}, {480, 14, 3, 1, 1, 0},
                                    {832, 7, 3, 1, 1, 0},  {64, 56, 5, 1, 2, 0}};
    unsigned char *junk = calloc(4u << 20, 1);
    double *t = malloc((size_t)MAX_BANDS * repeats * sizeof *t);
    if (!junk || !t)
        return 1;
    unsigned sink = 0;
    printf("%d threads, batch %d, %d calls per band, input from L3; us: shortest (median)\n",
           threads, batch, repeats);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        bool ceil_mode = s[5];
        int64_t span = s[1] + 2 * s[4] - s[2] + (ceil_mode ? s[3] - 1 : 0);
        int64_t o = span / s[3] + 1;
        if (ceil_mode && (o - 1) * s[3] >= s[1] + s[4])
            o--;
        DlrtPool p = {.c = s[0], .h = s[1], .w = s[1], .oh = o, .ow = o, .kh = s[2],
                      .kw = s[2], .sh = s[3], .sw = s[3], .ph = s[4], .pw = s[4]};
        int64_t in = (int64_t)batch * p.c * p.h * p.w, out = (int64_t)batch * p.c * o * o;
        float *x = malloc((size_t)in * sizeof *x), *y = malloc((size_t)out * sizeof *y);
        if (!x || !y)
            return 1;
        for (int64_t j = 0; j < in; j++)
            x[j] = rand() / (float)RAND_MAX;
        int64_t bands[MAX_BANDS];
        int nbands = 0;
        bands[nbands++] = 0;
        for (int64_t b = 1; b < o && nbands < MAX_BANDS - 1; b *= 2)
            bands[nbands++] = b;
        bands[nbands++] = o;
        for (int r = 0; r < repeats; r++)
            for (int b = 0; b < nbands; b++) {
                p.band = bands[b];
                sink += flush(junk, 4u << 20);
                double t0 = now();
                dlrt_maxpool_forward(&p, batch, x, y);
                t[b * repeats + r] = now() - t0;
            }
        printf("%3d x %3dx%-3d k%d s%d p%d%s -> %lldx%lld:", s[0], s[1], s[1], s[2], s[3], s[4],
               ceil_mode ? " ceil" : "", (long long)o, (long long)o);
        for (int b = 0; b < nbands; b++) {
            qsort(t + b * repeats, (size_t)repeats, sizeof *t, by_value);
            printf("  %lld: %.1f (%.1f)", (long long)bands[b], t[b * repeats] * 1e6,
                   t[b * repeats + repeats / 2] * 1e6);
        }
        printf("\n");
        free(x);
        free(y);
    }
    free(junk);
    free(t);
    return sink == 1; /* never: keeps the flushes */
}
