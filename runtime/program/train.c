/* train.c — `train` and `eval`: the commands that run on an IDX folder, a
 * folder of images (images.c's loaders), or a language model's text.
 *
 * Training loads the folder's train and test splits (a text's training
 * part and its held-out end, in the vocabulary of its characters, which
 * every checkpoint keeps) (the train split cut
 * to its first --limit samples), checks both against the network, and runs
 * the epochs with the learning-rate schedule, evaluating on the test split
 * after each and stopping with a clear message as soon as the loss is not
 * finite.  Progress goes to standard error (a bar on a terminal, nothing
 * otherwise), one line per epoch to standard output, --log and --report.
 *
 * Resuming is exact: training 2 epochs gives the same bytes as training 1,
 * saving, resuming and training 1 more.  Everything a step depends on is
 * either in the checkpoint or a function of the epoch's number: the
 * weights and optimizer state and the step count (which the generated code
 * saves), the epochs completed and the seed (metadata "epoch" and "seed",
 * written here after every epoch), the order of each epoch (the batcher's
 * shuffle is a function of seed and epoch alone) and the learning rate
 * (the schedule takes the absolute epoch).  The kernels must run with the
 * same thread count, which can change the last bits of sums.  One
 * exception: a cosine schedule anneals to the end of the current run
 * (epochs completed + --epochs), so a run split in two follows another
 * curve than one run would.
 *
 * Under mpirun (distributed.c) each rank trains on its part of every batch
 * with the network's distributed step, evaluates its part of every test
 * batch, and the sums of losses and counts are taken over the ranks; rank
 * 0 alone prints, logs, reports and saves checkpoints.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

/* ---- evaluation ---------------------------------------------------------- */

typedef struct Scores {
    double loss;      /* mean cross-entropy */
    double accuracy;  /* 0 to 1 */
    int64_t correct, count;
    double seconds;   /* in forward passes */
} Scores;

/* Labels per sample: 1, or a language model's T (a label at every step). */
int64_t dlrt_label_steps(const DlrtModel *m) { return m->steps > 1 ? m->steps : 1; }

void dlrt_random_batch(const DlrtModel *m, DlrtRng *rng, int64_t n, float *x, double *x64,
                       int32_t *y) {
    for (int64_t i = 0; i < n * m->input_size; i++) {
        float v = m->vocab > 0 ? (float)dlrt_rng_below(rng, (uint64_t)m->vocab)
                               : dlrt_rng_uniform(rng);
        x[i] = v;
        if (x64)
            x64[i] = v;
    }
    for (int64_t i = 0; i < n * dlrt_label_steps(m); i++)
        y[i] = (int32_t)dlrt_rng_below(rng, (uint64_t)m->classes);
}

/* The next batch from a loader of images, or else from a batcher: its
 * samples (0 at the end of the epoch), -1 on a loader's error (in err). */
static int64_t next_batch(DlrtBatcher *b, DlrtLoader *loader, float *x, int32_t *y,
                          DlrtError *err) {
    int64_t n = 0;
    if (!loader)
        return dlrt_batcher_next(b, x, y);
    return dlrt_loader_next(loader, x, y, &n, err) == DLRT_OK ? n : -1;
}

/* Runs the network over ds (or, with a loader, its images) in order; x, y
 * and logits hold one batch.  A language model's loss and accuracy are
 * over every step's prediction. */
static DlrtStatus evaluate(const DlrtModel *m, void *net, const DlrtDataset *ds,
                           DlrtLoader *loader, int64_t batch, float *x, int32_t *y,
                           float *logits, DlrtDist *dist, Scores *s, DlrtError *err) {
    DlrtBatcher b = {0};
    DlrtStatus st = m->freeze ? m->freeze(net, err) : DLRT_OK; /* until the next step */
    if (st == DLRT_OK && loader)
        dlrt_loader_start_epoch(loader, 0);
    else if (st != DLRT_OK || (st = dlrt_batcher_init(&b, ds, batch, false, 0, err)) != DLRT_OK)
        return st;
    if (m->reset_state) { /* the split as streams, from the zero state */
        dlrt_batcher_streams(&b);
        m->reset_state(net);
    }
    double total = 0;
    *s = (Scores){0};
    int64_t n;
    while ((n = next_batch(&b, loader, x, y, err)) > 0) {
        /* under mpirun, this rank's part of the batch */
        int64_t lo = 0, hi = n, steps = dlrt_label_steps(m);
        if (dist && dist->on)
            dlrt_dist_part(batch, n, dist->rank, dist->size, &lo, &hi);
        if (hi == lo)
            continue;
        double t0 = dlrt_clock();
        if ((st = m->forward(net, hi - lo, x + lo * m->input_size, logits, err)) != DLRT_OK)
            break;
        s->seconds += dlrt_clock() - t0;
        int64_t rows = (hi - lo) * steps;
        total += dlrt_cross_entropy(logits, y + lo * steps, rows, m->classes, NULL) * (double)rows;
        s->correct += dlrt_count_correct(logits, y + lo * steps, rows, m->classes);
        s->count += rows;
    }
    if (n < 0)
        st = err->status;
    dlrt_batcher_free(&b);
    if (st == DLRT_OK && dist && dist->on) { /* every rank's sums */
        double sums[3] = {total, (double)s->correct, (double)s->count};
        dlrt_dist_sum(dist, sums, 3, "the test loss");
        total = sums[0];
        s->correct = (int64_t)sums[1];
        s->count = (int64_t)sums[2];
    }
    s->loss = s->count ? total / (double)s->count : 0;
    s->accuracy = s->count ? (double)s->correct / (double)s->count : 0;
    return st;
}

static bool check_data(const DlrtModel *m, const DlrtDataset *ds, const char *what,
                       DlrtError *err) {
    if (dlrt_dataset_check(ds, m->rank, m->dims, (int32_t)m->classes, err) == DLRT_OK)
        return true;
    fprintf(stderr, "%s: the %s split does not fit the network: %s\n", m->name, what, err->message);
    return false;
}

static bool no_data(const DlrtModel *m, const Options *o) {
    if (o->data)
        return false;
    fprintf(stderr, "%s: no data: give --data DIR (the train section names none)\n", m->name);
    return true;
}

/* ---- the state of a training run ---------------------------------------- */

typedef struct Trainer {
    const DlrtModel *m;
    const Options *o;
    void *net;
    DlrtDataset train, test;
    DlrtBatcher batcher;
    float *x, *logits;      /* one batch of inputs and of outputs */
    int32_t *y;             /* one batch of labels */
    DlrtVocab vocab;        /* text: the characters the ids stand for */
    ImageData img;          /* images(...): the folder's splits and loaders */
    int64_t count;          /* training samples per epoch */
    uint64_t seed;          /* of the shuffle: --seed, else a resumed checkpoint's */
    int64_t first, end;     /* this run's epochs: first (0-based) to end, exclusive */
    int64_t steps;          /* per epoch */
    bool tty;               /* progress bars on standard error */
    FILE *log;
    DlrtError err;
    DlrtDist dist;          /* under mpirun: this rank and the reducer */
    bool lead;              /* this process prints, logs and saves: rank 0 */
    int64_t steps_done;     /* training steps of this run, for DLRT_DIST_FAULT */
} Trainer;

static void trainer_free(Trainer *t) {
    dlrt_batcher_free(&t->batcher);
    if (t->net)
        t->m->free(t->net);
    free(t->x);
    free(t->y);
    free(t->logits);
    dlrt_dataset_free(&t->train);
    dlrt_dataset_free(&t->test);
    dlrt_vocab_free(&t->vocab);
    dlrt_images_close(&t->img);
}

/* The buffers of one batch. */
static bool alloc_batch(const DlrtModel *m, int64_t batch, float **x, int32_t **y,
                        float **logits) {
    *x = malloc(sizeof(float) * (size_t)(batch * m->input_size));
    *y = malloc(sizeof(int32_t) * (size_t)(batch * dlrt_label_steps(m)));
    *logits = malloc(sizeof(float) * (size_t)(batch * dlrt_label_steps(m) * m->classes));
    if (*x && *y && *logits)
        return true;
    fprintf(stderr, "%s: out of memory for batches of %lld\n", m->name, (long long)batch);
    return false;
}

/* Loads, cuts to --limit and checks both splits. */
/* Samples of the synthetic train split that train uses without a
 * dataset (or --limit of them); the test split has a quarter as many. */
#define SYNTHETIC_TRAIN 2048

/* Random train and test splits of the network's shape, after a warning. */
static bool synthetic_splits(Trainer *t) {
    const DlrtModel *m = t->m;
    int64_t count = t->o->limit > 0 && t->o->limit < SYNTHETIC_TRAIN ? t->o->limit : SYNTHETIC_TRAIN;
    int64_t tests = count / 4 > 0 ? count / 4 : 1;
    if (t->lead)
        fprintf(stderr, "%s: warning: no dataset (no --data, and the train section names none): "
                "training on %lld random samples of the input's shape, testing on %lld; the "
                "accuracy means nothing\n", m->name, (long long)count, (long long)tests);
    if (dlrt_dataset_synthetic(&t->train, count, m->rank, m->dims, (int32_t)m->classes,
                               t->o->seed ^ 0x7472616e, &t->err) != DLRT_OK ||
        dlrt_dataset_synthetic(&t->test, tests, m->rank, m->dims, (int32_t)m->classes,
                               t->o->seed ^ 0x74657374, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, t->err.message);
        return false;
    }
    /* token ids, and a label per step, for a language model */
    DlrtDataset *split[2] = {&t->train, &t->test};
    for (int k = 0; k < 2 && (m->vocab > 0 || dlrt_label_steps(m) > 1); k++) {
        DlrtDataset *ds = split[k];
        int32_t *y = malloc(sizeof *y * (size_t)(ds->count * dlrt_label_steps(m)));
        if (!y) {
            fprintf(stderr, "%s: out of memory\n", m->name);
            return false;
        }
        DlrtRng rng;
        dlrt_rng_seed(&rng, t->o->seed ^ (uint64_t)(k + 1));
        dlrt_random_batch(m, &rng, ds->count, ds->x, NULL, y);
        free(ds->y);
        ds->y = y;
        ds->label_size = dlrt_label_steps(m);
        ds->num_classes = (int32_t)m->classes;
    }
    return true;
}

/* The train and validation splits of a language model's text (its
 * held-out end, the train section's text(val=...)), in t->vocab's ids: a
 * vocabulary given (a resumed checkpoint's) must be the text's own, and
 * one built from the text must fit the network's embedding. */
static bool text_splits(Trainer *t, const char *path, bool given) {
    const DlrtModel *m = t->m;
    DlrtText text = {0};
    DlrtVocab own = {0};
    int32_t *ids = NULL;
    int64_t n = 0;
    DlrtStatus st = dlrt_load_text(&text, path, 0, &t->err);
    if (st == DLRT_OK)
        st = dlrt_vocab_build(&own, text.data, text.size, &t->err);
    if (st == DLRT_OK && given)
        st = dlrt_vocab_check(&t->vocab, &own, &t->err);
    bool ok = st == DLRT_OK;
    if (ok && own.size > m->vocab) {
        fprintf(stderr, "%s: %s has %d characters, but the network's embedding takes %lld: "
                "give it vocab=%d\n", m->name, path, (int)own.size, (long long)m->vocab,
                (int)own.size);
        ok = false;
    }
    if (ok && !given) {
        t->vocab = own;
        own = (DlrtVocab){0};
    }
    if (ok && ((st = dlrt_vocab_encode(&t->vocab, text.data, text.size, &ids, &n, &t->err)) !=
                   DLRT_OK ||
               (st = dlrt_text_dataset(&t->train, &t->test, ids, n, m->dims[0], m->val_fraction,
                                       (int32_t)m->vocab, &t->err)) != DLRT_OK))
        ok = false;
    if (!ok && st != DLRT_OK)
        fprintf(stderr, "%s: %s\n", m->name, t->err.message);
    free(ids);
    dlrt_vocab_free(&own);
    dlrt_text_free(&text);
    if (ok && t->o->limit > 0 && t->o->limit < t->train.count)
        t->train.count = t->o->limit;
    return ok;
}

static bool load_splits(Trainer *t) {
    const DlrtModel *m = t->m;
    if (m->vocab > 0 && t->o->data)
        return true; /* the text, once the checkpoint to resume has told its vocabulary */
    if (dlrt_images_wanted(m, t->o))
        return true; /* the images, once the seed to resume with is known */
    if (!t->o->data)
        return synthetic_splits(t);
    if (dlrt_load_idx_dir(&t->train, &t->test, t->o->data, NULL, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, t->err.message);
        return false;
    }
    /* the first samples stay where they are: only the count shrinks */
    if (t->o->limit > 0 && t->o->limit < t->train.count)
        t->train.count = t->o->limit;
    return check_data(m, &t->train, "train", &t->err) && check_data(m, &t->test, "test", &t->err);
}

/* A metadata value of a checkpoint as a count from 0 to max; false after a
 * message when it is there but not such a number. */
static bool meta_count(const Trainer *t, const DlrtMeta *meta, int nmeta, const char *key,
                       uint64_t max, bool *found, uint64_t *out) {
    *found = false;
    for (int i = 0; i < nmeta; i++) {
        if (strcmp(meta[i].key, key) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(meta[i].value, &end, 10);
        if (errno || *end || end == meta[i].value || meta[i].value[0] == '-' || v > max) {
            fprintf(stderr, "%s: %s: the checkpoint's metadata \"%s\" is '%s', not a number "
                    "from 0 to %llu\n", t->m->name, t->o->resume, key, meta[i].value,
                    (unsigned long long)max);
            return false;
        }
        *found = true;
        *out = v;
    }
    return true;
}

/* Loads --resume into the network: where to go on (t->first) and, unless
 * --seed says otherwise, the seed of the run it continues.  A checkpoint
 * without an epoch (weights from elsewhere) starts at epoch 0. */
static bool resume(Trainer *t) {
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    if (t->m->load(t->net, t->o->resume, &meta, &nmeta, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: cannot resume: %s\n", t->m->name, t->err.message);
        return false;
    }
    bool has_epoch = false, has_seed = false;
    uint64_t epoch = 0, seed = 0;
    bool ok = meta_count(t, meta, nmeta, "epoch", INT32_MAX, &has_epoch, &epoch) &&
              meta_count(t, meta, nmeta, "seed", INT64_MAX, &has_seed, &seed);
    if (ok && t->m->vocab > 0 && t->o->data &&
        dlrt_vocab_from_meta(&t->vocab, meta, nmeta, t->o->resume, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: cannot resume: %s\n", t->m->name, t->err.message);
        ok = false;
    }
    dlrt_meta_free(meta, nmeta);
    t->first = has_epoch ? (int64_t)epoch : 0;
    if (has_seed && !t->o->seed_given)
        t->seed = seed;
    return ok;
}

/* The network (created, or resumed), the batcher at the first epoch, the
 * log. */
static bool start(Trainer *t) {
    const DlrtModel *m = t->m;
    const Options *o = t->o;
    t->seed = o->seed;
    if (m->create(&t->net, o->batch, o->seed, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, t->err.message);
        return false;
    }
    dlrt_apply_clip(m, t->net, o);
    if (o->resume && !resume(t))
        return false;
    /* the same seed, or the same checkpoint: the same weights everywhere */
    if (t->dist.on && !dlrt_dist_same_weights(&t->dist, m, t->net))
        return false;
    /* a language model's text, in the vocabulary of the run it continues */
    if (m->vocab > 0 && o->data && !text_splits(t, o->data, t->vocab.size > 0))
        return false;
    if (dlrt_images_wanted(m, o) && !dlrt_images_open(&t->img, m, o, true, t->seed))
        return false;
    t->end = t->first + o->epochs;
    t->count = t->img.train_loader ? t->img.train.count : t->train.count;
    t->steps = (t->count + o->batch - 1) / o->batch;
    if (t->img.train_loader) {
        dlrt_loader_start_epoch(t->img.train_loader, t->first);
    } else if (dlrt_batcher_init(&t->batcher, &t->train, o->batch, true, t->seed, &t->err) !=
               DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, t->err.message);
        return false;
    } else {
        if (m->reset_state) { /* a stateful network reads its text as streams */
            dlrt_batcher_streams(&t->batcher);
            t->steps = t->batcher.run_len;
        }
        dlrt_batcher_start_epoch(&t->batcher, t->first);
    }
    t->tty = t->lead && isatty(fileno(stderr));
    if (o->log && t->lead) {
        t->log = fopen(o->log, "w");
        if (!t->log) {
            fprintf(stderr, "%s: cannot write the log '%s': %s\n", m->name, o->log,
                    strerror(errno));
            return false;
        }
        fprintf(t->log, "epoch,train_loss,test_loss,test_accuracy,seconds,images_per_second\n");
    }
    return true;
}

/* ---- one epoch -------------------------------------------------------------- */

/* The learning rate for step `step` (0-based) of epoch `epoch` (absolute,
 * 0-based), in a run that ends after epoch end - 1. */
static double schedule(const DlrtModel *m, double lr, int64_t epoch, int64_t step, int64_t steps,
                       int64_t end) {
    double t = (double)epoch + (double)step / (double)(steps ? steps : 1);
    if (m->schedule && strcmp(m->schedule, "step") == 0 && m->step_every > 0)
        lr *= pow(m->gamma, (double)(epoch / m->step_every));
    else if (m->schedule && strcmp(m->schedule, "cosine") == 0)
        lr = m->min_lr +
             (lr - m->min_lr) * 0.5 * (1 + cos(3.14159265358979323846 * t / (double)end));
    if (m->warmup > 0 && t < (double)m->warmup)
        lr *= (t + 1.0 / (double)(steps ? steps : 1)) / (double)m->warmup;
    return lr;
}

static void progress(const Trainer *t, int64_t epoch, int64_t step, double loss, double ips,
                     double left) {
    int width = 24, done = (int)((double)width * (double)step / (double)t->steps);
    fprintf(stderr, "\r%s: epoch %lld/%lld [%.*s%*s] %3d%% loss %.4f  %.0f images/s  %d:%02d left ",
            t->m->name, (long long)epoch + 1, (long long)t->end, done,
            "========================", width - done, "", (int)(100 * step / t->steps), loss, ips,
            (int)left / 60, (int)left % 60);
    fflush(stderr);
}

/* What an epoch of training measured. */
typedef struct EpochResult {
    double loss;      /* mean over its samples */
    int64_t samples;
    double seconds;   /* in training steps */
} EpochResult;

/* One step of a rank under mpirun on its part of the batch of n in t->x
 * and t->y; *loss is the batch's mean loss, summed over the ranks. */
static bool dist_step(Trainer *t, int64_t n, double lr, float *loss) {
    const DlrtModel *m = t->m;
    int64_t lo, hi, steps = dlrt_label_steps(m);
    dlrt_dist_part(t->o->batch, n, t->dist.rank, t->dist.size, &lo, &hi);
    dlrt_dist_fault(&t->dist, ++t->steps_done);
    dlrt_dist_step(&t->dist, t->steps_done);
    float part;
    DlrtStatus st =
        m->train_step_dist_cuda /* the GPU's: NCCL's sums */
            ? m->train_step_dist_cuda(t->net, hi - lo, n, t->x + lo * m->input_size,
                                      t->y + lo * steps, (float)lr, &part,
                                      dlrt_dist_cuda_reducer(&t->dist), &t->err)
            : m->train_step_dist(t->net, hi - lo, n, t->x + lo * m->input_size, t->y + lo * steps,
                                 (float)lr, &part, dlrt_dist_reducer(&t->dist), &t->err);
    if (st != DLRT_OK)
        return false;
    double sum = part; /* this rank's share of the mean */
    dlrt_dist_sum(&t->dist, &sum, 1, "the training loss");
    *loss = (float)sum;
    return true;
}

/* An epoch's running figures. */
typedef struct EpochRun {
    double begin, sum;  /* its start (dlrt_clock) and its losses times their samples */
    int64_t step, seen; /* steps and samples done */
} EpochRun;

/* The loss of step run->step of epoch e (n samples at lr) counted, and the
 * progress bar; false after a message where the training diverged. */
static bool step_done(Trainer *t, int64_t e, EpochRun *run, int64_t n, double lr, float loss) {
    if (!isfinite(loss)) {
        fprintf(stderr, "%s%s: training diverged: the loss is %g at epoch %lld, step %lld "
                "(learning rate %g); try a smaller --lr\n", t->tty ? "\n" : "", t->m->name,
                (double)loss, (long long)e + 1, (long long)run->step + 1, lr);
        return false;
    }
    run->sum += (double)loss * (double)n;
    run->seen += n;
    run->step++;
    if (t->tty && (run->step % 10 == 0 || run->step == t->steps)) {
        double el = dlrt_clock() - run->begin, ips = (double)run->seen / (el > 0 ? el : 1e-9);
        double todo = (double)(t->count - run->seen) + (double)t->count * (double)(t->end - e - 1);
        progress(t, e, run->step, run->sum / (double)run->seen, ips, todo / (ips > 0 ? ips : 1));
    }
    return true;
}

/* Whether the epoch runs its steps two at a time on a GPU (the model's
 * train_step_start and train_step_finish): the next batch is made and
 * copied while the device runs this one.  Not under mpirun, and not with
 * DLRT_CUDA_OVERLAP=0 (each step then waits for the one before). */
static bool overlapped(const Trainer *t) {
    const char *env = getenv("DLRT_CUDA_OVERLAP");
    return t->m->train_step_start && t->m->train_step_finish && !t->dist.on &&
           !(env && strcmp(env, "0") == 0);
}

/* The steps started and not finished, the oldest first: their samples
 * and learning rates. */
typedef struct Pending {
    int64_t n[2];
    double lr[2];
    int count;
} Pending;

/* The oldest pending step finished and counted; false after a message. */
static bool finish_oldest(Trainer *t, int64_t e, EpochRun *run, Pending *p) {
    float loss;
    if (t->m->train_step_finish(t->net, &loss, &t->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", t->m->name, t->err.message);
        return false;
    }
    if (!step_done(t, e, run, p->n[0], p->lr[0], loss))
        return false;
    p->n[0] = p->n[1], p->lr[0] = p->lr[1], p->count--;
    return true;
}

/* The epoch's steps as overlapped() says: step k is started, then the
 * batch of k + 1 made while it runs, then step k - 1 finished (at most two
 * started and not finished); the losses are counted in order.  *n: 0 at
 * the end of the epoch, -1 on a loader's error (in t->err); false after a
 * message. */
static bool overlapped_steps(Trainer *t, int64_t e, EpochRun *run, int64_t *n) {
    const DlrtModel *m = t->m;
    Pending p = {.count = 0};
    while ((*n = next_batch(&t->batcher, t->img.train_loader, t->x, t->y, &t->err)) > 0) {
        if (p.count == 2 && !finish_oldest(t, e, run, &p))
            return false;
        double lr = schedule(m, t->o->lr, e, run->step + p.count, t->steps, t->end);
        if (m->train_step_start(t->net, *n, t->x, t->y, (float)lr, &t->err) != DLRT_OK) {
            fprintf(stderr, "%s: %s\n", m->name, t->err.message);
            return false;
        }
        p.n[p.count] = *n, p.lr[p.count] = lr, p.count++;
    }
    while (*n == 0 && p.count > 0)
        if (!finish_oldest(t, e, run, &p))
            return false;
    return true;
}

/* Trains epoch e over the batcher's order; false after a message. */
static bool train_epoch(Trainer *t, int64_t e, EpochResult *r) {
    const DlrtModel *m = t->m;
    EpochRun run = {.begin = dlrt_clock()};
    int64_t n;
    if (m->reset_state) /* each epoch reads its streams from the start */
        m->reset_state(t->net);
    if (overlapped(t)) {
        if (!overlapped_steps(t, e, &run, &n))
            return false;
    } else {
        while ((n = next_batch(&t->batcher, t->img.train_loader, t->x, t->y, &t->err)) > 0) {
            float loss;
            double lr = schedule(m, t->o->lr, e, run.step, t->steps, t->end);
            if (t->dist.on ? !dist_step(t, n, lr, &loss)
                           : m->train_step(t->net, n, t->x, t->y, (float)lr, &loss, &t->err) != DLRT_OK) {
                fprintf(stderr, "%s: %s\n", m->name, t->err.message);
                return false;
            }
            if (!step_done(t, e, &run, n, lr, loss))
                return false;
        }
    }
    if (n < 0) {
        fprintf(stderr, "%s%s: %s\n", t->tty ? "\n" : "", m->name, t->err.message);
        return false;
    }
    if (t->img.train_loader) { /* decoding the next epoch while this one is evaluated */
        if (e + 1 < t->end)
            dlrt_loader_start_epoch(t->img.train_loader, e + 1);
    } else {
        dlrt_batcher_next_epoch(&t->batcher);
    }
    if (t->tty)
        fputc('\n', stderr);
    *r = (EpochResult){.loss = run.sum / (double)(run.seen ? run.seen : 1), .samples = run.seen,
                       .seconds = dlrt_clock() - run.begin};
    return true;
}

/* The checkpoint after `epochs` epochs, with what resuming needs. */
static bool save_checkpoint(Trainer *t, int64_t epochs) {
    char epoch[32], seed[32];
    snprintf(epoch, sizeof epoch, "%lld", (long long)epochs);
    snprintf(seed, sizeof seed, "%" PRIu64, t->seed);
    DlrtMeta meta[] = {{"epoch", epoch}, {"seed", seed}, dlrt_vocab_meta(&t->vocab)};
    if (t->img.classes) /* the class names, for predict */
        meta[2] = (DlrtMeta){DLRT_CLASSES_KEY, t->img.classes};
    if (t->m->save(t->net, t->o->save, meta, t->vocab.size > 0 || t->img.classes ? 3 : 2,
                   &t->err) == DLRT_OK)
        return true;
    fprintf(stderr, "%s: %s\n", t->m->name, t->err.message);
    return false;
}

/* ---- the commands ------------------------------------------------------------ */

/* Trains epochs first to end; the status to exit with. */
static int run(Trainer *t, double begin) {
    const DlrtModel *m = t->m;
    const Options *o = t->o;
    Report r = dlrt_report_new("train");
    double train_seconds = 0;
    int64_t images = 0;
    for (int64_t e = t->first; e < t->end; e++) {
        EpochResult er;
        Scores s;
        if (!train_epoch(t, e, &er))
            return 1;
        if (evaluate(m, t->net, &t->test, t->img.val_loader, o->batch, t->x, t->y, t->logits,
                     &t->dist, &s, &t->err) != DLRT_OK) {
            fprintf(stderr, "%s: %s\n", m->name, t->err.message);
            return 1;
        }
        if (t->dist.on && !dlrt_dist_same_weights(&t->dist, m, t->net))
            return 1;
        double ips = (double)er.samples / (er.seconds > 0 ? er.seconds : 1e-9);
        if (!t->lead)
            ; /* rank 0 speaks for every rank */
        else if (m->vocab > 0 && m->steps > 1) /* a language model: per character */
            printf("epoch %lld/%lld: train loss %.4f, validation loss %.4f (%.4f bits per "
                   "character), accuracy %.4f, %.0f characters/s\n", (long long)e + 1,
                   (long long)t->end, er.loss, s.loss, s.loss / log(2), s.accuracy,
                   ips * (double)m->steps);
        else
            printf("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.4f, "
                   "%.0f images/s\n", (long long)e + 1, (long long)t->end, er.loss, s.loss,
                   s.accuracy, ips);
        fflush(stdout);
        if (t->log)
            fprintf(t->log, "%lld,%.9g,%.9g,%.9g,%.6g,%.6g\n", (long long)e + 1, er.loss, s.loss,
                    s.accuracy, er.seconds, ips);
        /* after every epoch, so that an interrupted run loses one at most */
        if (o->save && t->lead && !save_checkpoint(t, e + 1))
            return 1;
        train_seconds += er.seconds;
        images += er.samples;
        r.train_loss = er.loss;
        r.test_loss = s.loss;
        r.test_accuracy = s.accuracy;
    }
    r.epochs = t->end;
    if (t->dist.on)
        r.ranks = t->dist.size;
    r.images = images;
    r.images_per_second = (double)images / (train_seconds > 0 ? train_seconds : 1e-9);
    r.seconds = dlrt_clock() - begin;
    return !t->lead || dlrt_report_write(m, o, &r) ? 0 : 1;
}

int dlrt_train_command(const DlrtModel *m, const Options *o) {
    double begin = dlrt_clock();
    Trainer t = {.m = m, .o = o, .lead = true};
    int status = 1;
    if (dlrt_dist_launched()) { /* mpirun -np K */
        if ((status = dlrt_dist_open(&t.dist, m, o)) != 0) {
            dlrt_dist_close(&t.dist, status);
            return status;
        }
        t.lead = t.dist.rank == 0;
        status = 1;
    }
    if (load_splits(&t) && alloc_batch(m, o->batch, &t.x, &t.y, &t.logits) && start(&t))
        status = run(&t, begin);
    if (t.log && fclose(t.log) != 0 && status == 0) {
        fprintf(stderr, "%s: cannot write the log '%s'\n", m->name, o->log);
        status = 1;
    }
    /* the distributed part first: NCCL's communicator and stream live on
       the network's GPU context */
    dlrt_dist_close(&t.dist, status);
    trainer_free(&t);
    return status;
}

int dlrt_eval_command(const DlrtModel *m, const Options *o) {
    if (!o->weights) {
        fprintf(stderr, "%s: eval needs --weights FILE\n", m->name);
        return 2;
    }
    if (no_data(m, o))
        return 2;
    double begin = dlrt_clock();
    /* the network and its weights first: a language model's checkpoint
       says the vocabulary its text is read in */
    Trainer t = {.m = m, .o = o};
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    int status = 1;
    Scores s;
    bool ok = m->create(&t.net, o->batch, 0, &t.err) == DLRT_OK &&
              m->load(t.net, o->weights, m->vocab > 0 ? &meta : NULL,
                      m->vocab > 0 ? &nmeta : NULL, &t.err) == DLRT_OK &&
              (m->vocab == 0 ||
               dlrt_vocab_from_meta(&t.vocab, meta, nmeta, o->weights, &t.err) == DLRT_OK);
    dlrt_meta_free(meta, nmeta);
    if (!ok)
        fprintf(stderr, "%s: %s\n", m->name, t.err.message);
    else if (m->vocab > 0) /* the held-out end of the text */
        ok = text_splits(&t, o->data, true);
    else if (dlrt_images_wanted(m, o)) /* the validation images */
        ok = dlrt_images_open(&t.img, m, o, false, 0);
    else if (dlrt_load_idx_dir(NULL, &t.test, o->data, NULL, &t.err) != DLRT_OK) { /* the test split */
        fprintf(stderr, "%s: %s\n", m->name, t.err.message);
        ok = false;
    } else
        ok = check_data(m, &t.test, "test", &t.err);
    if (ok && alloc_batch(m, o->batch, &t.x, &t.y, &t.logits)) {
        if (evaluate(m, t.net, &t.test, t.img.val_loader, o->batch, t.x, t.y, t.logits, NULL,
                     &s, &t.err) != DLRT_OK) {
            fprintf(stderr, "%s: %s\n", m->name, t.err.message);
        } else {
            if (m->vocab > 0 && m->steps > 1)
                printf("validation loss %.4f (%.4f bits per character), accuracy %.4f (%lld of "
                       "%lld characters)\n", s.loss, s.loss / log(2), s.accuracy,
                       (long long)s.correct, (long long)s.count);
            else
                printf("test accuracy %.4f (%lld of %lld), test loss %.4f\n", s.accuracy,
                       (long long)s.correct, (long long)s.count, s.loss);
            Report r = dlrt_report_new("eval");
            r.test_loss = s.loss;
            r.test_accuracy = s.accuracy;
            r.images = s.count;
            r.images_per_second = (double)s.count / (s.seconds > 0 ? s.seconds : 1e-9);
            r.seconds = dlrt_clock() - begin;
            status = dlrt_report_write(m, o, &r) ? 0 : 1;
        }
    }
    trainer_free(&t);
    return status;
}
