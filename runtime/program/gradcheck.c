/* gradcheck.c — a generated program's `gradcheck`: are the gradients right?
 *
 * The program links its network twice, in f32 (what trains) and in f64
 * (DlrtModel.check, the same generated code with double elements).  On one
 * small random batch (inputs uniform in [0, 1), labels uniform over the
 * classes) it compares, for every trainable tensor:
 *
 *   - the f64 gradient with central finite differences of the f64 loss,
 *     (L(w + h) - L(w - h)) / 2h with h = 1e-6, on a few entries per
 *     tensor (the largest gradient and others drawn at random): this checks
 *     autodiff, code generation and the kernels together, with differences
 *     accurate to about 1e-9;
 *   - the f32 gradient with the f64 one over the whole tensor, as
 *     max|g32 - g64| over the tensor's scale (below): this checks that f32
 *     rounding stays small.
 *
 * Both networks hold the same weights: the f32 network's, from the seed or
 * a checkpoint, copied into the f64 one.  A finite difference's error is
 * |a - b| / max(|a|, |b|, floor) where floor is 1e-3 of the tensor's largest
 * gradient plus 1e-9, so that entries whose gradient is nearly 0 (a dead
 * ReLU, a far-off class, the bias before a batchnorm, whose gradient is 0
 * exactly) are measured against the tensor's scale rather than against
 * their own noise.  The f32 comparison divides by the larger of the
 * tensor's largest gradient and 1e-2 of the network's: f32 rounding is
 * absolute, at the scale of the gradients it flows from.  The training step's update is not run (the
 * `gradients` entry point), and the step count is not advanced, so dropout
 * draws the same mask in every evaluation; batch normalization's running
 * statistics do change, which the loss in training mode does not read.
 *
 * ReLU and max pooling have kinks: when a step of h moves a ReLU's input
 * across 0, or changes which value of a pooling window is the largest, the
 * central difference averages two slopes and matches neither.  Such an
 * entry shows as one-sided slopes, (L(w + h) - L(w)) / h and (L(w) -
 * L(w - h)) / h, that differ by more than the caller's kink threshold
 * (half the tolerance, in the program: a smooth loss's one-sided slopes
 * differ by about h times its curvature, far less); it is compared with
 * the closer of the two (they are accurate to about h) and counted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"
#include "program.h"

static int64_t tensor_count(const DlrtTensor *t) {
    int64_t count = 1;
    for (int d = 0; d < t->rank; d++)
        count *= t->dims[d];
    return count;
}

static double rel_error(double a, double b, double floor) {
    double scale = fmax(fmax(fabs(a), fabs(b)), floor);
    return scale > 0 ? fabs(a - b) / scale : 0.0;
}

/* The f64 network's loss on the batch. */
static DlrtStatus loss64(const DlrtCheck *c, void *net, int64_t n, const double *x,
                         const int32_t *y, double *loss, DlrtError *err) {
    return c->gradients(net, n, x, y, loss, err);
}

/* The entries of a tensor of count values to check: the largest gradient
 * first, then distinct random ones, at most want in all. */
static int64_t pick_entries(const double *g, int64_t count, int64_t want, DlrtRng *rng,
                            int64_t *out) {
    if (count <= want) {
        for (int64_t i = 0; i < count; i++)
            out[i] = i;
        return count;
    }
    int64_t best = 0;
    for (int64_t i = 1; i < count; i++)
        if (fabs(g[i]) > fabs(g[best]))
            best = i;
    int64_t k = 0;
    out[k++] = best;
    while (k < want) {
        int64_t i = (int64_t)dlrt_rng_below(rng, (uint64_t)count);
        bool seen = false;
        for (int64_t j = 0; j < k; j++)
            seen |= out[j] == i;
        if (!seen)
            out[k++] = i;
    }
    return k;
}

static void print_shape(const DlrtTensor *t) {
    char buf[128];
    int len = snprintf(buf, sizeof buf, "[");
    for (int d = 0; d < t->rank; d++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%lld", d ? "," : "",
                        (long long)t->dims[d]);
    snprintf(buf + len, sizeof buf - (size_t)len, "]");
    printf("  %-28s %-16s", t->name, buf);
}

/* Checks one tensor: finite differences of entries of the f64 network, and
 * the whole f32 gradient against the f64 one.  g64 is the f64 gradient
 * (copied out, since each evaluation overwrites the network's). */
static DlrtStatus check_tensor(const DlrtModel *m, void *net64, int i, const double *g64,
                               const float *g32, double global_top, const DlrtGradcheck *o, const double *x,
                               const int32_t *y, DlrtRng *rng, DlrtGradcheckResult *res,
                               DlrtError *err) {
    const DlrtCheck *c = m->check;
    DlrtTensor w = c->tensor(net64, i);
    double *wd = w.data;
    int64_t count = tensor_count(&w);
    double top = 0.0;
    for (int64_t j = 0; j < count; j++)
        top = fmax(top, fabs(g64[j]));
    double floor = 1e-3 * top + 1e-9;

    double f32_diff = 0.0;
    for (int64_t j = 0; j < count; j++)
        f32_diff = fmax(f32_diff, fabs((double)g32[j] - g64[j]));
    double f32_err = f32_diff / fmax(fmax(top, 1e-2 * global_top), 1e-12);

    int64_t *entries = malloc(sizeof(int64_t) * (size_t)(o->entries > 0 ? o->entries : 1));
    if (!entries)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    int64_t k = pick_entries(g64, count, o->entries, rng, entries);
    double worst = 0.0;
    DlrtStatus st = DLRT_OK;
    for (int64_t e = 0; e < k && st == DLRT_OK; e++) {
        int64_t j = entries[e];
        double saved = wd[j], plus = 0, minus = 0;
        wd[j] = saved + o->step;
        st = loss64(c, net64, o->batch, x, y, &plus, err);
        wd[j] = saved - o->step;
        if (st == DLRT_OK)
            st = loss64(c, net64, o->batch, x, y, &minus, err);
        wd[j] = saved;
        double numeric = (plus - minus) / (2.0 * o->step);
        double r = rel_error(g64[j], numeric, floor);
        /* a kink within the step (a ReLU's input or a max-pooling window's
           order changing sign) shows as one-sided slopes that disagree;
           the gradient there is one of them */
        double right = (plus - res->loss) / o->step, left = (res->loss - minus) / o->step;
        if (rel_error(right, left, floor) > o->kink) {
            res->kinks++;
            numeric = fabs(g64[j] - right) < fabs(g64[j] - left) ? right : left;
            r = rel_error(g64[j], numeric, floor);
        }
        if (!(r <= worst)) { /* NaN counts as worst */
            worst = r;
            if (!(r <= res->worst)) {
                res->worst = r;
                snprintf(res->where, sizeof res->where, "%s[%lld]", w.name, (long long)j);
                res->analytic = g64[j];
                res->numeric = numeric;
            }
        }
        res->checked++;
    }
    free(entries);
    if (!(f32_err <= res->worst_f32))
        res->worst_f32 = f32_err;
    print_shape(&w);
    printf(" %10.2e %10.2e  (%lld entries)\n", worst, f32_err, (long long)k);
    return st;
}

/* Copies the f32 network's tensors into the f64 one. */
static void copy_weights(const DlrtModel *m, void *net32, void *net64) {
    for (int i = 0; i < m->ntensors; i++) {
        DlrtTensor a = m->tensor(net32, i), b = m->check->tensor(net64, i);
        const float *src = a.data;
        double *dst = b.data;
        for (int64_t j = 0, count = tensor_count(&a); j < count; j++)
            dst[j] = (double)src[j];
    }
}

DlrtStatus dlrt_gradcheck(const DlrtModel *m, const DlrtGradcheck *o, DlrtGradcheckResult *res,
                          DlrtError *err) {
    memset(res, 0, sizeof *res);
    if (!m->check)
        return dlrt_fail(err, DLRT_E_ARG, "this program was built without the f64 network "
                         "that gradcheck needs");
    if (o->batch < 1 || o->entries < 1 || !(o->step > 0) || !(o->kink > 0))
        return dlrt_fail(err, DLRT_E_ARG, "gradcheck needs a batch, entries, a step and a kink threshold above 0");
    void *net32 = NULL, *net64 = NULL;
    float *x32 = malloc(sizeof(float) * (size_t)(o->batch * m->input_size));
    double *x64 = malloc(sizeof(double) * (size_t)(o->batch * m->input_size));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(o->batch * dlrt_label_steps(m)));
    double **g64 = calloc((size_t)m->ntensors + 1, sizeof *g64);
    float **g32 = calloc((size_t)m->ntensors + 1, sizeof *g32);
    DlrtStatus st = DLRT_OK;
    if (!x32 || !x64 || !y || !g64 || !g32) {
        st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = m->create(&net32, o->batch, o->seed, err)) != DLRT_OK ||
        (o->weights && (st = m->load(net32, o->weights, NULL, NULL, err)) != DLRT_OK) ||
        (st = m->check->create(&net64, o->batch, o->seed, err)) != DLRT_OK)
        goto done;
    copy_weights(m, net32, net64);

    DlrtRng rng;
    dlrt_rng_seed(&rng, o->seed ^ 0x6772616463686b00ull); /* "gradchk" */
    dlrt_random_batch(m, &rng, o->batch, x32, x64, y);

    /* the analytic gradients, copied out of both networks */
    float loss32;
    double global_top = 0.0; /* the largest gradient of the network */
    if ((st = m->gradients(net32, o->batch, x32, y, &loss32, err)) != DLRT_OK ||
        (st = m->check->gradients(net64, o->batch, x64, y, &res->loss, err)) != DLRT_OK)
        goto done;
    for (int i = 0; i < m->ntensors; i++) {
        DlrtTensor a = m->gradient(net32, i), b = m->check->gradient(net64, i);
        if (!a.data || !b.data)
            continue;
        int64_t count = tensor_count(&a);
        g32[i] = malloc(sizeof(float) * (size_t)count);
        g64[i] = malloc(sizeof(double) * (size_t)count);
        if (!g32[i] || !g64[i]) {
            st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
            goto done;
        }
        memcpy(g32[i], a.data, sizeof(float) * (size_t)count);
        memcpy(g64[i], b.data, sizeof(double) * (size_t)count);
        for (int64_t j = 0; j < count; j++)
            global_top = fmax(global_top, fabs(g64[i][j]));
    }

    printf("gradcheck: batch %lld, seed %llu, loss %.6f; up to %lld entries per tensor, "
           "step %g\n", (long long)o->batch, (unsigned long long)o->seed, res->loss,
           (long long)o->entries, o->step);
    printf("  %-28s %-16s %10s %10s\n", "tensor", "shape", "f64 vs fd", "f32 vs f64");
    for (int i = 0; i < m->ntensors && st == DLRT_OK; i++)
        if (g64[i]) {
            res->tensors++;
            st = check_tensor(m, net64, i, g64[i], g32[i], global_top, o, x64, y, &rng, res, err);
        }
    if (st == DLRT_OK && res->tensors == 0)
        st = dlrt_fail(err, DLRT_E_ARG, "the network has no trainable tensor to check");
done:
    for (int i = 0; g64 && g32 && i < m->ntensors; i++) {
        free(g64[i]);
        free(g32[i]);
    }
    free(g64);
    free(g32);
    free(x32);
    free(x64);
    free(y);
    if (net32)
        m->free(net32);
    if (net64)
        m->check->free(net64);
    return st;
}

/* ---- the command: ./net gradcheck ------------------------------------------ */

int dlrt_gradcheck_command(const DlrtModel *m, const Options *o) {
    double start = dlrt_clock();
    DlrtGradcheck g = {.batch = o->batch, .seed = o->seed,
                       .kink = o->tolerance / 2,
                       .weights = o->weights, .entries = 8, .step = 1e-6};
    DlrtGradcheckResult res;
    DlrtError err = {0};
    if (dlrt_gradcheck(m, &g, &res, &err) != DLRT_OK) {
        fprintf(stderr, "%s: gradcheck: %s\n", m->name, err.message);
        return 1;
    }
    bool ok = res.worst <= o->tolerance && res.worst_f32 <= o->tolerance;
    printf("worst: %.2e at %s (analytic %.9g, finite differences %.9g); f32 within %.2e of f64\n",
           res.worst, res.where, res.analytic, res.numeric, res.worst_f32);
    printf("gradcheck %s: %lld entries of %d tensors, tolerance %g", ok ? "passed" : "FAILED",
           (long long)res.checked, res.tensors, o->tolerance);
    if (res.kinks)
        printf(" (%lld at a kink, compared one-sided)", (long long)res.kinks);
    printf("\n");
    Report r = dlrt_report_new("gradcheck");
    r.train_loss = res.loss;
    r.gradcheck_error = res.worst;
    r.gradcheck_f32_error = res.worst_f32;
    r.seconds = dlrt_clock() - start;
    if (!dlrt_report_write(m, o, &r))
        return 1;
    return ok ? 0 : 1;
}
