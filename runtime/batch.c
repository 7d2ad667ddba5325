/* batch.c — shuffling and batching.
 *
 * A batcher walks a dataset in the order of b->order, a permutation of the
 * sample indices, copying each batch into the caller's buffers.  Shuffled,
 * every epoch starts from 0..count-1 and applies a Fisher–Yates shuffle
 * (from the last position down, j = dlrt_rng_below(i + 1)) drawn from a
 * generator seeded for that epoch alone with epoch_seed(seed, epoch).  So
 * the order of epoch e depends on nothing but the seed and e: the same seed
 * gives the same sequence of epochs on every machine, no other use of
 * random numbers (weight initialization, dropout) can change it, and a run
 * resumed from a checkpoint at epoch e needs no generator state to go on
 * exactly as an uninterrupted run would.  Unshuffled, the order stays
 * 0..count-1.  A sample's labels (one, or one per step of a text
 * dataset's sequence: label_size) travel with it.  The dataset must outlive
 * the batcher.
 *
 * As streams (a stateful recurrent network's text), the order is fixed:
 * the samples cut into runs of run_len consecutive ones, the last run
 * perhaps shorter, and the k-th batch takes the k-th of each run that has
 * one, so that batch after batch row i walks run i.
 */
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

/* splitmix64's step: a bijection that scatters nearby inputs. */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The seed of one epoch's shuffle.  Mixing the seed before adding the
 * epoch keeps (seed, epoch + 1) from meeting (seed + 1, epoch): epochs of
 * nearby seeds share no orders. */
static uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
    return mix(mix(seed) + (uint64_t)epoch);
}

void dlrt_epoch_order(int64_t *order, int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    if (shuffle) {
        DlrtRng rng;
        dlrt_rng_seed(&rng, epoch_seed(seed, epoch));
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)dlrt_rng_below(&rng, (uint64_t)i + 1);
            int64_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
}

/* Resets the order (shuffled when shuffling, or as streams) and rewinds. */
static void start_epoch(DlrtBatcher *b, int64_t epoch) {
    int64_t n = b->ds->count;
    b->epoch = epoch;
    b->pos = 0;
    b->taken = 0;
    if (b->streams) {
        int64_t len = (n + b->batch - 1) / b->batch, at = 0;
        b->run_len = len;
        b->runs = len ? (n + len - 1) / len : 0;
        for (int64_t k = 0; k < len; k++)
            for (int64_t i = 0; i < b->runs; i++)
                if (i * len + k < n)
                    b->order[at++] = i * len + k;
        return;
    }
    dlrt_epoch_order(b->order, n, b->shuffle, b->seed, epoch);
}

DlrtStatus dlrt_batcher_init(DlrtBatcher *b, const DlrtDataset *ds, int64_t batch,
                             bool shuffle, uint64_t seed, DlrtError *err) {
    if (!b)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_batcher_init: no batcher");
    memset(b, 0, sizeof *b);
    if (!ds || ds->count < 0 || (ds->count > 0 && (!ds->x || !ds->y)))
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_batcher_init: no dataset, or one without data");
    if (ds->label_size < 0)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_batcher_init: %lld labels per sample",
                         (long long)ds->label_size);
    if (batch < 1)
        return dlrt_fail(err, DLRT_E_ARG, "batch size %lld must be at least 1", (long long)batch);
    if ((uint64_t)ds->count > SIZE_MAX / sizeof *b->order)
        return dlrt_fail(err, DLRT_E_NOMEM, "too many samples to batch: %lld",
                         (long long)ds->count);
    /* one element at least, so that an empty dataset still gets a buffer */
    b->order = malloc((ds->count > 0 ? (size_t)ds->count : 1) * sizeof *b->order);
    if (!b->order)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for the order of %lld samples",
                         (long long)ds->count);
    b->ds = ds;
    b->batch = batch;
    b->shuffle = shuffle;
    b->seed = seed;
    start_epoch(b, 0);
    return DLRT_OK;
}

/* x or y may be NULL when the caller wants only the other. */
int64_t dlrt_batcher_next(DlrtBatcher *b, float *x, int32_t *y) {
    if (!b || !b->order || b->pos >= b->ds->count)
        return 0;
    int64_t left = b->ds->count - b->pos;
    int64_t n = left < b->batch ? left : b->batch;
    if (b->streams) /* the last run's row, while it lasts */
        n = b->taken < b->ds->count - (b->runs - 1) * b->run_len ? b->runs : b->runs - 1;
    b->taken++;
    int64_t size = b->ds->sample_size, per = dlrt_dataset_label_size(b->ds);
    for (int64_t k = 0; k < n; k++) {
        int64_t i = b->order[b->pos + k];
        if (x)
            memcpy(x + k * size, b->ds->x + i * size, (size_t)size * sizeof *x);
        if (y && per == 1)
            y[k] = b->ds->y[i];
        else if (y)
            memcpy(y + k * per, b->ds->y + i * per, (size_t)per * sizeof *y);
    }
    b->pos += n;
    return n;
}

void dlrt_batcher_streams(DlrtBatcher *b) {
    if (b && b->order) {
        b->streams = true;
        start_epoch(b, b->epoch);
    }
}

void dlrt_batcher_start_epoch(DlrtBatcher *b, int64_t epoch) {
    if (b && b->order)
        start_epoch(b, epoch);
}

void dlrt_batcher_next_epoch(DlrtBatcher *b) {
    if (b && b->order)
        start_epoch(b, b->epoch + 1);
}

void dlrt_batcher_free(DlrtBatcher *b) {
    if (!b)
        return;
    free(b->order);
    memset(b, 0, sizeof *b);
}
