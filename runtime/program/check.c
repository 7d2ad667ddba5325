/* check.c — `check`: does the GPU compute what the CPU computes?
 *
 *   ./lenet5 check --device cuda
 *   check: cpu vs cuda, batch 64 of the train split of /usr/share/datasets/fashion-mnist (shuffled, seed 1), lr 0.01, tolerance 0.0001
 *     tensor                       shape            max abs diff  rel error
 *     start: the 20 tensors are the same on both devices
 *     gradients.loss               []                   ...
 *     c1.weight.grad               [6,1,5,5]            ...
 *     ...
 *     train_step.loss              []                   ...
 *     c1.weight                    [6,1,5,5]            ...
 *     ...
 *   check passed: 32 comparisons within 0.0001 of the cpu; the worst, ...
 *
 * A program built for the GPU holds two tables of the network: the CPU's
 * (DlrtModel) and the GPU's (model->cuda), with the same API, the same
 * tensors in the same order, and the same initialization from a seed
 * (both draw the weights on the host).  check creates one network from each with the same seed (and
 * loads --weights into both), takes one batch, and runs on both:
 *
 *   1. gradients(): the loss and every gradient (every tensor whose
 *      gradient has data; buffers have none), rows "gradients.loss" and
 *      "c1.weight.grad";
 *   2. train_step() at --lr, on the same objects: the loss, and every
 *      tensor after the update, parameters and buffers alike (momentum,
 *      Adam's moments, batch normalization's running statistics), rows
 *      "train_step.loss" and "c1.weight".
 *
 * With --mode infer it runs the forward pass alone instead (an int8
 * network's inference, whose training step is the f32 network's): one row
 * "forward" for the outputs of the batch, and a line that counts the
 * outputs that are the same bit for bit (all of them, for an int8 network
 * whose last layer gives f32 scores: its integers and its f64 epilogue are
 * the same on both devices).
 *
 * Before step 1 it compares the tensors as created (or loaded): they must
 * be the same, and any that differ get a row "c1.weight.start", since
 * every later row would measure that difference too.
 *
 * The error of a tensor is max|gpu - cpu| / scale, where scale is the
 * tensor's largest magnitude on the CPU, max|cpu|, but at least
 * CHECK_FLOOR (1%) of the largest magnitude of any tensor of the same step
 * (all gradients, or all tensors after the update; 1e-30 for a network of
 * zeros).  Relative to the tensor, not entry by entry, because f32
 * rounding is absolute at the scale of the values it flows from (a sum
 * taken in another order, as a GPU takes it, differs by a few ulps of its
 * largest terms), so entries near 0 would show large errors from noise.
 * The floor does the same for whole tensors near 0: the gradient of a
 * bias before a batch normalization is 0 in exact arithmetic, and in f32
 * the residue of cancelling terms (1e-9 where the other gradients are
 * 1e-2), which differs from one order of summation to another by as much
 * as it measures; against its own scale it would fail on any GPU.  (It is
 * gradcheck's floor for f32 against f64.)  A row passes when the error is
 * at most --tolerance; a NaN or an infinity on either side fails (inf -
 * inf is NaN).
 *
 * The batch is the first that `train --seed S` trains on (the train split
 * of --data or the train section's folder, shuffled with the seed), or
 * random data of the input's shape (dlrt_dataset_synthetic) without a
 * dataset; a folder named by --data must load, while the train section's
 * default falls back to random data with a warning when it cannot.
 *
 * Only the two tables' function pointers are used, so any two tables
 * with the same API can be compared (the test suite compares the CPU's
 * with a doctored copy of itself).  A table's tensor() and gradient() may
 * return memory that its next call overwrites (a GPU table's host copy):
 * each is read before the same table is called again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* The least scale of a tensor's error, as a fraction of the largest
 * magnitude among the tensors of its step (see above). */
#define CHECK_FLOOR 1e-2

/* The state of a check; check_free releases everything it holds. */
typedef struct Check {
    const DlrtModel *cpu, *gpu;   /* the reference table and the one checked */
    const Options *o;
    void *cpu_net, *gpu_net;
    float *x;                     /* the batch: n * input_size inputs */
    int32_t *y;                   /* and n labels (n * steps for a language model) */
    int64_t n;
    char source[640];             /* where the batch came from, for the first line */
    int compared, failed;         /* rows */
    double worst;                 /* the largest error of a row (NAN sticks) */
    char worst_name[160];
    double worst_abs;             /* that row's max abs diff */
    DlrtError err;
} Check;

static void check_free(Check *c) {
    if (c->cpu_net)
        c->cpu->free(c->cpu_net);
    if (c->gpu_net)
        c->gpu->free(c->gpu_net);
    free(c->x);
    free(c->y);
}

/* Prints message, after the network's name; false, for `return fail(...)`. */
static bool fail(const Check *c, const char *message) {
    fprintf(stderr, "%s: %s\n", c->cpu->name, message);
    return false;
}

/* ---- the batch ------------------------------------------------------------- */

/* The first batch of the train split of dir, shuffled with the seed, as
 * `train` takes it; false (with c->err set) when the folder cannot be
 * loaded, after a message when its data does not fit the network. */
static bool batch_from_data(Check *c, const char *dir, bool *loaded) {
    const DlrtModel *m = c->cpu;
    DlrtDataset train = {0};
    DlrtBatcher b = {0};
    *loaded = dlrt_load_idx_dir(&train, NULL, dir, NULL, &c->err) == DLRT_OK;
    if (!*loaded)
        return false;
    bool ok = false;
    if (dlrt_dataset_check(&train, m->rank, m->dims, (int32_t)m->classes, &c->err) != DLRT_OK)
        fprintf(stderr, "%s: the train split does not fit the network: %s\n", m->name,
                c->err.message);
    else if (dlrt_batcher_init(&b, &train, c->o->batch, true, c->o->seed, &c->err) != DLRT_OK)
        fail(c, c->err.message);
    else {
        c->n = dlrt_batcher_next(&b, c->x, c->y);
        ok = c->n > 0 || fail(c, "the train split is empty");
        snprintf(c->source, sizeof c->source, "%lld of the train split of %s (shuffled, seed %llu)",
                 (long long)c->n, dir, (unsigned long long)c->o->seed);
    }
    dlrt_batcher_free(&b);
    dlrt_dataset_free(&train);
    return ok;
}

/* Random inputs and labels of the network's shape, from the seed: token
 * ids and a label per step for a language model, as bench makes them. */
static bool batch_synthetic(Check *c) {
    const DlrtModel *m = c->cpu;
    if (m->vocab > 0 || dlrt_label_steps(m) > 1) {
        DlrtRng rng;
        dlrt_rng_seed(&rng, c->o->seed);
        dlrt_random_batch(m, &rng, c->o->batch, c->x, NULL, c->y);
        c->n = c->o->batch;
        snprintf(c->source, sizeof c->source, "%lld of random data (seed %llu)", (long long)c->n,
                 (unsigned long long)c->o->seed);
        return true;
    }
    DlrtDataset ds = {0};
    if (dlrt_dataset_synthetic(&ds, c->o->batch, m->rank, m->dims, (int32_t)m->classes,
                               c->o->seed, &c->err) != DLRT_OK)
        return fail(c, c->err.message);
    c->n = ds.count;
    memcpy(c->x, ds.x, sizeof(float) * (size_t)(ds.count * ds.sample_size));
    memcpy(c->y, ds.y, sizeof(int32_t) * (size_t)ds.count);
    dlrt_dataset_free(&ds);
    snprintf(c->source, sizeof c->source, "%lld of random data (seed %llu)", (long long)c->n,
             (unsigned long long)c->o->seed);
    return true;
}

/* The batch: from --data (which must load) or the train section's folder
 * (which may not be there: random data then, after a warning), else
 * random. */
static bool make_batch(Check *c) {
    const DlrtModel *m = c->cpu;
    const Options *o = c->o;
    c->x = malloc(sizeof(float) * (size_t)(o->batch * m->input_size));
    c->y = malloc(sizeof(int32_t) * (size_t)(o->batch * dlrt_label_steps(m)));
    if (!c->x || !c->y)
        return fail(c, "out of memory for the batch");
    if (!o->data)
        return batch_synthetic(c);
    bool loaded;
    if (batch_from_data(c, o->data, &loaded))
        return true;
    if (loaded)
        return false; /* after a message: the data does not fit */
    if (o->data_given)
        return fail(c, c->err.message);
    fprintf(stderr, "%s: warning: cannot load the train section's data (%s); checking on random "
            "data\n", m->name, c->err.message);
    return batch_synthetic(c);
}

/* ---- the networks ------------------------------------------------------------ */

/* Whether the tables describe the same network; false after a message. */
static bool tables_agree(const Check *c) {
    const DlrtModel *a = c->cpu, *b = c->gpu;
    if (a->input_size == b->input_size && a->classes == b->classes &&
        a->ntensors == b->ntensors && strcmp(a->name, b->name) == 0)
        return true;
    fprintf(stderr, "%s: the %s table is not the %s table's network (%s: %lld inputs, %lld "
            "classes, %d tensors; %s: %lld, %lld, %d)\n", a->name, dlrt_device_name(b),
            dlrt_device_name(a), dlrt_device_name(a), (long long)a->input_size,
            (long long)a->classes, a->ntensors, dlrt_device_name(b), (long long)b->input_size,
            (long long)b->classes, b->ntensors);
    return false;
}

/* Both networks from the seed, with --weights loaded into both.  The GPU's
 * first: where there is no GPU, that is the error to see, and soon. */
static bool create_nets(Check *c) {
    const Options *o = c->o;
    if (c->gpu->create(&c->gpu_net, o->batch, o->seed, &c->err) != DLRT_OK ||
        c->cpu->create(&c->cpu_net, o->batch, o->seed, &c->err) != DLRT_OK)
        return fail(c, c->err.message);
    dlrt_apply_clip(c->gpu, c->gpu_net, o);
    dlrt_apply_clip(c->cpu, c->cpu_net, o);
    if (o->weights && (c->cpu->load(c->cpu_net, o->weights, NULL, NULL, &c->err) != DLRT_OK ||
                       c->gpu->load(c->gpu_net, o->weights, NULL, NULL, &c->err) != DLRT_OK))
        return fail(c, c->err.message);
    return true;
}

/* ---- comparing ---------------------------------------------------------------- */

static int64_t tensor_count(const DlrtTensor *t) {
    int64_t count = 1;
    for (int d = 0; d < t->rank; d++)
        count *= t->dims[d];
    return count;
}

/* Entry j of t, of any dtype, as a double. */
static double value_at(const DlrtTensor *t, int64_t j) {
    switch (t->dtype) {
    case DLRT_F32: return ((const float *)t->data)[j];
    case DLRT_F64: return ((const double *)t->data)[j];
    case DLRT_I32: return ((const int32_t *)t->data)[j];
    case DLRT_I64: return (double)((const int64_t *)t->data)[j];
    case DLRT_U8: return ((const uint8_t *)t->data)[j];
    case DLRT_I8: return ((const int8_t *)t->data)[j];
    }
    return NAN;
}

static void shape_text(char *buf, size_t size, const DlrtTensor *t) {
    int len = snprintf(buf, size, "[");
    for (int d = 0; d < t->rank && (size_t)len < size; d++)
        len += snprintf(buf + len, size - (size_t)len, "%s%lld", d ? "," : "",
                        (long long)t->dims[d]);
    if ((size_t)len < size)
        snprintf(buf + len, size - (size_t)len, "]");
}

/* Counts and prints a row, and keeps the worst. */
static void row(Check *c, const char *name, const char *shape, double abs_diff, double error) {
    bool ok = error <= c->o->tolerance; /* false for NaN */
    c->compared++;
    c->failed += !ok;
    printf("  %-28s %-16s %12.2e %10.2e  %s\n", name, shape, abs_diff, error, ok ? "ok" : "FAIL");
    if (!isnan(c->worst) && !(error <= c->worst)) {
        c->worst = error;
        c->worst_abs = abs_diff;
        snprintf(c->worst_name, sizeof c->worst_name, "%s", name);
    }
}

/* The largest magnitude of t's entries. */
static double largest(const DlrtTensor *t) {
    double top = 0;
    for (int64_t j = 0, count = tensor_count(t); j < count; j++)
        top = fmax(top, fabs(value_at(t, j)));
    return top;
}

/* max|b - a|, and that over max(max|a|, floor, 1e-30); NAN when an entry
 * of either is NaN or both are infinite. */
static void difference(const DlrtTensor *a, const DlrtTensor *b, double floor,
                       double *abs_diff, double *error) {
    double diff = 0, top = 0;
    bool nan = false;
    for (int64_t j = 0, count = tensor_count(a); j < count; j++) {
        double u = value_at(a, j), d = fabs(value_at(b, j) - u);
        nan |= isnan(d);
        diff = d > diff ? d : diff;
        top = fabs(u) > top ? fabs(u) : top;
    }
    double scale = fmax(fmax(top, floor), 1e-30);
    *abs_diff = nan ? NAN : diff;
    *error = nan ? NAN : diff / scale;
}

/* Whether a and b are the same tensor of the network (name, dtype, shape),
 * both with data; false after a message.  (A GPU table's tensor() gives no
 * data when it cannot copy the tensor from the device.) */
static bool same_tensor(const Check *c, const DlrtTensor *a, const DlrtTensor *b) {
    if (!a->data || !b->data) {
        fprintf(stderr, "%s: %s: the %s table gives no data\n", c->cpu->name, a->name,
                dlrt_device_name(a->data ? c->gpu : c->cpu));
        return false;
    }
    char sa[128], sb[128];
    shape_text(sa, sizeof sa, a);
    shape_text(sb, sizeof sb, b);
    if (strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && strcmp(sa, sb) == 0)
        return true;
    fprintf(stderr, "%s: the tables' tensors differ: %s %s on the %s, %s %s on the %s\n",
            c->cpu->name, a->name, sa, dlrt_device_name(c->cpu), b->name, sb,
            dlrt_device_name(c->gpu));
    return false;
}

/* Compares a tensor of both networks as one row named name + suffix, at
 * least at scale floor; only_if_different leaves out a row of identical
 * values.  False after a message when the tensors are not alike. */
static bool compare(Check *c, DlrtTensor a, DlrtTensor b, const char *suffix, double floor,
                    bool only_if_different) {
    if (!same_tensor(c, &a, &b))
        return false;
    double abs_diff, error;
    difference(&a, &b, floor, &abs_diff, &error);
    if (only_if_different && abs_diff == 0)
        return true;
    char name[160], shape[128];
    snprintf(name, sizeof name, "%s%s", a.name, suffix);
    shape_text(shape, sizeof shape, &a);
    row(c, name, shape, abs_diff, error);
    return true;
}

static void compare_loss(Check *c, const char *name, float a, float b) {
    DlrtTensor ta = {.name = name, .dtype = DLRT_F32, .data = &a};
    DlrtTensor tb = {.name = name, .dtype = DLRT_F32, .data = &b};
    double abs_diff, error;
    difference(&ta, &tb, 0, &abs_diff, &error);
    row(c, name, "[]", abs_diff, error);
}

/* CHECK_FLOOR of the largest magnitude of the CPU network's tensors, or
 * of its gradients (the CPU's memory stays put between calls). */
static double step_floor(const Check *c, bool gradients) {
    double top = 0;
    for (int i = 0; i < c->cpu->ntensors; i++) {
        DlrtTensor t = gradients ? c->cpu->gradient(c->cpu_net, i) : c->cpu->tensor(c->cpu_net, i);
        if (t.data)
            top = fmax(top, largest(&t));
    }
    return CHECK_FLOOR * top;
}

/* The tensors as created or loaded, which must be the same: a row for
 * each that is not. */
static bool compare_start(Check *c) {
    int before = c->compared;
    double floor = step_floor(c, false);
    for (int i = 0; i < c->cpu->ntensors; i++)
        if (!compare(c, c->cpu->tensor(c->cpu_net, i), c->gpu->tensor(c->gpu_net, i), ".start",
                     floor, true))
            return false;
    if (c->compared == before)
        printf("  start: the %d tensors are the same on both devices\n", c->cpu->ntensors);
    return true;
}

/* Step 1: the loss and the gradients. */
static bool compare_gradients(Check *c) {
    float la, lb;
    if (c->cpu->gradients(c->cpu_net, c->n, c->x, c->y, &la, &c->err) != DLRT_OK ||
        c->gpu->gradients(c->gpu_net, c->n, c->x, c->y, &lb, &c->err) != DLRT_OK)
        return fail(c, c->err.message);
    compare_loss(c, "gradients.loss", la, lb);
    double floor = step_floor(c, true);
    for (int i = 0; i < c->cpu->ntensors; i++) {
        DlrtTensor a = c->cpu->gradient(c->cpu_net, i), b = c->gpu->gradient(c->gpu_net, i);
        if (!a.data != !b.data) {
            fprintf(stderr, "%s: %s has a gradient on the %s only\n", c->cpu->name, a.name,
                    dlrt_device_name(a.data ? c->cpu : c->gpu));
            return false;
        }
        if (a.data && !compare(c, a, b, ".grad", floor, false))
            return false;
    }
    return true;
}

/* Step 2: a training step, then every tensor. */
static bool compare_update(Check *c) {
    float la, lb, lr = (float)c->o->lr;
    if (c->cpu->train_step(c->cpu_net, c->n, c->x, c->y, lr, &la, &c->err) != DLRT_OK ||
        c->gpu->train_step(c->gpu_net, c->n, c->x, c->y, lr, &lb, &c->err) != DLRT_OK)
        return fail(c, c->err.message);
    compare_loss(c, "train_step.loss", la, lb);
    double floor = step_floor(c, false);
    for (int i = 0; i < c->cpu->ntensors; i++)
        if (!compare(c, c->cpu->tensor(c->cpu_net, i), c->gpu->tensor(c->gpu_net, i), "", floor,
                     false))
            return false;
    return true;
}

/* --mode infer: the forward pass of the batch, its outputs as a row and
 * how many are the same bits on both devices. */
static bool compare_forward(Check *c) {
    int64_t steps = c->cpu->steps > 0 ? c->cpu->steps : 1, count = c->n * steps * c->cpu->classes;
    float *a = malloc(sizeof *a * (size_t)count), *b = malloc(sizeof *b * (size_t)count);
    bool ok = a && b;
    if (!ok)
        fail(c, "out of memory");
    else if (c->cpu->forward(c->cpu_net, c->n, c->x, a, &c->err) != DLRT_OK ||
             c->gpu->forward(c->gpu_net, c->n, c->x, b, &c->err) != DLRT_OK)
        ok = fail(c, c->err.message);
    if (ok) {
        DlrtTensor ta = {.name = "forward", .dtype = DLRT_F32, .rank = 2,
                         .dims = {c->n, steps * c->cpu->classes}, .data = a};
        DlrtTensor tb = ta;
        tb.data = b;
        double abs_diff, error;
        difference(&ta, &tb, 0, &abs_diff, &error);
        char shape[128];
        shape_text(shape, sizeof shape, &ta);
        row(c, "forward", shape, abs_diff, error);
        int64_t same = 0;
        for (int64_t j = 0; j < count; j++)
            same += memcmp(&a[j], &b[j], sizeof *a) == 0;
        printf("  forward: %lld of %lld outputs the same bit for bit\n", (long long)same,
               (long long)count);
    }
    free(a);
    free(b);
    return ok;
}

/* ---- the command: ./net check ------------------------------------------------ */

int dlrt_check_command(const DlrtModel *m, const Options *o) {
    double begin = dlrt_clock();
    Check c = {.cpu = m, .gpu = m->cuda, .o = o, .worst = -1};
    int status = 1;
    if (!c.gpu) {
        /* dlrt_main refuses this first: a program built for the CPU only */
        fail(&c, "this program was built for the CPU only");
        return 2;
    }
    if (tables_agree(&c) && create_nets(&c) && make_batch(&c)) {
        printf("check: %s vs %s, batch %s, lr %g, tolerance %g\n", dlrt_device_name(c.cpu),
               dlrt_device_name(c.gpu), c.source, o->lr, o->tolerance);
        printf("  %-28s %-16s %12s %10s\n", "tensor", "shape", "max abs diff", "rel error");
        bool infer = o->mode && strcmp(o->mode, "infer") == 0;
        if (compare_start(&c) &&
            (infer ? compare_forward(&c) : compare_gradients(&c) && compare_update(&c))) {
            bool ok = c.failed == 0;
            if (ok)
                printf("check passed: %d comparisons within %g of the %s", c.compared, o->tolerance,
                       dlrt_device_name(c.cpu));
            else
                printf("check FAILED: %d of %d comparisons beyond %g of the %s", c.failed,
                       c.compared, o->tolerance, dlrt_device_name(c.cpu));
            printf("; the worst, %s, at %.2e (max abs diff %.2e)\n", c.worst_name, c.worst,
                   c.worst_abs);
            Report r = dlrt_report_new("check");
            r.device = dlrt_device_name(c.gpu);
            r.check_worst_error = c.worst;
            r.check_worst_tensor = c.worst_name;
            r.seconds = dlrt_clock() - begin;
            status = dlrt_report_write(m, o, &r) && ok ? 0 : 1;
        }
    }
    check_free(&c);
    return status;
}
