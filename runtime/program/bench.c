/* bench.c — `bench`: how fast a training step or an inference runs.
 *
 *   ./lenet5 bench --threads 2
 *   lenet5 bench: train, batch 64, 2 threads, 10 warm-up and 100 timed iterations
 *   median 9.106 ms per batch (mean 9.179, min 8.876, max 12.806): 7028 images/s
 *
 * For a network trained on images(...), --data (the train section's
 * folder by default, where it exists) also times the training loader on its own, over as
 * many batches as the step ran (an epoch at most), and says whether it
 * keeps up with the step.
 *
 * No dataset: the inputs are uniform in [0, 1) and the labels uniform over
 * the classes, drawn from --seed, in the network's shape.  The untimed
 * warm-up iterations come first (page faults in fresh memory, caches,
 * OpenBLAS starting its threads), then each timed iteration is timed on
 * its own with a monotonic clock.  The median is the figure to quote: on a
 * shared or noisy machine, interruptions only ever add time, so a few slow
 * iterations move the mean and the maximum but not the median.  Images
 * per second are batch / median.
 *
 * --mode step times NAME_forward_step (a network with a step form: one
 * step of each of the batch's sequences, going on from the state, as
 * `sample` generates a character): the pool's ids, one per sequence.
 *
 * A training step is the real one (forward, loss, backward, the network's
 * optimizer at --lr), so the weights change as the benchmark runs.  The
 * data cycles through a few distinct batches rather than one: fitting a
 * single batch over and over would drive the loss and the gradients toward
 * zero, where subnormal floats make arithmetic slower than training is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

/* Distinct batches of random data, at most; fewer when they would take
 * more than POOL_BYTES. */
#define POOL_BATCHES 8
#define POOL_BYTES (INT64_C(64) << 20)

/* The random data and the network it goes through. */
typedef struct Bench {
    const DlrtModel *m;
    const Options *o;
    bool train;           /* a training step, not an inference */
    bool step;            /* one step (forward_step), not a whole inference */
    void *net;
    int64_t pool;         /* batches of data */
    float *x;             /* pool batches of inputs */
    int32_t *y;           /* pool batches of labels */
    float *out;           /* one batch of outputs */
    double *ms;           /* the time of each timed iteration */
    DlrtError err;
} Bench;

static void bench_free(Bench *b) {
    if (b->net)
        b->m->free(b->net);
    free(b->x);
    free(b->y);
    free(b->out);
    free(b->ms);
}

/* The network and the data; false after a message. */
static bool prepare(Bench *b) {
    const DlrtModel *m = b->m;
    int64_t batch = b->o->batch, bytes = batch * m->input_size * (int64_t)sizeof(float);
    b->pool = POOL_BYTES / bytes < POOL_BATCHES ? POOL_BYTES / bytes : POOL_BATCHES;
    b->pool = b->pool < 1 ? 1 : b->pool;
    b->x = malloc((size_t)(b->pool * bytes));
    int64_t steps = dlrt_label_steps(m);
    b->y = malloc((size_t)(b->pool * batch * steps) * sizeof *b->y);
    b->out = malloc((size_t)(batch * steps * m->classes) * sizeof *b->out);
    b->ms = malloc((size_t)b->o->iters * sizeof *b->ms);
    if (!b->x || !b->y || !b->out || !b->ms) {
        fprintf(stderr, "%s: out of memory for batches of %lld\n", m->name, (long long)batch);
        return false;
    }
    /* inference reads weights that do not change: packed once, as a
       product that embeds the network would (NAME_freeze) */
    if (m->create(&b->net, batch, b->o->seed, &b->err) != DLRT_OK ||
        (!b->train && m->freeze && m->freeze(b->net, &b->err) != DLRT_OK)) {
        fprintf(stderr, "%s: %s\n", m->name, b->err.message);
        return false;
    }
    dlrt_apply_clip(m, b->net, b->o);
    DlrtRng rng;
    dlrt_rng_seed(&rng, b->o->seed);
    dlrt_random_batch(m, &rng, b->pool * batch, b->x, NULL, b->y);
    return true;
}

/* Iteration i: a step or an inference on batch i of the pool (cycling). */
static bool iterate(Bench *b, int64_t i) {
    const DlrtModel *m = b->m;
    int64_t batch = b->o->batch, k = i % b->pool;
    const float *x = b->x + k * batch * m->input_size;
    float loss;
    DlrtStatus st = b->train
        ? m->train_step(b->net, batch, x, b->y + k * batch * dlrt_label_steps(m), (float)b->o->lr,
                        &loss, &b->err)
        : b->step ? m->forward_step(b->net, batch, x, b->out, &b->err)
                  : m->forward(b->net, batch, x, b->out, &b->err);
    if (st == DLRT_OK)
        return true;
    fprintf(stderr, "%s: %s\n", m->name, b->err.message);
    return false;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The figures of the timed iterations, into r (sorts b->ms). */
static void summarize(Bench *b, Report *r) {
    int64_t n = b->o->iters;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += b->ms[i];
    qsort(b->ms, (size_t)n, sizeof *b->ms, compare_doubles);
    r->median_ms = n % 2 ? b->ms[n / 2] : 0.5 * (b->ms[n / 2 - 1] + b->ms[n / 2]);
    r->mean_ms = sum / (double)n;
    r->min_ms = b->ms[0];
    r->max_ms = b->ms[n - 1];
    r->images = n * b->o->batch;
    r->images_per_second = (double)b->o->batch * 1000.0 / (r->median_ms > 0 ? r->median_ms : 1e-9);
}

int dlrt_bench_command(const DlrtModel *m, const Options *o) {
    double begin = dlrt_clock();
    Bench b = {.m = m, .o = o, .train = strcmp(o->mode, "train") == 0,
               .step = strcmp(o->mode, "step") == 0};
    int status = 1;
    if (b.step && !m->forward_step) {
        fprintf(stderr, "%s: bench --mode step needs a network with a step form (one that "
                "reads its sequence step by step: docs/passes.md, step)\n", m->name);
        return 2;
    }
    if (prepare(&b)) {
        printf("%s bench: %s, batch %lld, %lld thread%s, %lld warm-up and %lld timed iterations\n",
               m->name, o->mode, (long long)o->batch, (long long)o->threads,
               o->threads == 1 ? "" : "s", (long long)o->warmup, (long long)o->iters);
        fflush(stdout);
        bool ok = true;
        for (int64_t i = 0; ok && i < o->warmup; i++)
            ok = iterate(&b, i);
        for (int64_t i = 0; ok && i < o->iters; i++) {
            double t0 = dlrt_clock();
            ok = iterate(&b, o->warmup + i);
            b.ms[i] = 1000.0 * (dlrt_clock() - t0);
        }
        if (ok) {
            Report r = dlrt_report_new("bench");
            r.mode = o->mode;
            summarize(&b, &r);
            printf("median %.3f ms per batch (mean %.3f, min %.3f, max %.3f): %.0f images/s\n",
                   r.median_ms, r.mean_ms, r.min_ms, r.max_ms, r.images_per_second);
            /* images(...): can the loader keep up with the step? */
            if (b.train && dlrt_images_wanted(m, o) && (o->data_given || access(o->data, R_OK) == 0)) {
                ok = dlrt_images_bench(m, o, o->warmup + o->iters, &r.loader_images_per_second);
                if (ok)
                    printf("loader: %.0f images/s with %d worker%s (%s): %s\n",
                           r.loader_images_per_second, dlrt_images_workers(o),
                           dlrt_images_workers(o) == 1 ? "" : "s", o->data,
                           r.loader_images_per_second >= r.images_per_second
                               ? "faster than the step" : "the step waits for data");
            }
            r.seconds = dlrt_clock() - begin;
            status = ok && dlrt_report_write(m, o, &r) ? 0 : 1;
        }
    }
    bench_free(&b);
    return status;
}
