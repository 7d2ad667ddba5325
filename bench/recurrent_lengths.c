/* recurrent_lengths: what sequences of different lengths cost in libdlrt's
 * recurrent kernels, against the same batch padded to its longest
 * sequence (what a framework computes without packed sequences), for the
 * variable-length figure of bench/README.md.
 *
 *   cc -O2 -Iruntime bench/recurrent_lengths.c build/libdlrt.a -lopenblas -lz -lm -fopenmp \
 *       -o recurrent_lengths
 *   OPENBLAS_NUM_THREADS=1 ./recurrent_lengths [THREADS [REPEATS]]
 *
 * An LSTM layer of 128 units over 28 features, batch 64, T = 100: one
 * training step's recurrence, the forward kernel (input projection, every
 * step, the training form's saves) then the backward (BPTT), with the
 * lengths uniform in 1..T (about half the padded steps), with every length
 * T given, and with no lengths at all.  Each is timed REPEATS times (50)
 * after 5 untimed; the medians are printed with the ratio of the varied
 * batch's time to the padded one's, beside the ratio of their steps. */
#include <stdio.h>
#include <stdlib.h>

#include "dlrt.h"
#include "timing.h"

enum { N = 64, T = 100, F = 28, H = 128, G = 4 };

/* The median time of REPEATS training recurrences with these lengths. */
static double median_ms(const DlrtRnn *r, const int32_t *lengths, int repeats, int threads,
                        float *buf[]) {
    double *ms = malloc(sizeof *ms * (size_t)repeats);
    for (int i = -5; i < repeats; i++) {
        double t0 = now();
        dlrt_rnn_forward(r, N, buf[0], buf[1], buf[2], buf[3], buf[4], lengths, NULL, NULL,
                         NULL, NULL, buf[5], buf[6], buf[7], buf[8], threads);
        dlrt_rnn_backward(r, N, buf[5], buf[7], buf[6], buf[2], lengths, NULL, buf[9], NULL,
                          buf[10], threads);
        if (i >= 0)
            ms[i] = 1000 * (now() - t0);
    }
    qsort(ms, (size_t)repeats, sizeof *ms, by_value);
    double m = ms[repeats / 2];
    free(ms);
    return m;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, repeats = argc > 2 ? atoi(argv[2]) : 50;
    dlrt_set_threads(threads);
    DlrtRnn r = {.cell = DLRT_CELL_LSTM, .steps = T, .input = F, .hidden = H, .fast = true};
    int64_t sizes[11] = {N * T * F, G * H * F, G * H * H, G * H, G * H, N * T * H, N * T * H,
                         N * T * 5 * H, dlrt_rnn_workspace(&r, N, threads), N * T * G * H,
                         dlrt_rnn_backward_workspace(&r, N, threads)};
    float *buf[11];
    DlrtRng rng;
    dlrt_rng_seed(&rng, 1);
    for (int i = 0; i < 11; i++) {
        buf[i] = dlrt_alloc((size_t)sizes[i], sizeof(float));
        for (int64_t k = 0; k < sizes[i]; k++)
            buf[i][k] = 0.1f * (2 * dlrt_rng_uniform(&rng) - 1);
    }
    int32_t varied[N], full[N];
    int64_t steps = 0;
    for (int i = 0; i < N; i++) {
        varied[i] = 1 + (int32_t)dlrt_rng_below(&rng, T);
        full[i] = T;
        steps += varied[i];
    }
    double v = median_ms(&r, varied, repeats, threads, buf);
    double f = median_ms(&r, full, repeats, threads, buf);
    double p = median_ms(&r, NULL, repeats, threads, buf);
    printf("LSTM %d units, %d features, batch %d, T %d, %d threads, median of %d\n", H, F, N, T,
           threads, repeats);
    printf("lengths 1..T (%lld steps of %d): %.3f ms\n", (long long)steps, N * T, v);
    printf("every length T:               %.3f ms\n", f);
    printf("no lengths (padded):          %.3f ms\n", p);
    printf("varied / padded: %.2f of the time for %.2f of the steps\n", v / p,
           (double)steps / (N * T));
    return 0;
}
