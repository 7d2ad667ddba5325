/* sgemm_peak: the single-precision matrix-product speed of this machine, as
 * Debian's OpenBLAS gets it: the yardstick for the GFLOP/s table of
 * bench/peers_vs_dlc.sh.
 *
 *   cc -O2 bench/sgemm_peak.c -o sgemm_peak -lopenblas
 *   OPENBLAS_NUM_THREADS=2 ./sgemm_peak [REPEATS [N...]]
 *
 * For each N (1024 2048 3072 4096 by default) it multiplies two random N x N
 * matrices, C = A B (cblas_sgemm, row-major, no transposes), once untimed
 * and then REPEATS times (3 by default), and takes the median time; one
 * product is 2 N^3 operations.  It prints one line per size and, last, one
 * JSON object: {"threads": ..., "core": ..., "peak_gflops": the best of the
 * sizes' medians, "n": the size that gave it}.  Threads are OpenBLAS's own,
 * from OPENBLAS_NUM_THREADS (set it; OpenBLAS otherwise takes every core).
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "timing.h"

char *openblas_get_corename(void);
int openblas_get_num_threads(void);

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 3;
    int default_sizes[] = {1024, 2048, 3072, 4096};
    int count = argc > 2 ? argc - 2 : 4;
    if (repeats < 1 || repeats > 1000) {
        fprintf(stderr, "usage: sgemm_peak [REPEATS [N...]]\n");
        return 2;
    }
    double best = 0, *seconds = malloc(sizeof(double) * repeats);
    int best_n = 0;
    for (int s = 0; s < count; s++) {
        int n = argc > 2 ? atoi(argv[2 + s]) : default_sizes[s];
        if (n < 1 || n > 32768) {
            fprintf(stderr, "sgemm_peak: bad size %s\n", argv[2 + s]);
            return 2;
        }
        size_t elems = (size_t)n * n;
        float *a = malloc(elems * sizeof(float)), *b = malloc(elems * sizeof(float)),
              *c = malloc(elems * sizeof(float));
        if (!a || !b || !c || !seconds) {
            fprintf(stderr, "sgemm_peak: out of memory at N = %d\n", n);
            return 1;
        }
        srand(1);
        for (size_t i = 0; i < elems; i++) {
            a[i] = (float)rand() / RAND_MAX;
            b[i] = (float)rand() / RAND_MAX;
            c[i] = 0;
        }
        for (int r = -1; r < repeats; r++) {
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                        0.0f, c, n);
            if (r >= 0)
                seconds[r] = now() - t0;
        }
        qsort(seconds, repeats, sizeof(double), by_value);
        double median = repeats % 2 ? seconds[repeats / 2]
                                    : (seconds[repeats / 2 - 1] + seconds[repeats / 2]) / 2;
        double gflops = 2.0 * n * n * (double)n / median / 1e9;
        printf("N = %d: median %.4f s, %.1f GFLOP/s (c[0] = %g)\n", n, median, gflops, c[0]);
        if (gflops > best) {
            best = gflops;
            best_n = n;
        }
        free(a);
        free(b);
        free(c);
    }
    free(seconds);
    printf("{\"threads\": %d, \"core\": \"%s\", \"peak_gflops\": %.2f, \"n\": %d}\n",
           openblas_get_num_threads(), openblas_get_corename(), best, best_n);
    return 0;
}
