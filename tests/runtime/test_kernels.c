/* test_kernels.c — tests of libdlrt's kernels (runtime/kernels/).
 *
 *   test_kernels                       the unit tests; the last line says
 *                                      "N passed, M failed" (exit 1 on any
 *                                      failure)
 *   test_kernels run SPEC OUT          runs the cases of SPEC through the
 *                                      kernels and writes their outputs to OUT
 *
 * The unit tests check hand-computed cases (a 1x1 convolution is a matmul,
 * a padded 3x3 convolution, max-pooling ties, average pooling's divisors in
 * ceil mode), every forward kernel against a slow double-precision reference
 * written here, and every backward kernel against central finite
 * differences of those references (in double, so the differences are
 * accurate to ~1e-10) and, for the linear ops, of the f32 kernels
 * themselves.  Errors are measured per tensor as max|got - want| /
 * max(max|want|, 1e-6).
 *
 * The run mode lets tests/runtime/kernels_torch.test compare with PyTorch
 * through tests/runtime/Inputs/kernels_torch.py.  SPEC is whitespace-
 * separated text, a sequence of cases:
 *
 *   case LABEL OP NPARAMS  KEY VALUE ...  NARRAYS  NAME COUNT V... ...
 *
 * and OUT holds, for each case, "case LABEL NARRAYS" and then one line per
 * output array, "NAME COUNT V...", values as %.9g (which round-trips f32).
 * The ops and their parameters, inputs and outputs are listed at
 * run_case(). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

/* ------------------------------------------------------------------------ */
/* The harness                                                              */
/* ------------------------------------------------------------------------ */

typedef struct Tally {
    int passed;
    int failed;
} Tally;

#define CHECK(t, cond) check((t), (cond), #cond, __LINE__)

static bool check(Tally *t, bool ok, const char *what, int line) {
    if (ok) {
        t->passed++;
    } else {
        t->failed++;
        fprintf(stderr, "test_kernels.c:%d: FAILED: %s\n", line, what);
    }
    return ok;
}

/* max|got - want| / max(max|want|, least); infinite where a value is NaN or
 * infinite on one side only. */
static double rel_error(const float *got, const double *want, int64_t count, double least) {
    double diff = 0.0, scale = least;
    for (int64_t i = 0; i < count; i++) {
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        if (isnan(want[i]))
            continue;
        if (isinf(got[i]) || isinf(want[i])) {
            if ((double)got[i] != want[i])
                return INFINITY;
            continue;
        }
        double d = fabs((double)got[i] - want[i]);
        if (d > diff)
            diff = d;
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    }
    return diff / scale;
}

#define CHECK_CLOSE(t, what, got, want, count, tol) \
    check_close((t), (what), (got), (want), (count), (tol), 1e-6, __LINE__)
/* The same, relative to at least `least`: for results that are sums whose
 * terms nearly cancel, the rounding error scales with the terms, not with
 * the result. */
#define CHECK_CLOSE_TO(t, what, got, want, count, tol, least) \
    check_close((t), (what), (got), (want), (count), (tol), (least), __LINE__)

static void check_close(Tally *t, const char *what, const float *got, const double *want,
                        int64_t count, double tol, double least, int line) {
    double err = rel_error(got, want, count, least);
    if (check(t, err <= tol, what, line))
        return;
    fprintf(stderr, "    relative error %.3g > %.3g\n", err, tol);
    for (int64_t i = 0, shown = 0; i < count && shown < 6; i++) {
        if (fabs((double)got[i] - want[i]) > tol * 0.5 * (fabs(want[i]) + 1e-6) ||
            isnan(got[i]) != isnan(want[i])) {
            fprintf(stderr, "    [%" PRId64 "] got %.9g, want %.9g\n", i, (double)got[i],
                    want[i]);
            shown++;
        }
    }
}

/* The same, against a float array of expected values. */
static void check_values(Tally *t, const char *what, const float *got, const float *want,
                         int64_t count, double tol, int line) {
    double *w = malloc((size_t)count * sizeof *w);
    for (int64_t i = 0; i < count; i++)
        w[i] = want[i];
    check_close(t, what, got, w, count, tol, 1e-6, line);
    free(w);
}
#define CHECK_VALUES(t, what, got, want, count, tol) \
    check_values((t), (what), (got), (want), (count), (tol), __LINE__)

static float *falloc(int64_t count) {
    float *p = malloc((size_t)(count > 0 ? count : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "test_kernels: out of memory\n");
        exit(2);
    }
    /* poisoned: an output element a kernel fails to write shows as NaN */
    for (int64_t i = 0; i < count; i++)
        p[i] = NAN;
    return p;
}

static double *dalloc(int64_t count) {
    double *p = calloc((size_t)(count > 0 ? count : 1), sizeof *p);
    if (!p) {
        fprintf(stderr, "test_kernels: out of memory\n");
        exit(2);
    }
    return p;
}

/* A ReLU's result, for the kernels with its gradient fused in: mostly
 * uniform in [-1, 1), and some of the values at the mask's edge: 0, -0,
 * the smallest positive, NaN. */
static void fill_relu_result(DlrtRng *rng, float *y, int64_t count) {
    static const float edge[] = {0.0f, -0.0f, 1e-45f, NAN};
    for (int64_t i = 0; i < count; i++) {
        uint64_t pick = dlrt_rng_next(rng) % 8;
        y[i] = pick < 4 ? edge[pick] : 2.0f * dlrt_rng_uniform(rng) - 1.0f;
    }
}

/* Whether a kernel with a ReLU's gradient fused in (fused) gave the bits of
 * the kernel without it (plain, overwritten) followed by relu_backward. */
static bool same_as_relu_backward(const float *fused, float *plain, const float *relu_y,
                                  int64_t count) {
    dlrt_relu_backward(count, plain, relu_y, plain);
    return memcmp(fused, plain, sizeof *plain * (size_t)count) == 0;
}

/* Uniform values in [-1, 1), into f and, when d is not NULL, d. */
static void fill_random(DlrtRng *rng, float *f, double *d, int64_t count) {
    for (int64_t i = 0; i < count; i++) {
        f[i] = 2.0f * dlrt_rng_uniform(rng) - 1.0f;
        if (d)
            d[i] = f[i];
    }
}

static void to_double(const float *f, double *d, int64_t count) {
    for (int64_t i = 0; i < count; i++)
        d[i] = f[i];
}

static double dot(const double *a, const double *b, int64_t count) {
    double s = 0.0;
    for (int64_t i = 0; i < count; i++)
        s += a[i] * b[i];
    return s;
}

/* A loss of some inputs, in double: sum(dy * op(inputs)). */
typedef double (*LossFn)(void *ctx);

/* Central finite differences of loss with respect to v[0..count). */
static void fd_grad(LossFn loss, void *ctx, double *v, int64_t count, double eps,
                    double *grad) {
    for (int64_t i = 0; i < count; i++) {
        double save = v[i];
        v[i] = save + eps;
        double lp = loss(ctx);
        v[i] = save - eps;
        double lm = loss(ctx);
        v[i] = save;
        grad[i] = (lp - lm) / (2.0 * eps);
    }
}

/* The same around f32 values (exact for linear ops with a large eps). */
static void fd_grad_f32(LossFn loss, void *ctx, float *v, int64_t count, float eps,
                        double *grad) {
    for (int64_t i = 0; i < count; i++) {
        float save = v[i];
        v[i] = save + eps;
        double lp = loss(ctx);
        v[i] = save - eps;
        double lm = loss(ctx);
        v[i] = save;
        grad[i] = (lp - lm) / ((double)(save + eps) - (double)(save - eps));
    }
}

/* ------------------------------------------------------------------------ */
/* Double-precision references                                              */
/* ------------------------------------------------------------------------ */

/* The output size PyTorch computes for a convolution. */
static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Straight from the definition: a sum over the window, skipping padding. */
static void conv_ref(const DlrtConv *cv, int64_t n, const double *x, const double *w,
                     const double *b, double *y) {
    int64_t cg = cv->c / cv->groups, fg = cv->f / cv->groups;
    for (int64_t s = 0; s < n; s++)
        for (int64_t f = 0; f < cv->f; f++)
            for (int64_t oy = 0; oy < cv->oh; oy++)
                for (int64_t ox = 0; ox < cv->ow; ox++) {
                    double sum = b ? b[f] : 0.0;
                    int64_t g = f / fg;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ki = 0; ki < cv->kh; ki++)
                            for (int64_t kj = 0; kj < cv->kw; kj++) {
                                int64_t iy = oy * cv->sh - cv->ph + ki * cv->dh;
                                int64_t ix = ox * cv->sw - cv->pw + kj * cv->dw;
                                if (iy < 0 || iy >= cv->h || ix < 0 || ix >= cv->w)
                                    continue;
                                int64_t c = g * cg + ci;
                                sum += x[((s * cv->c + c) * cv->h + iy) * cv->w + ix] *
                                       w[((f * cg + ci) * cv->kh + ki) * cv->kw + kj];
                            }
                    y[((s * cv->f + f) * cv->oh + oy) * cv->ow + ox] = sum;
                }
}

/* The output size PyTorch computes for pooling, ceil mode included: a last
 * window that would start in the right padding is dropped. */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
    int64_t num = in + 2 * p - k + (ceil_mode ? s - 1 : 0);
    int64_t o = num / s + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return o;
}

static DlrtPool make_pool(int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                          int64_t sw, int64_t ph, int64_t pw, bool ceil_mode, bool cip) {
    return (DlrtPool){.c = c, .h = h, .w = w,
                      .oh = pool_out(h, kh, sh, ph, ceil_mode),
                      .ow = pool_out(w, kw, sw, pw, ceil_mode),
                      .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw,
                      .count_include_pad = cip};
}

/* Pooling by scanning the whole window and classifying each position:
 * inside the input, inside the padded input, or beyond it. */
static void pool_ref(const DlrtPool *p, int64_t n, bool max, const double *x, double *y) {
    for (int64_t pl = 0; pl < n * p->c; pl++)
        for (int64_t oy = 0; oy < p->oh; oy++)
            for (int64_t ox = 0; ox < p->ow; ox++) {
                double best = -INFINITY, sum = 0.0;
                int64_t inside = 0, padded = 0;
                for (int64_t ki = 0; ki < p->kh; ki++)
                    for (int64_t kj = 0; kj < p->kw; kj++) {
                        int64_t iy = oy * p->sh - p->ph + ki, ix = ox * p->sw - p->pw + kj;
                        if (iy >= -p->ph && iy < p->h + p->ph && ix >= -p->pw &&
                            ix < p->w + p->pw)
                            padded++;
                        if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                            continue;
                        double v = x[(pl * p->h + iy) * p->w + ix];
                        inside++;
                        sum += v;
                        if (v > best)
                            best = v;
                    }
                double *out = &y[(pl * p->oh + oy) * p->ow + ox];
                if (max)
                    *out = best;
                else
                    *out = sum / (double)(p->count_include_pad ? padded : inside);
            }
}

static void softmax_ref(int64_t outer, int64_t axis, int64_t inner, const double *x,
                        double *y) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *xs = x + o * axis * inner + i;
            double *ys = y + o * axis * inner + i;
            double max = -INFINITY, sum = 0.0;
            for (int64_t a = 0; a < axis; a++)
                max = fmax(max, xs[a * inner]);
            for (int64_t a = 0; a < axis; a++)
                sum += exp(xs[a * inner] - max);
            for (int64_t a = 0; a < axis; a++)
                ys[a * inner] = exp(xs[a * inner] - max) / sum;
        }
}

/* ------------------------------------------------------------------------ */
/* Hand-checked cases                                                       */
/* ------------------------------------------------------------------------ */

static void test_conv_by_hand(Tally *t) {
    /* 1x1: y[f] = sum_c w[f,c] x[c] + b[f], a matmul over the pixels */
    DlrtConv cv = {.c = 3, .h = 2, .w = 2, .f = 2, .oh = 2, .ow = 2, .kh = 1, .kw = 1,
                   .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1};
    float x[] = {1, 2, 3, 4, 0, 1, 0, 1, 2, 2, 2, 2};
    float w[] = {1, 2, 3, 4, 5, 6};
    float b[] = {0.5f, -1.0f};
    float y[8], work[12 + 6];
    float want[] = {7.5f, 10.5f, 9.5f, 12.5f, 15, 24, 23, 32};
    CHECK(t, dlrt_conv2d_workspace(&cv, 1) <= 12 + 6); /* im2col, dw */
    dlrt_conv2d_forward(&cv, 1, x, w, b, y, work, 1);
    CHECK_VALUES(t, "1x1 conv is a matmul", y, want, 8, 0);

    /* 3x3, padding 1, on 1..16: each output sums its neighbourhood */
    DlrtConv c3 = {.c = 1, .h = 4, .w = 4, .f = 1, .oh = 4, .ow = 4, .kh = 3, .kw = 3,
                   .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 1};
    float img[16], ones[9], y3[16], work3[285];
    for (int i = 0; i < 16; i++)
        img[i] = (float)(i + 1);
    for (int i = 0; i < 9; i++)
        ones[i] = 1.0f;
    float sums[] = {14, 24, 30, 22, 33, 54, 63, 45, 57, 90, 99, 69, 46, 72, 78, 54};
    /* im2col (9 x 16) or, larger, the padded input gradient's scratch (its
     * product, 9 x 4 rows of 6, dy padded to 4 x 6, the padded 6 x 6 input
     * gradient); then dw */
    CHECK(t, dlrt_conv2d_workspace(&c3, 1) == 9 * 24 + 24 + 36 + 9);
    dlrt_conv2d_forward(&c3, 1, img, ones, NULL, y3, work3, 1);
    CHECK_VALUES(t, "3x3 conv sums neighbourhoods", y3, sums, 16, 0);

    /* the same with stride 2 keeps every other output */
    DlrtConv c3s = c3;
    c3s.sh = c3s.sw = 2;
    c3s.oh = c3s.ow = 2;
    float ys[4], wants[] = {14, 30, 57, 99};
    dlrt_conv2d_forward(&c3s, 1, img, ones, NULL, ys, work3, 1);
    CHECK_VALUES(t, "strided 3x3 conv", ys, wants, 4, 0);

    /* cross-correlation, not convolution: a kernel with only its top-left
     * tap set shifts the image down and right */
    float corner[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0};
    float shifted[] = {0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11};
    dlrt_conv2d_forward(&c3, 1, img, corner, NULL, y3, work3, 1);
    CHECK_VALUES(t, "conv is a cross-correlation", y3, shifted, 16, 0);
}

static void test_maxpool_by_hand(Tally *t) {
    /* ties: the first maximum in row-major order takes the gradient */
    DlrtPool p = make_pool(1, 4, 4, 2, 2, 2, 2, 0, 0, false, false);
    float x[] = {1, 1, 0, 3,
                 1, 1, 3, 0,
                 -1, -2, 2, 2,
                 -3, -1, 2, 2};
    float y[4], dx[16], dy[] = {1, 2, 3, 4};
    float wanty[] = {1, 3, -1, 2};
    float wantdx[] = {1, 0, 0, 2,
                      0, 0, 0, 0,
                      3, 0, 4, 0,
                      0, 0, 0, 0};
    dlrt_maxpool_forward(&p, 1, x, y);
    CHECK_VALUES(t, "maxpool values", y, wanty, 4, 0);
    dlrt_maxpool_backward(&p, 1, dy, x, dx);
    CHECK_VALUES(t, "maxpool ties go to the first maximum", dx, wantdx, 16, 0);

    /* the same in overlapping windows, inner (vectorized) and clipped: on a
     * plane of equal values, 3x3 stride 1 padded by 1, each window's
     * gradient lands on its first element inside the plane */
    DlrtPool pt = make_pool(1, 4, 6, 3, 3, 1, 1, 1, 1, false, false);
    float ones[24], dyt[24], dxt[24], wantt[24] = {0};
    for (int i = 0; i < 24; i++)
        ones[i] = 1, dyt[i] = (float)(i + 1);
    for (int oy = 0; oy < 4; oy++)
        for (int ox = 0; ox < 6; ox++)
            wantt[(oy > 0 ? oy - 1 : 0) * 6 + (ox > 0 ? ox - 1 : 0)] += dyt[oy * 6 + ox];
    dlrt_maxpool_backward(&pt, 1, dyt, ones, dxt);
    CHECK_VALUES(t, "maxpool ties in overlapping windows", dxt, wantt, 24, 0);

    /* a NaN wins its window, as in torch: in the 2x2 stride-2 loop, in the
     * loop of windows inside the plane, and at the clipped edge */
    float xn[16];
    memcpy(xn, x, sizeof xn);
    xn[5] = NAN;  /* window (0, 0) of 2x2 stride 2 */
    xn[15] = NAN; /* window (1, 1) */
    dlrt_maxpool_forward(&p, 1, xn, y);
    CHECK(t, isnan(y[0]) && y[1] == 3 && y[2] == -1 && isnan(y[3]));
    DlrtPool p3 = make_pool(1, 4, 4, 3, 3, 1, 1, 0, 0, false, false);
    float y33[4];
    dlrt_maxpool_forward(&p3, 1, xn, y33);
    CHECK(t, isnan(y33[0]) && isnan(y33[1]) && isnan(y33[2]) && isnan(y33[3]));
    DlrtPool pe = make_pool(1, 4, 4, 3, 3, 3, 3, 1, 1, false, false);
    float ye[4];
    xn[5] = 0;
    dlrt_maxpool_forward(&pe, 1, xn, ye);
    CHECK(t, !isnan(ye[0]) && isnan(ye[3]));

    /* a NaN in a plane of two bands (output rows 0-1021 and 1022-1029 of
     * 3x2 windows over 1030 rows of 6, padded by 1): input row 1022 is read
     * by both, which then go window by window, and row 1027 by the second
     * only; then the same NaNs under centred 3x3 windows (maxpool_same_plane) */
    float *xb = falloc(1030 * 6), *yb = falloc(1030 * 7);
    double *xbd = dalloc(1030 * 6), *want_b = dalloc(1030 * 7);
    for (int i = 0; i < 1030 * 6; i++)
        xb[i] = (float)((i * 37) % 101) - 50.0f, xbd[i] = xb[i];
    xb[1022 * 6 + 3] = xb[1027 * 6] = NAN;
    for (int centred = 0; centred < 2; centred++) {
        int kw = centred ? 3 : 2, ow = centred ? 6 : 7;
        DlrtPool pb = make_pool(1, 1030, 6, 3, kw, 1, 1, 1, 1, false, false);
        dlrt_maxpool_forward(&pb, 1, xb, yb);
        pool_ref(&pb, 1, true, xbd, want_b); /* without the NaNs */
        bool as_torch = true;
        for (int oy = 0; oy < 1030; oy++)
            for (int ox = 0; ox < ow; ox++) {
                /* the window's input columns: [ox - 1, ox - 1 + kw) */
                bool nan_window = (oy >= 1021 && oy <= 1023 && ox - 1 <= 3 && ox - 1 + kw > 3) ||
                                  (oy >= 1026 && oy <= 1028 && ox - 1 <= 0);
                float got = yb[oy * ow + ox];
                as_torch &= nan_window ? isnan(got) : got == (float)want_b[oy * ow + ox];
            }
        CHECK(t, as_torch);
    }
    free(xb), free(yb), free(xbd), free(want_b);

    /* padding never wins, even over negative values */
    DlrtPool pp = make_pool(1, 3, 3, 3, 3, 1, 1, 1, 1, false, false);
    float neg[9], yn[9], wantn[9];
    for (int i = 0; i < 9; i++) {
        neg[i] = -5.0f - (float)i;
        wantn[i] = 0; /* filled below */
    }
    /* the largest neighbour of each position, padding excluded */
    for (int oy = 0; oy < 3; oy++)
        for (int ox = 0; ox < 3; ox++) {
            int iy = oy > 0 ? oy - 1 : 0, ix = ox > 0 ? ox - 1 : 0;
            wantn[oy * 3 + ox] = neg[iy * 3 + ix];
        }
    dlrt_maxpool_forward(&pp, 1, neg, yn);
    CHECK_VALUES(t, "padding never wins a max", yn, wantn, 9, 0);

    /* a ceil-mode window hanging over the edge is clipped */
    DlrtPool pc = make_pool(1, 3, 3, 2, 2, 2, 2, 0, 0, true, false);
    CHECK(t, pc.oh == 2 && pc.ow == 2);
    float x3[] = {1, 2, 3, 4, 5, 6, 7, 8, -9}, y3[4], want3[] = {5, 6, 8, -9};
    dlrt_maxpool_forward(&pc, 1, x3, y3);
    CHECK_VALUES(t, "ceil-mode maxpool", y3, want3, 4, 0);
}

static void test_avgpool_by_hand(Tally *t) {
    float x[16], y[9], dx[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    /* 3x3, stride 2, padding 1 on 1..16 (values from torch.avg_pool2d) */
    DlrtPool p = make_pool(1, 4, 4, 3, 3, 2, 2, 1, 1, false, true);
    CHECK(t, p.oh == 2 && p.ow == 2);
    float in_pad[] = {14.0f / 9, 30.0f / 9, 57.0f / 9, 11};
    dlrt_avgpool_forward(&p, 1, x, y);
    CHECK_VALUES(t, "avgpool count_include_pad", y, in_pad, 4, 1e-7);
    p.count_include_pad = false;
    float no_pad[] = {3.5f, 5, 9.5f, 11};
    dlrt_avgpool_forward(&p, 1, x, y);
    CHECK_VALUES(t, "avgpool without count_include_pad", y, no_pad, 4, 1e-7);

    /* ceil mode: the last windows reach row and column 4 (padding, counted
     * with count_include_pad) and 5 (beyond the padded input, never
     * counted) */
    DlrtPool pc = make_pool(1, 4, 4, 3, 3, 2, 2, 1, 1, true, true);
    CHECK(t, pc.oh == 3 && pc.ow == 3);
    float ceil_pad[] = {14.0f / 9, 30.0f / 9, 2, 57.0f / 9, 11, 6, 4.5f, 7.5f, 4};
    dlrt_avgpool_forward(&pc, 1, x, y);
    CHECK_VALUES(t, "ceil-mode avgpool count_include_pad", y, ceil_pad, 9, 1e-7);
    pc.count_include_pad = false;
    float ceil_nopad[] = {3.5f, 5, 6, 9.5f, 11, 12, 13.5f, 15, 16};
    dlrt_avgpool_forward(&pc, 1, x, y);
    CHECK_VALUES(t, "ceil-mode avgpool without count_include_pad", y, ceil_nopad, 9, 1e-7);
    /* the corner window [3,3] alone takes all its gradient */
    float dy[9] = {0, 0, 0, 0, 0, 0, 0, 0, 1};
    dlrt_avgpool_backward(&pc, 1, dy, dx);
    CHECK(t, dx[15] == 1.0f && dx[10] == 0.0f && dx[0] == 0.0f);

    /* no padding, ceil mode: the last window holds one column, and
     * count_include_pad does not count the column beyond the input */
    float x5[25], y5[9];
    for (int i = 0; i < 25; i++)
        x5[i] = (float)(i + 1);
    DlrtPool p5 = make_pool(1, 5, 5, 2, 2, 2, 2, 0, 0, true, true);
    CHECK(t, p5.oh == 3 && p5.ow == 3);
    float want5[] = {4, 6, 7.5f, 14, 16, 17.5f, 21.5f, 23.5f, 25};
    dlrt_avgpool_forward(&p5, 1, x5, y5);
    CHECK_VALUES(t, "ceil-mode avgpool without padding", y5, want5, 9, 1e-7);
}

static void test_optimizers_by_hand(Tally *t) {
    float p = 1.0f, g = 0.5f;
    dlrt_sgd_update(1, &g, 0.1f, 0.0f, false, 0.0f, &p, NULL);
    CHECK(t, fabsf(p - 0.95f) < 1e-7f);

    /* momentum from a zeroed buffer: the first step is plain SGD */
    float pm = 1.0f, buf = 0.0f, one = 1.0f;
    dlrt_sgd_update(1, &one, 0.1f, 0.9f, false, 0.0f, &pm, &buf);
    CHECK(t, fabsf(pm - 0.9f) < 1e-6f && buf == 1.0f);
    dlrt_sgd_update(1, &one, 0.1f, 0.9f, false, 0.0f, &pm, &buf);
    CHECK(t, fabsf(pm - 0.71f) < 1e-6f && fabsf(buf - 1.9f) < 1e-6f);

    float pn = 1.0f, bn = 0.0f;
    dlrt_sgd_update(1, &one, 0.1f, 0.9f, true, 0.0f, &pn, &bn);
    CHECK(t, fabsf(pn - 0.81f) < 1e-6f);
    dlrt_sgd_update(1, &one, 0.1f, 0.9f, true, 0.0f, &pn, &bn);
    CHECK(t, fabsf(pn - 0.539f) < 1e-6f);

    float pw = 2.0f, zero = 0.0f;
    dlrt_sgd_update(1, &zero, 0.5f, 0.0f, false, 0.1f, &pw, NULL);
    CHECK(t, fabsf(pw - 1.9f) < 1e-6f);

    /* Adam's first step moves each weight by about lr */
    float pa[2] = {1.0f, 1.0f}, ga[2] = {0.3f, -2.0f}, m[2] = {0, 0}, v[2] = {0, 0};
    dlrt_adam_update(2, ga, 0.01f, 1, 0.9f, 0.999f, 1e-8f, 0.0f, pa, m, v);
    CHECK(t, fabsf(pa[0] - 0.99f) < 1e-6f && fabsf(pa[1] - 1.01f) < 1e-6f);
    CHECK(t, fabsf(m[0] - 0.03f) < 1e-7f && fabsf(v[1] - 0.004f) < 1e-7f);
    CHECK(t, ga[0] == 0.3f && ga[1] == -2.0f);
}

/* Multi-step SGD and Adam against the formulas of torch.optim, in double. */
static void test_optimizers_random(Tally *t, DlrtRng *rng) {
    enum { N = 37, STEPS = 5 };
    float p[N], g[N], buf[N], m[N], v[N];
    double pd[N], bd[N], md[N], vd[N];
    struct { float lr, mom, wd; bool nesterov; } sgd[] = {
        {0.1f, 0.0f, 0.0f, false}, {0.05f, 0.9f, 0.0f, false},
        {0.05f, 0.9f, 0.0f, true}, {0.02f, 0.5f, 0.01f, true}, {0.3f, 0.0f, 0.1f, false}};
    for (size_t k = 0; k < sizeof sgd / sizeof sgd[0]; k++) {
        fill_random(rng, p, pd, N);
        for (int i = 0; i < N; i++)
            buf[i] = 0.0f, bd[i] = 0.0;
        for (int s = 0; s < STEPS; s++) {
            fill_random(rng, g, NULL, N);
            dlrt_sgd_update(N, g, sgd[k].lr, sgd[k].mom, sgd[k].nesterov, sgd[k].wd, p,
                            sgd[k].mom != 0.0f ? buf : NULL);
            for (int i = 0; i < N; i++) {
                double d = g[i] + (double)sgd[k].wd * pd[i];
                if (sgd[k].mom != 0.0f) {
                    bd[i] = (double)sgd[k].mom * bd[i] + d;
                    d = sgd[k].nesterov ? d + (double)sgd[k].mom * bd[i] : bd[i];
                }
                pd[i] -= (double)sgd[k].lr * d;
            }
        }
        CHECK_CLOSE(t, "sgd parameters", p, pd, N, 1e-6);
        if (sgd[k].mom != 0.0f)
            CHECK_CLOSE(t, "sgd momentum buffer", buf, bd, N, 1e-6);
    }
    struct { float lr, b1, b2, eps, wd; } adam[] = {
        {0.01f, 0.9f, 0.999f, 1e-8f, 0.0f}, {0.001f, 0.8f, 0.99f, 1e-6f, 0.05f}};
    for (size_t k = 0; k < sizeof adam / sizeof adam[0]; k++) {
        fill_random(rng, p, pd, N);
        for (int i = 0; i < N; i++)
            m[i] = v[i] = 0.0f, md[i] = vd[i] = 0.0;
        for (int s = 1; s <= STEPS; s++) {
            fill_random(rng, g, NULL, N);
            dlrt_adam_update(N, g, adam[k].lr, s, adam[k].b1, adam[k].b2, adam[k].eps,
                             adam[k].wd, p, m, v);
            double b1 = adam[k].b1, b2 = adam[k].b2;
            for (int i = 0; i < N; i++) {
                double d = g[i] + (double)adam[k].wd * pd[i];
                md[i] = b1 * md[i] + (1 - b1) * d;
                vd[i] = b2 * vd[i] + (1 - b2) * d * d;
                double mhat = md[i] / (1 - pow(b1, s)), vhat = vd[i] / (1 - pow(b2, s));
                pd[i] -= (double)adam[k].lr * mhat / (sqrt(vhat) + (double)adam[k].eps);
            }
        }
        CHECK_CLOSE(t, "adam parameters", p, pd, N, 1e-6);
        CHECK_CLOSE(t, "adam exp_avg", m, md, N, 1e-6);
        CHECK_CLOSE(t, "adam exp_avg_sq", v, vd, N, 1e-5);
    }
}

/* Gradient clipping by total norm: each gradient's sum of squares against
 * a sum in long double, the coefficient against clip_grad_norm_'s formula
 * in double (and its edge cases), the scaling bit for bit, and the three
 * together: gradients whose norm is above the largest come out with that
 * norm, those below it unchanged. */
static void test_clip(Tally *t, DlrtRng *rng) {
    enum { MAXCOUNT = 100003 };
    float *g = falloc(MAXCOUNT), *out = falloc(MAXCOUNT);
    fill_random(rng, g, NULL, MAXCOUNT);
    for (int64_t i = 0; i < MAXCOUNT; i += 7)
        g[i] *= 1000.0f; /* a wide range of magnitudes */
    static const int64_t counts[] = {0, 1, 7, 8, 9, 15, 17, 1000, MAXCOUNT};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        int64_t count = counts[ci];
        long double want = 0;
        for (int64_t i = 0; i < count; i++)
            want += (long double)g[i] * g[i];
        double got = dlrt_sum_squares(count, g);
        CHECK(t, count ? fabs(got - (double)want) <= 1e-14 * (double)want : got == 0);
        double *gd = dalloc(count);
        to_double(g, gd, count);
        CHECK(t, dlrt_sum_squares_f64(count, gd) == got); /* the same sums in the same order */
        free(gd);
    }

    /* the coefficient: clip / (norm + 1e-6), at most 1; 1 without clipping */
    static const struct { double sum; float clip; } coefs[] = {
        {4.0, 1.0f}, {1e6, 0.25f}, {2.5e-3, 5.0f}, {1e-20, 1e-9f}, {123.456, 11.0f}};
    for (size_t k = 0; k < sizeof coefs / sizeof *coefs; k++) {
        double want = coefs[k].clip / (sqrt(coefs[k].sum) + 1e-6);
        float got = dlrt_clip_coefficient(coefs[k].sum, coefs[k].clip);
        CHECK(t, want >= 1 ? got == 1.0f : fabs(got - want) <= 2e-7 * want);
        /* PyTorch's roundings: the reciprocal of the norm plus 1e-6, times clip */
        float norm = (float)sqrt(coefs[k].sum), torch = 1.0f / (norm + 1e-6f) * coefs[k].clip;
        CHECK(t, got == (torch > 1 ? 1.0f : torch));
        double got64 = dlrt_clip_coefficient_f64(coefs[k].sum, coefs[k].clip);
        CHECK(t, want >= 1 ? got64 == 1.0 : fabs(got64 - want) <= 1e-15 * want);
    }
    CHECK(t, dlrt_clip_coefficient(1e6, 0.0f) == 1.0f);       /* clip 0: no clipping */
    CHECK(t, dlrt_clip_coefficient(1e6, -1.0f) == 1.0f);
    CHECK(t, dlrt_clip_coefficient(0.0, 0.5f) == 1.0f);       /* zero gradients */
    CHECK(t, dlrt_clip_coefficient(INFINITY, 0.5f) == 0.0f);  /* as clamp(0.5 / inf) */
    CHECK(t, isnan(dlrt_clip_coefficient(NAN, 0.5f)));        /* clamp keeps a NaN */

    /* the scaling, out of place and in place; a coefficient of 1 copies */
    int64_t count = 1000;
    float c = 0.3f;
    dlrt_clip_scale(count, g, c, out);
    bool exact = true;
    for (int64_t i = 0; i < count; i++)
        exact &= out[i] == (float)((double)g[i] * (double)c); /* one rounding */
    CHECK(t, exact);
    float *held = falloc(count);
    memcpy(held, g, sizeof *held * (size_t)count);
    dlrt_clip_scale(count, held, c, held);
    CHECK(t, memcmp(held, out, sizeof *out * (size_t)count) == 0);
    memcpy(held, g, sizeof *held * (size_t)count);
    dlrt_clip_scale(count, held, 1.0f, held);
    CHECK(t, memcmp(held, g, sizeof *g * (size_t)count) == 0);
    dlrt_clip_scale(count, g, 1.0f, out);
    CHECK(t, memcmp(out, g, sizeof *g * (size_t)count) == 0);

    /* three gradients clipped together to norms 0.5 and 1e9 (no clipping) */
    static const int64_t sizes[3] = {3, 1000, 77};
    for (int k = 0; k < 2; k++) {
        float clip = k == 0 ? 0.5f : 1e9f;
        double sum = 0, before = 0;
        const float *grads[3] = {g, g + 3, g + 1003};
        for (int i = 0; i < 3; i++)
            sum += dlrt_sum_squares(sizes[i], grads[i]);
        float coef = dlrt_clip_coefficient(sum, clip);
        double after = 0;
        for (int i = 0; i < 3; i++) {
            dlrt_clip_scale(sizes[i], grads[i], coef, out);
            for (int64_t j = 0; j < sizes[i]; j++) {
                after += (double)out[j] * out[j];
                before += (double)grads[i][j] * grads[i][j];
            }
        }
        CHECK(t, k == 0 ? fabs(sqrt(after) - 0.5) <= 1e-6 : after == before);
    }
    free(held), free(g), free(out);
}

/* dlrt_dense_sgd_update against dlrt_dense_backward_weight and then
 * dlrt_sgd_update, over a few steps: at batch 1 the same values; at larger
 * batches within float rounding (the sums are reassociated).  The shapes
 * cover tiles of the weight that are cut short at both edges (the kernel's
 * tiles have at most 256 x 256 elements, in bands of rows a multiple of the
 * workers: 700 x 300 takes 2 x 2 tiles, 300 x 270 whole rows), and the
 * settings momentum with and without weight decay, and neither. */
static void test_dense_sgd_update(Tally *t, DlrtRng *rng) {
    struct { int64_t n, in, out; } shapes[] = {{1, 300, 270}, {3, 37, 5}, {16, 300, 270}, {64, 513, 20}, {8, 700, 300}};
    struct { float lr, mom, wd; } sgd[] = {{0.05f, 0.9f, 5e-4f}, {0.05f, 0.9f, 0.0f}, {0.1f, 0.0f, 0.01f}, {0.1f, 0.0f, 0.0f}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t k = 0; k < sizeof sgd / sizeof *sgd; k++) {
            int64_t n = shapes[s].n, in = shapes[s].in, out = shapes[s].out, count = in * out;
            float *dy = falloc(n * out), *x = falloc(n * in), *g = falloc(count);
            float *p = falloc(count), *buf = falloc(count), *p2 = falloc(count), *buf2 = falloc(count);
            fill_random(rng, p, NULL, count);
            memcpy(p2, p, sizeof *p * (size_t)count);
            for (int64_t i = 0; i < count; i++)
                buf[i] = buf2[i] = 0;
            float *b = sgd[k].mom != 0 ? buf : NULL, *b2 = sgd[k].mom != 0 ? buf2 : NULL;
            for (int step = 0; step < 3; step++) {
                fill_random(rng, dy, NULL, n * out);
                fill_random(rng, x, NULL, n * in);
                dlrt_dense_backward_weight(n, in, out, dy, x, g);
                dlrt_sgd_update(count, g, sgd[k].lr, sgd[k].mom, false, sgd[k].wd, p, b);
                dlrt_dense_sgd_update(n, in, out, dy, x, sgd[k].lr, sgd[k].mom, sgd[k].wd, p2, b2);
            }
            double tol = n == 1 ? 0 : 1e-6;
            CHECK_VALUES(t, "dense_sgd_update parameters", p2, p, count, tol);
            if (b)
                CHECK_VALUES(t, "dense_sgd_update momentum buffer", buf2, buf, count, n == 1 ? 0 : 1e-5);
            free(dy), free(x), free(g), free(p), free(buf), free(p2), free(buf2);
        }
}

/* dlrt_dense_adam_update against dlrt_dense_backward_weight and then
 * dlrt_adam_update, over three steps (the step count from 1): the same
 * gradient block by block, so the same values up to the sums' order.  The
 * shapes cut the kernel's 128 x 128 blocks short at both edges, at batch 1
 * (an outer product) and larger; with weight decay and without. */
static void test_dense_adam_update(Tally *t, DlrtRng *rng) {
    struct { int64_t n, in, out; } shapes[] = {{1, 300, 270}, {3, 37, 5}, {16, 300, 270}, {64, 129, 20}};
    float wds[] = {0.0f, 0.01f};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t k = 0; k < sizeof wds / sizeof *wds; k++) {
            int64_t n = shapes[s].n, in = shapes[s].in, out = shapes[s].out, count = in * out;
            float *dy = falloc(n * out), *x = falloc(n * in), *g = falloc(count);
            float *p = falloc(count), *m = falloc(count), *v = falloc(count);
            float *p2 = falloc(count), *m2 = falloc(count), *v2 = falloc(count);
            fill_random(rng, p, NULL, count);
            memcpy(p2, p, sizeof *p * (size_t)count);
            for (int64_t i = 0; i < count; i++)
                m[i] = v[i] = m2[i] = v2[i] = 0;
            for (int step = 1; step <= 3; step++) {
                fill_random(rng, dy, NULL, n * out);
                fill_random(rng, x, NULL, n * in);
                dlrt_dense_backward_weight(n, in, out, dy, x, g);
                dlrt_adam_update(count, g, 1e-3f, step, 0.9f, 0.999f, 1e-8f, wds[k], p, m, v);
                dlrt_dense_adam_update(n, in, out, dy, x, 1e-3f, step, 0.9f, 0.999f, 1e-8f,
                                       wds[k], p2, m2, v2);
            }
            CHECK_VALUES(t, "dense_adam_update parameters", p2, p, count, 1e-6);
            CHECK_VALUES(t, "dense_adam_update exp_avg", m2, m, count, 1e-5);
            CHECK_VALUES(t, "dense_adam_update exp_avg_sq", v2, v, count, 1e-5);
            free(dy), free(x), free(g), free(p), free(m), free(v), free(p2), free(m2), free(v2);
        }
}

/* ------------------------------------------------------------------------ */
/* Convolution against the reference and finite differences                 */
/* ------------------------------------------------------------------------ */

typedef struct ConvCtx {
    const DlrtConv *cv;
    int64_t n;
    double *x, *w, *b, *dy, *y;      /* the reference's inputs and output */
    float *xf, *wf, *dyf, *yf, *work; /* the kernel's */
} ConvCtx;

static double conv_loss_ref(void *ctx) {
    ConvCtx *c = ctx;
    conv_ref(c->cv, c->n, c->x, c->w, c->b, c->y);
    return dot(c->dy, c->y, c->n * c->cv->f * c->cv->oh * c->cv->ow);
}

static double conv_loss_f32(void *ctx) {
    ConvCtx *c = ctx;
    int64_t ny = c->n * c->cv->f * c->cv->oh * c->cv->ow;
    dlrt_conv2d_forward(c->cv, c->n, c->xf, c->wf, NULL, c->yf, c->work, dlrt_threads());
    double s = 0.0;
    for (int64_t i = 0; i < ny; i++)
        s += c->dy[i] * c->yf[i];
    return s;
}

static void test_conv_case(Tally *t, DlrtRng *rng, int64_t n, int64_t c, int64_t h, int64_t w,
                           int64_t f, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                           int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups) {
    DlrtConv cv = {.c = c, .h = h, .w = w, .f = f, .kh = kh, .kw = kw, .sh = sh, .sw = sw,
                   .ph = ph, .pw = pw, .dh = dh, .dw = dw, .groups = groups};
    cv.oh = conv_out(h, kh, sh, ph, dh);
    cv.ow = conv_out(w, kw, sw, pw, dw);
    int64_t nx = n * c * h * w, nw = f * (c / groups) * kh * kw, ny = n * f * cv.oh * cv.ow;
    ConvCtx ctx = {.cv = &cv, .n = n};
    ctx.xf = falloc(nx), ctx.wf = falloc(nw), ctx.dyf = falloc(ny), ctx.yf = falloc(ny);
    ctx.x = dalloc(nx), ctx.w = dalloc(nw), ctx.b = dalloc(f), ctx.dy = dalloc(ny);
    ctx.y = dalloc(ny);
    ctx.work = falloc(dlrt_conv2d_workspace(&cv, dlrt_threads()));
    float *bf = falloc(f), *dx = falloc(nx), *dwt = falloc(nw), *db = falloc(f);
    double *want = dalloc(nx > nw ? nx : nw);
    fill_random(rng, ctx.xf, ctx.x, nx);
    fill_random(rng, ctx.wf, ctx.w, nw);
    fill_random(rng, bf, ctx.b, f);
    fill_random(rng, ctx.dyf, ctx.dy, ny);
    char what[160];
    int len = snprintf(what, sizeof what,
                       "conv n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " f%" PRId64
                       " k%" PRId64 "x%" PRId64 " s%" PRId64 ",%" PRId64 " p%" PRId64
                       ",%" PRId64 " d%" PRId64 ",%" PRId64 " g%" PRId64 ": ",
                       n, c, h, w, f, kh, kw, sh, sw, ph, pw, dh, dw, groups);
    char *tail = what + len;
    size_t room = sizeof what - (size_t)len;

    /* each fused activation: the bits of the convolution and then the
     * activation's own kernel */
    for (DlrtActivation act = DLRT_ACT_RELU; act <= DLRT_ACT_ELU; act++) {
        float *fused = falloc(ny);
        DlrtConv with = cv;
        with.act = act;
        with.slope = 0.1f; /* as generated code writes it: the float's value */
        with.alpha = 0.7f;
        dlrt_conv2d_forward(&cv, n, ctx.xf, ctx.wf, bf, ctx.yf, ctx.work, dlrt_threads());
        dlrt_conv2d_forward(&with, n, ctx.xf, ctx.wf, bf, fused, ctx.work, dlrt_threads());
        if (act == DLRT_ACT_RELU)
            dlrt_relu_forward(ny, ctx.yf, ctx.yf);
        else if (act == DLRT_ACT_SIGMOID)
            dlrt_sigmoid_forward(ny, ctx.yf, ctx.yf);
        else if (act == DLRT_ACT_TANH)
            dlrt_tanh_forward(ny, ctx.yf, ctx.yf);
        else if (act == DLRT_ACT_ELU)
            dlrt_elu_forward(ny, 0.7f, ctx.yf, ctx.yf);
        else
            dlrt_leaky_relu_forward(ny, 0.1f, ctx.yf, ctx.yf);
        snprintf(tail, room, "forward with fused activation %d", (int)act);
        CHECK(t, memcmp(fused, ctx.yf, sizeof *fused * (size_t)ny) == 0);
        free(fused);
    }

    dlrt_conv2d_forward(&cv, n, ctx.xf, ctx.wf, bf, ctx.yf, ctx.work, dlrt_threads());
    conv_ref(&cv, n, ctx.x, ctx.w, ctx.b, ctx.y);
    snprintf(tail, room, "forward");
    CHECK_CLOSE(t, what, ctx.yf, ctx.y, ny, 1e-5);

    double *b = ctx.b;
    ctx.b = NULL;
    dlrt_conv2d_backward_input(&cv, n, ctx.dyf, ctx.wf, NULL, dx, ctx.work, dlrt_threads());
    {
        float *relu_y = falloc(nx), *fused = falloc(nx), *plain = falloc(nx);
        fill_relu_result(rng, relu_y, nx);
        memcpy(plain, dx, sizeof *dx * (size_t)nx);
        dlrt_conv2d_backward_input(&cv, n, ctx.dyf, ctx.wf, relu_y, fused, ctx.work,
                                   dlrt_threads());
        snprintf(tail, room, "backward input with relu_grad");
        CHECK(t, same_as_relu_backward(fused, plain, relu_y, nx));
        free(relu_y), free(fused), free(plain);
    }
    fd_grad(conv_loss_ref, &ctx, ctx.x, nx, 1e-3, want);
    snprintf(tail, room, "backward input vs double differences");
    CHECK_CLOSE(t, what, dx, want, nx, 1e-4);
    fd_grad_f32(conv_loss_f32, &ctx, ctx.xf, nx, 0.5f, want);
    snprintf(tail, room, "backward input vs f32 differences");
    CHECK_CLOSE(t, what, dx, want, nx, 1e-3);

    dlrt_conv2d_backward_weight(&cv, n, ctx.dyf, ctx.xf, dwt, ctx.work, dlrt_threads());
    fd_grad(conv_loss_ref, &ctx, ctx.w, nw, 1e-3, want);
    snprintf(tail, room, "backward weight vs double differences");
    CHECK_CLOSE(t, what, dwt, want, nw, 1e-4);
    fd_grad_f32(conv_loss_f32, &ctx, ctx.wf, nw, 0.5f, want);
    snprintf(tail, room, "backward weight vs f32 differences");
    CHECK_CLOSE(t, what, dwt, want, nw, 1e-3);

    ctx.b = b;
    dlrt_bias_backward(n, f, cv.oh * cv.ow, ctx.dyf, db);
    fd_grad(conv_loss_ref, &ctx, ctx.b, f, 1e-3, want);
    snprintf(tail, room, "bias backward vs double differences");
    CHECK_CLOSE(t, what, db, want, f, 1e-4);

    free(ctx.xf), free(ctx.wf), free(ctx.dyf), free(ctx.yf), free(ctx.work);
    free(ctx.x), free(ctx.w), free(ctx.b), free(ctx.dy), free(ctx.y);
    free(bf), free(dx), free(dwt), free(db), free(want);
}

static void test_conv(Tally *t, DlrtRng *rng) {
    /*                      n  c  h  w  f  kh kw sh sw ph pw dh dw groups */
    test_conv_case(t, rng, 1, 3, 5, 5, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1); /* pointwise */
    test_conv_case(t, rng, 2, 4, 3, 3, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2); /* pointwise, groups */
    test_conv_case(t, rng, 2, 3, 5, 6, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1); /* 1x1 strided */
    test_conv_case(t, rng, 1, 2, 4, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1); /* 1x1 padded */
    test_conv_case(t, rng, 2, 2, 6, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    test_conv_case(t, rng, 1, 4, 7, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2); /* groups 2 */
    test_conv_case(t, rng, 2, 4, 7, 6, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4); /* depthwise, dilated */
    test_conv_case(t, rng, 2, 2, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2); /* channel multiplier 2 */
    test_conv_case(t, rng, 3, 2, 7, 9, 4, 3, 5, 2, 1, 1, 2, 1, 2, 2); /* rectangular */
    test_conv_case(t, rng, 1, 1, 5, 5, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1); /* 5x5 */
    test_conv_case(t, rng, 2, 6, 5, 4, 3, 2, 3, 1, 2, 0, 1, 2, 1, 3); /* groups 3 */
    test_conv_case(t, rng, 1, 2, 2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1); /* kernel > input */
    test_conv_case(t, rng, 3, 3, 9, 7, 2, 5, 3, 2, 2, 2, 1, 1, 1, 1); /* odd sizes */
    test_conv_case(t, rng, 1, 1, 6, 6, 1, 3, 3, 3, 3, 0, 0, 1, 1, 1); /* stride = kernel */
    /* large enough to be split among threads (dlrt_threads() > 1): five
     * samples over the workers, partial weight gradients summed */
    test_conv_case(t, rng, 5, 4, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2);
    /* one sample, a wide plane and many filters on a small plane: below
     * CONV_INSIDE_MIN_WORK, so on one worker (test_conv_large has the
     * samples the workers share) */
    test_conv_case(t, rng, 1, 2, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1);
    test_conv_case(t, rng, 1, 4, 4, 4, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1);
}

/* The forward convolution of one sample large enough for the workers to
 * share it (conv.inc's CONV_INSIDE_MIN_WORK, 2^18 multiply-adds, with
 * dlrt_threads() > 1), and of two samples, one a worker: with its bias or
 * folded batchnorm and its ReLU, the product by blocks of columns (a wide
 * plane) and by rows (many filters on a small plane, pointwise or not).
 * The wide plane's im2col matrix (144 rows of 4096 columns, 2.4 MB) is
 * built and multiplied in 10 bands of 7 output rows (conv.inc's
 * conv_band_rows), the workers taking whole bands; the others in one
 * piece, the workers sharing its channels, as is GoogLeNet's 3x3 on 7x7
 * (1440 rows of 49 columns, which bands would cut too thin).  The input
 * and weight gradients are checked against the same kernels on one
 * worker: finite differences over millions of multiply-adds would take
 * minutes. */
static void test_conv_large(Tally *t, DlrtRng *rng) {
    /*                      n  c   h   w   f    k */
    int64_t cases[][6] = {{1, 16, 64, 64, 32, 3}, {1, 64, 8, 8, 256, 3}, {1, 160, 7, 7, 320, 3},
                          {1, 512, 7, 7, 256, 1}, {2, 16, 64, 64, 32, 3}, {2, 64, 8, 8, 256, 3}};
    for (int i = 0; i < 6; i++) {
        int64_t n = cases[i][0], c = cases[i][1], h = cases[i][2], w = cases[i][3];
        int64_t f = cases[i][4], k = cases[i][5], pad = k / 2, plane = h * w;
        DlrtConv cv = {.c = c, .h = h, .w = w, .f = f, .kh = k, .kw = k, .sh = 1, .sw = 1,
                       .ph = pad, .pw = pad, .dh = 1, .dw = 1, .groups = 1,
                       .oh = h, .ow = w, .act = DLRT_ACT_RELU};
        int64_t nx = n * c * plane, nw = f * c * k * k, ny = n * f * plane;
        float *xf = falloc(nx), *wf = falloc(nw), *bf = falloc(f), *scale = falloc(f);
        float *y = falloc(ny), *work = falloc(dlrt_conv2d_workspace(&cv, dlrt_threads()));
        double *x = dalloc(nx), *wd = dalloc(nw), *b = dalloc(f), *sc = dalloc(f);
        double *want = dalloc(ny), *zero = dalloc(f);
        fill_random(rng, xf, x, nx);
        fill_random(rng, wf, wd, nw);
        fill_random(rng, bf, b, f);
        fill_random(rng, scale, sc, f);
        memset(zero, 0, sizeof *zero * (size_t)f);
        char what[112];
        int len = snprintf(what, sizeof what,
                           "conv n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " f%" PRId64
                           " k%" PRId64 ": ", n, c, h, w, f, k);
        snprintf(what + len, sizeof what - (size_t)len, "bias and ReLU");
        dlrt_conv2d_forward(&cv, n, xf, wf, bf, y, work, dlrt_threads());
        conv_ref(&cv, n, x, wd, b, want);
        for (int64_t j = 0; j < ny; j++)
            want[j] = want[j] > 0 ? want[j] : 0;
        CHECK_CLOSE(t, what, y, want, ny, 1e-5);
        snprintf(what + len, sizeof what - (size_t)len, "folded batchnorm and ReLU");
        dlrt_conv2d_forward_folded(&cv, n, xf, wf, scale, bf, y, work, dlrt_threads());
        conv_ref(&cv, n, x, wd, zero, want);
        for (int64_t j = 0; j < ny; j++) {
            int64_t ch = j / plane % f;
            double v = want[j] * sc[ch] + b[ch];
            want[j] = v > 0 ? v : 0;
        }
        CHECK_CLOSE(t, what, y, want, ny, 1e-5);
        /* the gradients, whose reference is the same kernels on one worker
           (the forward one just checked against conv_ref) */
        float *dyf = falloc(ny), *dx = falloc(nx), *dw = falloc(nw);
        double *dy = dalloc(ny), *dx1 = dalloc(nx), *dw1 = dalloc(nw);
        fill_random(rng, dyf, dy, ny);
        dlrt_conv2d_backward_input(&cv, n, dyf, wf, NULL, dx, work, 1);
        dlrt_conv2d_backward_weight(&cv, n, dyf, xf, dw, work, 1);
        for (int64_t j = 0; j < nx; j++)
            dx1[j] = dx[j];
        for (int64_t j = 0; j < nw; j++)
            dw1[j] = dw[j];
        dlrt_conv2d_backward_input(&cv, n, dyf, wf, NULL, dx, work, dlrt_threads());
        dlrt_conv2d_backward_weight(&cv, n, dyf, xf, dw, work, dlrt_threads());
        snprintf(what + len, sizeof what - (size_t)len, "input gradient, all workers vs one");
        CHECK_CLOSE(t, what, dx, dx1, nx, 1e-5);
        snprintf(what + len, sizeof what - (size_t)len, "weight gradient, all workers vs one");
        CHECK_CLOSE(t, what, dw, dw1, nw, 1e-5);
        free(dyf), free(dx), free(dw), free(dy), free(dx1), free(dw1);
        free(xf), free(wf), free(bf), free(scale), free(y), free(work);
        free(x), free(wd), free(b), free(sc), free(want), free(zero);
    }
}

/* ------------------------------------------------------------------------ */
/* Dense and bias                                                           */
/* ------------------------------------------------------------------------ */

typedef struct DenseCtx {
    int64_t n, in, out;
    double *x, *w, *b, *dy;
} DenseCtx;

static double dense_loss_ref(void *ctx) {
    DenseCtx *c = ctx;
    double s = 0.0;
    for (int64_t i = 0; i < c->n; i++)
        for (int64_t o = 0; o < c->out; o++)
            s += c->dy[i * c->out + o] * (c->b[o] + dot(c->x + i * c->in, c->w + o * c->in, c->in));
    return s;
}

static void test_dense_case(Tally *t, DlrtRng *rng, int64_t n, int64_t in, int64_t out) {
    DenseCtx ctx = {.n = n, .in = in, .out = out};
    float *x = falloc(n * in), *w = falloc(out * in), *b = falloc(out), *dy = falloc(n * out);
    float *y = falloc(n * out), *dx = falloc(n * in), *dw = falloc(out * in), *db = falloc(out);
    ctx.x = dalloc(n * in), ctx.w = dalloc(out * in), ctx.b = dalloc(out);
    ctx.dy = dalloc(n * out);
    double *want = dalloc(n * out + n * in + out * in), *relu_want = dalloc(n * out);
    fill_random(rng, x, ctx.x, n * in);
    fill_random(rng, w, ctx.w, out * in);
    fill_random(rng, b, ctx.b, out);
    fill_random(rng, dy, ctx.dy, n * out);

    dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, y);
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++)
            want[i * out + o] = ctx.b[o] + dot(ctx.x + i * in, ctx.w + o * in, in);
    CHECK_CLOSE(t, "dense forward", y, want, n * out, 1e-5);
    dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_RELU, 0, y);
    for (int64_t i = 0; i < n * out; i++)
        relu_want[i] = want[i] < 0 ? 0 : want[i];
    CHECK_CLOSE(t, "dense forward with relu", y, relu_want, n * out, 1e-5);
    /* a fused sigmoid, tanh or leaky ReLU: the bits of the dense layer and then the
     * activation's own kernel */
    {
        float *plain = falloc(n * out), *fused = falloc(n * out);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, plain);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_SIGMOID, 0, fused);
        dlrt_sigmoid_forward(n * out, plain, plain);
        CHECK(t, memcmp(fused, plain, sizeof *plain * (size_t)(n * out)) == 0);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, plain);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_TANH, 0, fused);
        dlrt_tanh_forward(n * out, plain, plain);
        CHECK(t, memcmp(fused, plain, sizeof *plain * (size_t)(n * out)) == 0);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, plain);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_LEAKY_RELU, 0.2f, fused);
        dlrt_leaky_relu_forward(n * out, 0.2f, plain, plain);
        CHECK(t, memcmp(fused, plain, sizeof *plain * (size_t)(n * out)) == 0);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, plain);
        dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_ELU, 1.5f, fused);
        dlrt_elu_forward(n * out, 1.5f, plain, plain);
        CHECK(t, memcmp(fused, plain, sizeof *plain * (size_t)(n * out)) == 0);
        free(plain), free(fused);
    }
    dlrt_dense_forward(n, in, out, x, w, NULL, DLRT_ACT_NONE, 0, y);
    for (int64_t i = 0; i < n * out; i++)
        want[i] -= ctx.b[i % out];
    CHECK_CLOSE(t, "dense forward without bias", y, want, n * out, 1e-5);

    dlrt_dense_backward_input(n, in, out, dy, w, NULL, dx);
    {
        float *relu_y = falloc(n * in), *fused = falloc(n * in), *plain = falloc(n * in);
        fill_relu_result(rng, relu_y, n * in);
        memcpy(plain, dx, sizeof *dx * (size_t)(n * in));
        dlrt_dense_backward_input(n, in, out, dy, w, relu_y, fused);
        CHECK(t, same_as_relu_backward(fused, plain, relu_y, n * in));
        free(relu_y), free(fused), free(plain);
    }
    fd_grad(dense_loss_ref, &ctx, ctx.x, n * in, 1e-3, want);
    CHECK_CLOSE(t, "dense backward input", dx, want, n * in, 1e-4);
    dlrt_dense_backward_weight(n, in, out, dy, x, dw);
    fd_grad(dense_loss_ref, &ctx, ctx.w, out * in, 1e-3, want);
    CHECK_CLOSE(t, "dense backward weight", dw, want, out * in, 1e-4);
    dlrt_bias_backward(n, out, 1, dy, db);
    fd_grad(dense_loss_ref, &ctx, ctx.b, out, 1e-3, want);
    CHECK_CLOSE(t, "dense bias backward", db, want, out, 1e-4);

    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(ctx.x), free(ctx.w), free(ctx.b), free(ctx.dy), free(want), free(relu_want);
}

static void test_dense(Tally *t, DlrtRng *rng) {
    test_dense_case(t, rng, 1, 5, 3);
    test_dense_case(t, rng, 4, 7, 9);
    test_dense_case(t, rng, 3, 1, 1);
    test_dense_case(t, rng, 2, 33, 17);
    /* enough samples and work for two workers to split the batch
       (dense_split): blocks of 16 and 24 rows; and too few features to
       split them, which the batch still is */
    test_dense_case(t, rng, 40, 64, 40);
    test_dense_case(t, rng, 40, 9, 200);

    /* an empty batch: dw and db are sums over nothing */
    float dw[6], db[3], x[1] = {0}, dy[1] = {0}, wt[6] = {1, 2, 3, 4, 5, 6}, y[1];
    float zeros[6] = {0};
    dlrt_dense_backward_weight(0, 2, 3, dy, x, dw);
    CHECK_VALUES(t, "dense backward weight, empty batch", dw, zeros, 6, 0);
    dlrt_bias_backward(0, 3, 1, dy, db);
    CHECK_VALUES(t, "bias backward, empty batch", db, zeros, 3, 0);
    dlrt_dense_forward(0, 2, 3, x, wt, NULL, DLRT_ACT_NONE, 0, y);
    CHECK(t, true); /* reached without a BLAS complaint */
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct PoolCtx {
    const DlrtPool *p;
    int64_t n;
    bool max;
    double *x, *dy, *y;
} PoolCtx;

static double pool_loss_ref(void *ctx) {
    PoolCtx *c = ctx;
    pool_ref(c->p, c->n, c->max, c->x, c->y);
    return dot(c->dy, c->y, c->n * c->p->c * c->p->oh * c->p->ow);
}

static void test_pool_case(Tally *t, DlrtRng *rng, int64_t n, int64_t c, int64_t h, int64_t w,
                           int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                           int64_t pw, bool ceil_mode) {
    for (int kind = 0; kind < 3; kind++) {
        bool max = kind == 0, cip = kind == 1;
        DlrtPool p = make_pool(c, h, w, kh, kw, sh, sw, ph, pw, ceil_mode, cip);
        int64_t nx = n * c * h * w, ny = n * c * p.oh * p.ow;
        PoolCtx ctx = {.p = &p, .n = n, .max = max};
        float *x = falloc(nx), *dy = falloc(ny), *y = falloc(ny), *dx = falloc(nx);
        ctx.x = dalloc(nx), ctx.dy = dalloc(ny), ctx.y = dalloc(ny);
        double *want = dalloc(nx);
        fill_random(rng, x, ctx.x, nx);
        fill_random(rng, dy, ctx.dy, ny);
        char what[160];
        int len = snprintf(what, sizeof what,
                           "%s n%" PRId64 " %" PRId64 "x%" PRId64 " k%" PRId64 "x%" PRId64
                           " s%" PRId64 ",%" PRId64 " p%" PRId64 ",%" PRId64 "%s: ",
                           max ? "maxpool" : cip ? "avgpool(count_include_pad)" : "avgpool",
                           n, h, w, kh, kw, sh, sw, ph, pw, ceil_mode ? " ceil" : "");
        char *tail = what + len;
        size_t room = sizeof what - (size_t)len;
        if (max)
            dlrt_maxpool_forward(&p, n, x, y);
        else
            dlrt_avgpool_forward(&p, n, x, y);
        /* an average's rounding error scales with its terms' magnitudes:
           the largest average of |x| is the least scale of its error */
        double *magnitude = dalloc(nx), least = 1e-6;
        for (int64_t i = 0; i < nx; i++)
            magnitude[i] = fabs(ctx.x[i]);
        pool_ref(&p, n, max, magnitude, ctx.y);
        for (int64_t i = 0; i < ny; i++)
            least = fmax(least, ctx.y[i]);
        free(magnitude);
        pool_ref(&p, n, max, ctx.x, ctx.y);
        snprintf(tail, room, "forward");
        CHECK_CLOSE_TO(t, what, y, ctx.y, ny, 1e-6, least);
        if (max)
            dlrt_maxpool_backward(&p, n, dy, x, dx);
        else
            dlrt_avgpool_backward(&p, n, dy, dx);
        /* a small step: no perturbation changes which value is largest */
        fd_grad(pool_loss_ref, &ctx, ctx.x, nx, 1e-7, want);
        snprintf(tail, room, "backward");
        CHECK_CLOSE(t, what, dx, want, nx, 1e-4);
        if (max) { /* relu_grad: the same, zero where x <= 0, the same bits */
            float *masked = falloc(nx);
            p.relu_grad = true;
            dlrt_maxpool_backward(&p, n, dy, x, masked);
            bool same = true;
            for (int64_t i = 0; i < nx; i++)
                same &= memcmp(&masked[i], x[i] > 0 ? &dx[i] : &(float){0}, sizeof(float)) == 0;
            snprintf(tail, room, "backward with relu_grad");
            CHECK(t, same);
            free(masked);
        }
        free(x), free(dy), free(y), free(dx), free(ctx.x), free(ctx.dy), free(ctx.y);
        free(want);
    }
}

static void test_pool(Tally *t, DlrtRng *rng) {
    /*                      n  c  h  w  kh kw sh sw ph pw ceil */
    test_pool_case(t, rng, 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 2, 3, 8, 6, 2, 2, 2, 2, 0, 0, false);
    /* 2x2 tiling planes in runs of row pairs across planes (120 pairs of 28
     * columns: 7 runs of 18 pairs, the last short), and rows too wide for a
     * run (the general loop) */
    test_pool_case(t, rng, 2, 6, 20, 28, 2, 2, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 1, 1, 4, 516, 2, 2, 2, 2, 0, 0, false);
    /* rows of 8, 16 and 18 columns: copy_row's whole and overlapping
     * copies of 8 */
    test_pool_case(t, rng, 1, 2, 4, 8, 2, 2, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 1, 2, 6, 16, 2, 2, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 1, 2, 4, 18, 2, 2, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 2, 3, 5, 5, 3, 3, 2, 2, 1, 1, false);
    test_pool_case(t, rng, 2, 3, 5, 5, 3, 3, 2, 2, 1, 1, true);
    test_pool_case(t, rng, 1, 2, 6, 5, 3, 2, 2, 1, 1, 0, true);
    test_pool_case(t, rng, 3, 1, 5, 5, 2, 2, 2, 2, 0, 0, true);
    test_pool_case(t, rng, 1, 2, 7, 8, 3, 3, 3, 3, 1, 1, true);
    test_pool_case(t, rng, 2, 1, 3, 3, 1, 1, 1, 1, 0, 0, false);
    test_pool_case(t, rng, 1, 2, 6, 6, 4, 4, 3, 3, 2, 2, true);
    test_pool_case(t, rng, 2, 2, 7, 6, 3, 2, 1, 2, 1, 1, false);
    /* windows centred at stride 1 (pool.inc's maxpool_same_plane): 5x5 and
     * 7x3, planes narrower and shorter than the window's reach (the loops
     * across fixed up in every column), a 1x1 plane, 3x3 windows over one
     * column and over two rows, 1x1 windows */
    test_pool_case(t, rng, 2, 3, 6, 7, 5, 5, 1, 1, 2, 2, false);
    test_pool_case(t, rng, 1, 2, 9, 4, 7, 3, 1, 1, 3, 1, false);
    test_pool_case(t, rng, 1, 2, 2, 3, 5, 7, 1, 1, 2, 3, false);
    test_pool_case(t, rng, 2, 2, 1, 1, 3, 3, 1, 1, 1, 1, true);
    test_pool_case(t, rng, 1, 2, 5, 1, 3, 3, 1, 1, 1, 1, false);
    test_pool_case(t, rng, 1, 1, 2, 6, 3, 3, 1, 1, 1, 1, false);
    test_pool_case(t, rng, 1, 2, 3, 5, 1, 1, 1, 1, 0, 0, false);
    /* unpadded windows a stride of 2 or 3 apart reaching into the next
     * (pool.inc's maxpool_strided_plane): GoogLeNet's 3x3 stride 2 in
     * ceil mode (each row's last window clipped), AlexNet's without, odd
     * sizes, 5x4 and 6x6 windows of stride 3, 1x3 windows */
    test_pool_case(t, rng, 1, 3, 14, 14, 3, 3, 2, 2, 0, 0, true);
    test_pool_case(t, rng, 2, 2, 13, 15, 3, 3, 2, 2, 0, 0, true);
    test_pool_case(t, rng, 1, 1, 55, 55, 3, 3, 2, 2, 0, 0, false);
    test_pool_case(t, rng, 1, 2, 11, 12, 5, 4, 3, 3, 0, 0, true);
    test_pool_case(t, rng, 1, 1, 12, 12, 6, 6, 3, 3, 0, 0, false);
    test_pool_case(t, rng, 1, 2, 7, 9, 1, 3, 2, 2, 0, 0, true);
    /* GoogLeNet's: 3x3 stride 1 padded (inner columns and clipped borders),
     * 3x3 stride 2 in ceil mode; and stride 2 padded */
    test_pool_case(t, rng, 2, 3, 9, 11, 3, 3, 1, 1, 1, 1, true);
    test_pool_case(t, rng, 1, 2, 12, 12, 3, 3, 2, 2, 0, 0, true);
    test_pool_case(t, rng, 1, 2, 10, 9, 3, 3, 2, 2, 1, 1, false);
    /* wide rows, at strides 1, 2 and 3, padded and clipped by ceil mode
     * at both ends; windows of 100 and 600 columns (small planes: the
     * finite differences take most of this test's time under the
     * sanitizers) */
    test_pool_case(t, rng, 1, 1, 2, 530, 3, 3, 1, 1, 1, 1, false);
    test_pool_case(t, rng, 1, 1, 2, 1031, 3, 3, 2, 2, 0, 0, true);
    test_pool_case(t, rng, 1, 1, 2, 1030, 2, 5, 1, 3, 0, 2, false);
    test_pool_case(t, rng, 1, 1, 1, 530, 1, 100, 1, 1, 0, 0, false);
    test_pool_case(t, rng, 1, 1, 2, 1031, 2, 3, 2, 2, 1, 1, true);
    test_pool_case(t, rng, 1, 1, 1, 700, 1, 600, 1, 50, 0, 0, true);
    /* max pooling's bands (pool.inc's MAXPOOL_BAND, 8192 elements of
     * padded rows): planes of two bands at strides 1 and 2, and rows too
     * wide for one band of 3x3 windows (2802 padded columns), window by
     * window.  The forward kernel only: the bands are its own, and finite
     * differences over these planes took minutes under the sanitizers. */
    int64_t banded[][10] = {{2, 1030, 6, 3, 3, 1, 1, 1, 1, 0}, {1, 1200, 5, 3, 3, 2, 2, 1, 1, 1},
                            {1, 2, 2800, 3, 3, 1, 1, 1, 1, 0}};
    for (int i = 0; i < 3; i++) {
        const int64_t *b = banded[i];
        DlrtPool p = make_pool(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], false);
        int64_t nx = p.c * p.h * p.w, ny = p.c * p.oh * p.ow;
        float *x = falloc(nx), *y = falloc(ny);
        double *xd = dalloc(nx), *want = dalloc(ny);
        fill_random(rng, x, xd, nx);
        dlrt_maxpool_forward(&p, 1, x, y);
        pool_ref(&p, 1, true, xd, want);
        CHECK_CLOSE(t, "maxpool forward in bands", y, want, ny, 0);
        free(x), free(y), free(xd), free(want);
    }

    /* 2x2 windows of stride 2 (their own loop): ties go to the first
     * maximum in row-major order, a plane with a NaN to the NaN; with
     * relu_grad a window whose maximum is not positive passes nothing */
    DlrtPool p = make_pool(1, 4, 4, 2, 2, 2, 2, 0, 0, false, false);
    const float x[16] = {1, 1, 0, -1, 1, 1, -1, -1, /* all tied; a maximum of 0 */
                         2, 3, 0, 0, 3, 3, 0, 0};   /* the first 3 of three; all 0 */
    const float dy[4] = {10, 20, 30, 40};
    const float want[16] = {10, 0, 20, 0, 0, 0, 0, 0, 0, 30, 40, 0, 0, 0, 0, 0};
    const float want_relu[16] = {10, 0, 0, 0, 0, 0, 0, 0, 0, 30, 0, 0, 0, 0, 0, 0};
    float dx[16];
    dlrt_maxpool_backward(&p, 1, dy, x, dx);
    CHECK(t, memcmp(dx, want, sizeof dx) == 0);
    p.relu_grad = true;
    dlrt_maxpool_backward(&p, 1, dy, x, dx);
    CHECK(t, memcmp(dx, want_relu, sizeof dx) == 0);
    float xn[16];
    memcpy(xn, x, sizeof xn);
    xn[5] = NAN; /* the first window's maximum is now the NaN */
    p.relu_grad = false;
    dlrt_maxpool_backward(&p, 1, dy, xn, dx);
    CHECK(t, dx[0] == 0 && dx[5] == 10 && dx[2] == 20);
    /* a NaN in one plane of a batch: the other planes' gradients as without */
    float x2[32], dy2[8], dx2[32];
    memcpy(x2, x, sizeof x), memcpy(x2 + 16, xn, sizeof xn);
    memcpy(dy2, dy, sizeof dy), memcpy(dy2 + 4, dy, sizeof dy);
    dlrt_maxpool_backward(&p, 2, dy2, x2, dx2);
    CHECK(t, memcmp(dx2, want, sizeof want) == 0 && dx2[16] == 0 && dx2[21] == 10);
}

/* Max pooling's forward with every band of output rows the tile pass may
 * choose (DlrtPool.band): whole planes (the output's rows or more), bands
 * of any size down to one row, and 0 (libdlrt's own choice), for the
 * geometries of each of its loops: centred 3x3 and 5x5 windows, windows a
 * stride apart, ResNet's padded stride 2 with a band ending short of the
 * plane, 2x2 windows tiling the plane.  A maximum is exact, so every band
 * must give the reference's values, and the same bits as band 0; and so
 * with a NaN in the last plane (which a band hands to the window-by-window
 * scan), against band 0, whose NaN rule test_maxpool_special_values and
 * the torch cases check. */
static void test_maxpool_bands(Tally *t, DlrtRng *rng) {
    static const int64_t geometry[][8] = {
        /* h   w  kh kw sh sw ph pw */
        {11, 9, 3, 3, 1, 1, 1, 1}, {12, 10, 5, 5, 1, 1, 2, 2}, {13, 15, 3, 3, 2, 2, 0, 0},
        {17, 16, 3, 3, 2, 2, 1, 1}, {12, 8, 2, 2, 2, 2, 0, 0},  {10, 11, 4, 3, 3, 2, 2, 1},
    };
    for (size_t g = 0; g < sizeof geometry / sizeof geometry[0]; g++) {
        const int64_t *q = geometry[g];
        bool ceil_mode = g % 2 == 0;
        DlrtPool p = make_pool(3, q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], ceil_mode, false);
        int64_t n = 2, nx = n * p.c * p.h * p.w, ny = n * p.c * p.oh * p.ow;
        float *x = falloc(nx), *y0 = falloc(ny), *y = falloc(ny);
        double *xd = dalloc(nx), *want = dalloc(ny);
        for (int nan = 0; nan < 2; nan++) {
            fill_random(rng, x, xd, nx);
            if (nan)
                x[nx - 5] = NAN;
            pool_ref(&p, n, true, xd, want);
            p.band = 0;
            dlrt_maxpool_forward(&p, n, x, y0);
            int64_t bands[] = {1, 2, 3, p.oh - 1, p.oh, p.oh + 5};
            for (size_t b = 0; b < sizeof bands / sizeof bands[0]; b++) {
                char what[112];
                snprintf(what, sizeof what,
                         "maxpool %" PRId64 "x%" PRId64 " k%" PRId64 "x%" PRId64 " s%" PRId64
                         " band %" PRId64 "%s",
                         p.h, p.w, p.kh, p.kw, p.sh, bands[b], nan ? " with a NaN" : "");
                p.band = bands[b];
                dlrt_maxpool_forward(&p, n, x, y);
                if (!nan)
                    CHECK_CLOSE(t, what, y, want, ny, 0);
                check(t, memcmp(y, y0, (size_t)ny * sizeof *y) == 0, what, __LINE__);
            }
        }
        free(x), free(y0), free(y), free(xd), free(want);
    }
}

/* Max pooling's gradient with values drawn from {-inf, -1, 0, 1, NaN}:
 * ties, windows of -inf, and one or several NaNs, whose last wins (torch's
 * rule), against the scan written out here, with and without relu_grad,
 * bit for bit.  Over 2x2 windows of stride 2 (the runs of row pairs), NaNs
 * in every round; over 3x3 windows centred at stride 1 and 3x3 windows of
 * stride 2 in ceil mode (pool.inc's maxpool_backward_same3, which
 * gathers each element's windows over a copy of x with NaN around it, and
 * maxpool_backward_strided3, which finds each window's largest tap in a
 * vectorized pass), NaNs in every other round (such planes take the
 * scan). */
static void test_maxpool_special_values(Tally *t, DlrtRng *rng) {
    static const struct {
        int n, c, h, w, k, s, pad, rounds;
        bool ceil, nan_always;
    } cases[] = {
        {3, 4, 6, 10, 2, 2, 0, 40, false, true},
        {2, 3, 9, 11, 3, 1, 1, 20, true, false},
        {2, 3, 9, 11, 3, 2, 0, 20, true, false},
        {2, 3, 8, 8, 2, 2, 0, 20, false, false},
        {2, 3, 9, 11, 3, 2, 1, 20, true, false},
    };
    enum { MOST = 720 }; /* the largest n c h w above */
    static const float values[] = {-INFINITY, -1, 0, 1, NAN};
    float x[MOST], dy[MOST], dx[MOST], want[MOST], y[MOST], plain[MOST];
    int32_t at[MOST];
    for (size_t g = 0; g < sizeof cases / sizeof *cases; g++)
        for (int round = 0; round < cases[g].rounds; round++) {
            int n = cases[g].n, c = cases[g].c, h = cases[g].h, w = cases[g].w;
            int k = cases[g].k, s = cases[g].s, pad = cases[g].pad;
            DlrtPool p = make_pool(c, h, w, k, k, s, s, pad, pad, cases[g].ceil, false);
            p.relu_grad = round % 4 >= 2;
            for (int i = 0; i < n * c * h * w; i++)
                x[i] = values[dlrt_rng_next(rng) % (cases[g].nan_always || round % 2 ? 5 : 4)];
            for (int i = 0; i < n * c * p.oh * p.ow; i++)
                dy[i] = (float)(i + 1) * (i % 7 == 0 ? -0.37f : 0.61f); /* sums that round */
            memset(want, 0, sizeof want);
            for (int pl = 0; pl < n * c; pl++)
                for (int oy = 0; oy < p.oh; oy++)
                    for (int ox = 0; ox < p.ow; ox++) {
                        const float *xp = x + pl * h * w;
                        int best = -1;
                        float max = -INFINITY;
                        for (int iy = oy * s - pad; iy < oy * s - pad + k; iy++)
                            for (int ix = ox * s - pad; ix < ox * s - pad + k; ix++) {
                                if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                                    continue;
                                int i = iy * w + ix;
                                if (best < 0)
                                    best = i;
                                if (xp[i] > max || isnan(xp[i]))
                                    max = xp[i], best = i;
                            }
                        if (!p.relu_grad || xp[best] > 0)
                            want[pl * h * w + best] += dy[(pl * p.oh + oy) * p.ow + ox];
                    }
            dlrt_maxpool_backward(&p, n, dy, x, dx);
            CHECK(t, memcmp(dx, want, sizeof(float) * (size_t)(n * c * h * w)) == 0);
            /* the argmax of maxpool_train (with the ReLU's gradient in it)
               gives the same bits, and its maxima are maxpool's */
            dlrt_maxpool_forward_argmax(&p, n, x, y, at);
            dlrt_maxpool_backward_argmax(&p, n, dy, at, dx);
            CHECK(t, memcmp(dx, want, sizeof(float) * (size_t)(n * c * h * w)) == 0);
            dlrt_maxpool_forward(&p, n, x, plain);
            bool same = true;
            for (int j = 0; j < n * c * p.oh * p.ow; j++)
                same &= y[j] == plain[j] || (isnan(y[j]) && isnan(plain[j]));
            CHECK(t, same);
        }
}

/* maxpool_train's argmax and maxpool_grad_argmax over 2x2 windows that
 * tile the planes (pool.inc's runs of row pairs), against the scan written
 * out here, bit for bit, index for index: values from {-inf, -1, 0, 1}
 * (ties) and, every other round, NaN; planes several to a run, planes cut
 * into runs (96 wide: 5 row pairs to a run of 512 floats), rows a run long,
 * and batches large enough to be split among threads in mid-plane. */
static void test_maxpool_argmax_2x2(Tally *t, DlrtRng *rng) {
    static const int cases[][4] = {
        {3, 4, 6, 10}, {2, 3, 28, 28}, {33, 7, 18, 18}, {7, 3, 36, 96}, {1, 2, 4, 512},
    };
    static const float values[] = {-INFINITY, -1, 0, 1, NAN};
    for (size_t g = 0; g < sizeof cases / sizeof *cases; g++)
        for (int round = 0; round < 4; round++) {
            int n = cases[g][0], c = cases[g][1], h = cases[g][2], w = cases[g][3];
            int oh = h / 2, ow = w / 2, nx = n * c * h * w, ny = n * c * oh * ow;
            DlrtPool p = make_pool(c, h, w, 2, 2, 2, 2, 0, 0, false, false);
            p.relu_grad = round >= 2;
            float *x = falloc(nx), *dx = falloc(nx), *want_dx = falloc(nx);
            float *dy = falloc(ny), *y = falloc(ny), *want_y = falloc(ny);
            int32_t *at = malloc((size_t)ny * sizeof *at), *want_at = malloc((size_t)ny * sizeof *at);
            if (!at || !want_at)
                exit(2);
            for (int i = 0; i < nx; i++)
                x[i] = values[dlrt_rng_next(rng) % (round % 2 ? 5 : 4)];
            for (int i = 0; i < ny; i++)
                dy[i] = (float)(i % 13 + 1) * (i % 7 == 0 ? -0.37f : 0.61f) * (i % 11 ? 1 : -0.0f);
            memset(want_dx, 0, (size_t)nx * sizeof *want_dx);
            for (int pl = 0; pl < n * c; pl++)
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++) {
                        const float *xp = x + pl * h * w;
                        int j = (pl * oh + oy) * ow + ox, best = 2 * oy * w + 2 * ox;
                        float max = -INFINITY;
                        for (int iy = 2 * oy; iy < 2 * oy + 2; iy++)
                            for (int ix = 2 * ox; ix < 2 * ox + 2; ix++)
                                if (xp[iy * w + ix] > max || isnan(xp[iy * w + ix]))
                                    max = xp[iy * w + ix], best = iy * w + ix;
                        want_y[j] = xp[best];
                        want_at[j] = p.relu_grad && !(xp[best] > 0) ? -1 : best;
                        if (want_at[j] >= 0)
                            want_dx[pl * h * w + best] += dy[j];
                    }
            dlrt_maxpool_forward_argmax(&p, n, x, y, at);
            CHECK(t, memcmp(y, want_y, (size_t)ny * sizeof *y) == 0);
            CHECK(t, memcmp(at, want_at, (size_t)ny * sizeof *at) == 0);
            dlrt_maxpool_backward_argmax(&p, n, dy, at, dx);
            CHECK(t, memcmp(dx, want_dx, (size_t)nx * sizeof *dx) == 0);
            free(x), free(dx), free(want_dx), free(dy), free(y), free(want_y), free(at);
            free(want_at);
        }
}

/* ------------------------------------------------------------------------ */
/* Elementwise, global pooling, softmax, copies                              */
/* ------------------------------------------------------------------------ */

typedef struct ActCtx {
    int kind; /* 0 relu, 1 sigmoid, 2 tanh, 3 global average pooling */
    int64_t count, hw;
    double *x, *dy;
} ActCtx;

static double act_ref(int kind, double x) {
    return kind == 0 ? (x > 0 ? x : 0) : kind == 1 ? 1 / (1 + exp(-x)) : tanh(x);
}

static double act_loss_ref(void *ctx) {
    ActCtx *c = ctx;
    double s = 0.0;
    if (c->kind == 3) {
        for (int64_t i = 0; i < c->count / c->hw; i++) {
            double sum = 0.0;
            for (int64_t j = 0; j < c->hw; j++)
                sum += c->x[i * c->hw + j];
            s += c->dy[i] * sum / (double)c->hw;
        }
        return s;
    }
    for (int64_t i = 0; i < c->count; i++)
        s += c->dy[i] * act_ref(c->kind, c->x[i]);
    return s;
}

static void test_activations(Tally *t, DlrtRng *rng) {
    enum { N = 50 };
    static const char *names[] = {"relu", "sigmoid", "tanh"};
    float x[N], dy[N], y[N], dx[N];
    double xd[N], dyd[N], want[N];
    for (int kind = 0; kind < 3; kind++) {
        fill_random(rng, x, xd, N);
        for (int i = 0; i < N; i++) {
            x[i] *= 4.0f, xd[i] = x[i];
            if (kind == 0 && fabsf(x[i]) < 1e-3f) /* keep away from the kink */
                x[i] = xd[i] = 0.5;
        }
        fill_random(rng, dy, dyd, N);
        ActCtx ctx = {.kind = kind, .count = N, .x = xd, .dy = dyd};
        void (*fwd[])(int64_t, const float *, float *) = {
            dlrt_relu_forward, dlrt_sigmoid_forward, dlrt_tanh_forward};
        void (*bwd[])(int64_t, const float *, const float *, float *) = {
            dlrt_relu_backward, dlrt_sigmoid_backward, dlrt_tanh_backward};
        fwd[kind](N, x, y);
        for (int i = 0; i < N; i++)
            want[i] = act_ref(kind, xd[i]);
        CHECK_CLOSE(t, names[kind], y, want, N, 1e-6);
        bwd[kind](N, dy, y, dx);
        fd_grad(act_loss_ref, &ctx, xd, N, 1e-5, want);
        CHECK_CLOSE(t, names[kind], dx, want, N, 1e-5);
    }
    /* the limits: no NaN from exp overflowing */
    float big[] = {-1000.0f, 1000.0f, 0.0f}, yb[3];
    dlrt_sigmoid_forward(3, big, yb);
    CHECK(t, yb[0] == 0.0f && yb[1] == 1.0f && yb[2] == 0.5f);
    dlrt_tanh_forward(3, big, yb);
    CHECK(t, yb[0] == -1.0f && yb[1] == 1.0f && yb[2] == 0.0f);
    float r[] = {-1.0f, 0.0f, 2.0f}, g[] = {5, 6, 7}, wantr[] = {0, 0, 7};
    dlrt_relu_forward(3, r, yb);
    dlrt_relu_backward(3, g, yb, dx);
    CHECK_VALUES(t, "relu backward at 0 and below", dx, wantr, 3, 0);

    /* elu: alpha (exp(x) - 1) below 0 against the f64 formula, its
     * gradient from the result against central differences of it, for
     * alphas 0, 1 and 2.5; and the special values (torch.nn.ELU's) */
    for (int k = 0; k < 3; k++) {
        float alpha = (float[]){0.0f, 1.0f, 2.5f}[k];
        fill_random(rng, x, xd, N);
        fill_random(rng, dy, dyd, N);
        for (int i = 0; i < N; i++) {
            x[i] *= 4.0f;
            if (fabsf(x[i]) < 1e-3f) /* away from the kink */
                x[i] = 0.5f;
            xd[i] = x[i];
            want[i] = xd[i] > 0 ? xd[i] : alpha * expm1(xd[i]);
        }
        dlrt_elu_forward(N, alpha, x, y);
        CHECK_CLOSE(t, "elu", y, want, N, 1e-6);
        dlrt_elu_backward(N, alpha, dy, y, dx);
        for (int i = 0; i < N; i++) {
            double h = 1e-6, xp = xd[i] + h, xm = xd[i] - h;
            double fp = xp > 0 ? xp : alpha * expm1(xp), fm = xm > 0 ? xm : alpha * expm1(xm);
            want[i] = dyd[i] * (fp - fm) / (2 * h);
        }
        CHECK_CLOSE(t, "elu backward", dx, want, N, 1e-5);
    }
    float ex[] = {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, -1e-30f}, ey[6], edx[6];
    float eg[] = {1, 1, 1, 1, 1, 1};
    dlrt_elu_forward(6, 2.0f, ex, ey);
    CHECK(t, ey[0] == -2.0f && ey[1] == INFINITY && isnan(ey[2]) && ey[3] == 0.0f &&
                 signbit(ey[3]) && ey[4] == 0.0f && ey[5] == 2.0f * -1e-30f);
    dlrt_elu_backward(6, 2.0f, eg, ey, edx);
    /* alpha exp(x) from y: 0 at -inf, 1 above 0, alpha at 0 (PyTorch's x <= 0) */
    CHECK(t, edx[0] == 0.0f && edx[1] == 1.0f && isnan(edx[2]) && edx[3] == 2.0f &&
                 edx[4] == 2.0f);

    /* add, in place and not */
    float a[] = {1, 2, 3}, b[] = {10, 20, 30}, s[3], wants[] = {11, 22, 33};
    dlrt_add(3, a, b, s);
    CHECK_VALUES(t, "add", s, wants, 3, 0);
    dlrt_add(3, a, b, a);
    CHECK_VALUES(t, "add into a", a, wants, 3, 0);
    dlrt_add(3, s, b, b);
    float wantb[] = {21, 42, 63};
    CHECK_VALUES(t, "add into b", b, wantb, 3, 0);
}

static void test_globalavgpool(Tally *t, DlrtRng *rng) {
    enum { NB = 2, C = 3, HW = 7 };
    float x[NB * C * HW], dy[NB * C], y[NB * C], dx[NB * C * HW];
    double xd[NB * C * HW], dyd[NB * C], want[NB * C * HW];
    fill_random(rng, x, xd, NB * C * HW);
    fill_random(rng, dy, dyd, NB * C);
    dlrt_globalavgpool_forward(NB, C, HW, x, y);
    for (int i = 0; i < NB * C; i++) {
        want[i] = 0;
        for (int j = 0; j < HW; j++)
            want[i] += xd[i * HW + j] / HW;
    }
    CHECK_CLOSE(t, "globalavgpool forward", y, want, NB * C, 1e-6);
    ActCtx ctx = {.kind = 3, .count = NB * C * HW, .hw = HW, .x = xd, .dy = dyd};
    dlrt_globalavgpool_backward(NB, C, HW, dy, NULL, dx);
    fd_grad(act_loss_ref, &ctx, xd, NB * C * HW, 1e-3, want);
    CHECK_CLOSE(t, "globalavgpool backward", dx, want, NB * C * HW, 1e-5);
}

typedef struct SoftmaxCtx {
    int64_t outer, axis, inner;
    double *x, *dy, *y;
} SoftmaxCtx;

static double softmax_loss_ref(void *ctx) {
    SoftmaxCtx *c = ctx;
    softmax_ref(c->outer, c->axis, c->inner, c->x, c->y);
    return dot(c->dy, c->y, c->outer * c->axis * c->inner);
}

static void test_softmax(Tally *t, DlrtRng *rng) {
    int64_t shapes[][3] = {{3, 5, 1}, {2, 4, 3}, {1, 1, 4}, {4, 10, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t outer = shapes[k][0], axis = shapes[k][1], inner = shapes[k][2];
        int64_t count = outer * axis * inner;
        SoftmaxCtx ctx = {.outer = outer, .axis = axis, .inner = inner};
        float *x = falloc(count), *dy = falloc(count), *y = falloc(count), *dx = falloc(count);
        ctx.x = dalloc(count), ctx.dy = dalloc(count), ctx.y = dalloc(count);
        double *want = dalloc(count);
        fill_random(rng, x, NULL, count);
        for (int64_t i = 0; i < count; i++)
            x[i] *= 3.0f;
        to_double(x, ctx.x, count);
        fill_random(rng, dy, ctx.dy, count);
        dlrt_softmax_forward(outer, axis, inner, x, y);
        softmax_ref(outer, axis, inner, ctx.x, want);
        CHECK_CLOSE(t, "softmax forward", y, want, count, 1e-6);
        dlrt_softmax_backward(outer, axis, inner, dy, y, dx);
        fd_grad(softmax_loss_ref, &ctx, ctx.x, count, 1e-5, want);
        CHECK_CLOSE(t, "softmax backward", dx, want, count, 1e-5);
        free(x), free(dy), free(y), free(dx), free(ctx.x), free(ctx.dy), free(ctx.y);
        free(want);
    }
    /* huge logits: the largest is subtracted before exp */
    float big[] = {1e4f, 1e4f - 1.0f, -1e30f}, y[3];
    double want[3] = {1 / (1 + exp(-1.0)), exp(-1.0) / (1 + exp(-1.0)), 0};
    dlrt_softmax_forward(1, 3, 1, big, y);
    CHECK_CLOSE(t, "softmax of huge logits", y, want, 3, 1e-6);
}

/* The kernels with a ReLU's gradient fused in (add, dropout's gradient, a
 * slice, global average pooling's and LRN's gradients): the bits of the
 * kernel and then relu_backward, also in place, over the threads' split
 * (5000 elements). */
static void test_relu_grad_fused(Tally *t, DlrtRng *rng) {
    enum { COUNT = 5000, ROWS = 50, LEN = 100, STRIDE = 130, OFFSET = 17 };
    float *a = falloc(COUNT), *b = falloc(COUNT), *relu_y = falloc(COUNT);
    float *plain = falloc(COUNT), *fused = falloc(COUNT), *src = falloc(ROWS * STRIDE);
    fill_random(rng, a, NULL, COUNT);
    fill_random(rng, b, NULL, COUNT);
    fill_random(rng, src, NULL, ROWS * STRIDE);
    fill_relu_result(rng, relu_y, COUNT);

    dlrt_add(COUNT, a, b, plain);
    dlrt_add_relu_grad(COUNT, a, b, relu_y, fused);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, COUNT));
    memcpy(fused, a, sizeof *a * COUNT); /* in place over the first operand */
    dlrt_add_relu_grad(COUNT, fused, b, relu_y, fused);
    dlrt_add(COUNT, a, b, plain);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, COUNT));

    for (int64_t i = 0; i < COUNT; i++) /* a dropout mask: 0 or 1 / (1 - p) */
        b[i] = dlrt_rng_next(rng) % 2 ? 2.0f : 0.0f;
    dlrt_dropout_backward(COUNT, a, b, NULL, plain);
    dlrt_dropout_backward(COUNT, a, b, relu_y, fused);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, COUNT));

    dlrt_copy_rows(ROWS, LEN, src, STRIDE, OFFSET, plain, LEN, 0);
    dlrt_copy_rows_relu_grad(ROWS, LEN, src, STRIDE, OFFSET, relu_y, LEN, 0, fused);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, ROWS * LEN));
    /* the ReLU's result read from the concatenation it went into, laid out
     * as src: the rows of relu_y with other values around them */
    float *whole = falloc(ROWS * STRIDE);
    fill_random(rng, whole, NULL, ROWS * STRIDE);
    dlrt_copy_rows(ROWS, LEN, relu_y, LEN, 0, whole, STRIDE, OFFSET);
    dlrt_copy_rows_relu_grad(ROWS, LEN, src, STRIDE, OFFSET, whole, STRIDE, OFFSET, fused);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, ROWS * LEN));

    /* global average pooling's gradient, over ROWS planes of LEN */
    dlrt_globalavgpool_backward(1, ROWS, LEN, a, NULL, plain);
    dlrt_globalavgpool_backward(1, ROWS, LEN, a, relu_y, fused);
    CHECK(t, same_as_relu_backward(fused, plain, relu_y, COUNT));

    /* LRN's, whose x is the ReLU's result: windows that fit its blocks of
     * channels, and one wider than they are (each sum from scratch) */
    DlrtLrn lrns[] = {{.c = 10, .hw = 50, .size = 5, .alpha = 0.1, .beta = 0.75, .k = 2},
                      {.c = 40, .hw = 5, .size = 513, .alpha = 0.1, .beta = 0.75, .k = 2}};
    for (int k = 0; k < 2; k++) {
        DlrtLrn l = lrns[k];
        int64_t n = k == 0 ? COUNT / (l.c * l.hw) : 1, count = n * l.c * l.hw;
        dlrt_lrn_forward(&l, n, relu_y, b);
        dlrt_lrn_backward(&l, n, a, relu_y, b, plain);
        l.relu_grad = true;
        dlrt_lrn_backward(&l, n, a, relu_y, b, fused);
        CHECK(t, same_as_relu_backward(fused, plain, relu_y, count));
    }
    free(a), free(b), free(relu_y), free(plain), free(fused), free(src), free(whole);
}

/* An add of several terms (the fuse pass's merge of a chain of adds): the
 * bits of the chain of dlrt_add, then of relu_forward or relu_backward, in
 * place over each term and over the mask, at counts on both sides of the
 * kernel's blocks (1024) and the threads' split, with NaN, infinities and
 * -0 among the terms. */
static void test_sum(Tally *t, DlrtRng *rng) {
    enum { MAXCOUNT = 5000, MAXTERMS = 5 };
    float *terms[MAXTERMS], *relu_y = falloc(MAXCOUNT), *chain = falloc(MAXCOUNT);
    float *y = falloc(MAXCOUNT), *plain = falloc(MAXCOUNT), *held = falloc(MAXCOUNT);
    for (int k = 0; k < MAXTERMS; k++) {
        terms[k] = falloc(MAXCOUNT);
        fill_random(rng, terms[k], NULL, MAXCOUNT);
    }
    terms[1][5] = NAN, terms[2][6] = INFINITY, terms[3][6] = -INFINITY, terms[0][7] = -0.0f;
    terms[1][7] = -0.0f, terms[2][7] = -0.0f, terms[3][7] = -0.0f, terms[4][7] = -0.0f;
    fill_relu_result(rng, relu_y, MAXCOUNT);
    static const int64_t counts[] = {1, 9, 1023, 1024, 1025, 3000, MAXCOUNT};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        int64_t count = counts[ci];
        for (int nterms = 2; nterms <= MAXTERMS; nterms++) {
            const float *const *in = (const float *const *)terms;
            dlrt_add(count, terms[0], terms[1], chain);
            for (int k = 2; k < nterms; k++)
                dlrt_add(count, chain, terms[k], chain);
            dlrt_sum(count, nterms, in, false, NULL, y);
            CHECK(t, memcmp(y, chain, sizeof *y * (size_t)count) == 0);
            dlrt_sum(count, nterms, in, true, NULL, y);
            dlrt_relu_forward(count, chain, plain);
            CHECK(t, memcmp(y, plain, sizeof *y * (size_t)count) == 0);
            dlrt_sum(count, nterms, in, false, relu_y, y);
            memcpy(plain, chain, sizeof *plain * (size_t)count);
            CHECK(t, same_as_relu_backward(y, plain, relu_y, count));
            /* in place over each term: the term's values held aside */
            for (int k = 0; k < nterms; k++) {
                memcpy(held, terms[k], sizeof *held * (size_t)count);
                dlrt_sum(count, nterms, in, false, NULL, terms[k]);
                CHECK(t, memcmp(terms[k], chain, sizeof *y * (size_t)count) == 0);
                memcpy(terms[k], held, sizeof *held * (size_t)count);
            }
            memcpy(held, relu_y, sizeof *held * (size_t)count);
            dlrt_sum(count, nterms, in, false, relu_y, relu_y);
            memcpy(plain, chain, sizeof *plain * (size_t)count);
            CHECK(t, same_as_relu_backward(relu_y, plain, held, count));
            memcpy(relu_y, held, sizeof *held * (size_t)count);
        }
    }
    CHECK(t, isnan(chain[5]) && isnan(chain[6]) && signbit(chain[7]));

    /* the f64 instance, against a chain of its adds */
    double dt[3][3] = {{1e16, 1, -0.0}, {1, 1, -0.0}, {-1e16, 0.5, -0.0}}, dy[3];
    const double *const din[] = {dt[0], dt[1], dt[2]};
    dlrt_sum_f64(3, 3, din, false, NULL, dy);
    CHECK(t, dy[0] == (1e16 + 1) - 1e16 && dy[1] == 2.5 && signbit(dy[2]));
    for (int k = 0; k < MAXTERMS; k++)
        free(terms[k]);
    free(relu_y), free(chain), free(y), free(plain), free(held);
}

static void test_copy_rows(Tally *t) {
    /* concat of [2,2] and [2,3] into [2,5], then slice it back */
    float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8, 9, 10}, y[10], a2[4], b2[6];
    dlrt_copy_rows(2, 2, a, 2, 0, y, 5, 0);
    dlrt_copy_rows(2, 3, b, 3, 0, y, 5, 2);
    float want[] = {1, 2, 5, 6, 7, 3, 4, 8, 9, 10};
    CHECK_VALUES(t, "concat", y, want, 10, 0);
    dlrt_copy_rows(2, 2, y, 5, 0, a2, 2, 0);
    dlrt_copy_rows(2, 3, y, 5, 2, b2, 3, 0);
    CHECK_VALUES(t, "slice a", a2, a, 4, 0);
    CHECK_VALUES(t, "slice b", b2, b, 6, 0);
}

/* ------------------------------------------------------------------------ */
/* The f64 kernels: losses and batch normalization against finite          */
/* differences of themselves                                                */
/* ------------------------------------------------------------------------ */

typedef struct LossCtx {
    bool mse;
    double *pred, *target;
    int32_t *labels;
    int64_t n, size;
} LossCtx;

static double loss_f64(void *ctx) {
    LossCtx *c = ctx;
    return c->mse ? dlrt_mse_f64(c->pred, c->target, c->n, c->size, NULL)
                  : dlrt_cross_entropy_f64(c->pred, c->labels, c->n, c->size, NULL);
}

/* max|a - b| / max(max|b|, 1e-12), both in double */
static double rel_error_f64(const double *a, const double *b, int64_t count) {
    double diff = 0, top = 0;
    for (int64_t i = 0; i < count; i++) {
        diff = fmax(diff, fabs(a[i] - b[i]));
        top = fmax(top, fabs(b[i]));
    }
    return diff / fmax(top, 1e-12);
}

static void test_losses_f64(Tally *t, DlrtRng *rng) {
    enum { N = 5, SIZE = 7 };
    double pred[N * SIZE], target[N * SIZE], grad[N * SIZE], fd[N * SIZE];
    int32_t labels[N];
    for (int i = 0; i < N * SIZE; i++) {
        pred[i] = 4.0 * dlrt_rng_uniform(rng) - 2.0;
        target[i] = dlrt_rng_uniform(rng);
    }
    for (int i = 0; i < N; i++)
        labels[i] = (int32_t)dlrt_rng_below(rng, SIZE);
    for (int k = 0; k < 2; k++) {
        LossCtx c = {.mse = k == 1, .pred = pred, .target = target, .labels = labels, .n = N,
                     .size = SIZE};
        if (c.mse)
            dlrt_mse_f64(pred, target, N, SIZE, grad);
        else
            dlrt_cross_entropy_f64(pred, labels, N, SIZE, grad);
        fd_grad(loss_f64, &c, pred, N * SIZE, 1e-6, fd);
        double err = rel_error_f64(grad, fd, N * SIZE);
        if (!CHECK(t, err < 1e-7))
            fprintf(stderr, "    %s f64 gradient: relative error %.3g\n",
                    c.mse ? "mse" : "cross-entropy", err);
    }
}

typedef struct BnCtx {
    int64_t n, c, hw;
    double *x, *w, *b, *rm, *rv, *y, *mean, *invstd, *dy;
} BnCtx;

/* sum(dy * batchnorm_train(x)): the batch statistics depend on x */
static double bn_loss(void *ctx) {
    BnCtx *c = ctx;
    dlrt_batchnorm_forward_train_f64(c->n, c->c, c->hw, 1e-5, 0.1, c->x, c->w, c->b, c->rm,
                                     c->rv, c->y, c->mean, c->invstd);
    return dot(c->dy, c->y, c->n * c->c * c->hw);
}

static void test_batchnorm_f64(Tally *t, DlrtRng *rng) {
    enum { N = 3, C = 2, HW = 5, COUNT = N * C * HW };
    double x[COUNT], y[COUNT], dy[COUNT], dx[COUNT], fdx[COUNT], w[C], b[C], rm[C], rv[C];
    double mean[C], invstd[C], dw[C], fdw[C];
    for (int i = 0; i < COUNT; i++) {
        x[i] = 2.0 * dlrt_rng_uniform(rng) - 1.0;
        dy[i] = 2.0 * dlrt_rng_uniform(rng) - 1.0;
    }
    for (int j = 0; j < C; j++) {
        w[j] = 0.5 + dlrt_rng_uniform(rng);
        b[j] = dlrt_rng_uniform(rng) - 0.5;
        rm[j] = 0;
        rv[j] = 1;
    }
    BnCtx c = {N, C, HW, x, w, b, rm, rv, y, mean, invstd, dy};
    bn_loss(&c);
    dlrt_batchnorm_backward_input_f64(N, C, HW, dy, x, mean, invstd, w, dx);
    dlrt_batchnorm_backward_weight_f64(N, C, HW, dy, x, mean, invstd, dw);
    fd_grad(bn_loss, &c, x, COUNT, 1e-6, fdx);
    fd_grad(bn_loss, &c, w, C, 1e-6, fdw);
    double ex = rel_error_f64(dx, fdx, COUNT), ew = rel_error_f64(dw, fdw, C);
    if (!CHECK(t, ex < 1e-7 && ew < 1e-7))
        fprintf(stderr, "    batchnorm f64 gradients: dx %.3g, dw %.3g\n", ex, ew);
}

/* ---- recurrent layers ---------------------------------------------------- */

/* A recurrent layer in double by PyTorch's formulas, one sample and one
 * step at a time with plain loops: y, and the state each step read into
 * hprev (NULL: not wanted).  Laid out as dlrt_rnn_forward's. */
static void rnn_ref(const DlrtRnn *r, int64_t n, const double *x, const double *w_ih,
                    const double *w_hh, const double *b_ih, const double *b_hh,
                    const int32_t *lengths, const double *h0, const double *c0, double *y,
                    double *hprev) {
    int64_t T = r->steps, F = r->input, H = r->hidden;
    int64_t gh = (r->cell == DLRT_CELL_LSTM ? 4 : r->cell == DLRT_CELL_GRU ? 3 : 1) * H;
    double *h = dalloc(H), *c = dalloc(H), *ax = dalloc(gh), *ah = dalloc(gh);
    for (int64_t i = 0; i < n; i++) {
        int64_t len = lengths ? lengths[i] : T;
        for (int64_t j = 0; j < H; j++) {
            h[j] = h0 ? h0[i * H + j] : 0;
            c[j] = c0 ? c0[i * H + j] : 0;
        }
        if (!r->last)
            memset(y + i * T * H, 0, (size_t)(T * H) * sizeof *y);
        if (hprev)
            memset(hprev + i * T * H, 0, (size_t)(T * H) * sizeof *hprev);
        for (int64_t s = 0; s < len; s++) {
            int64_t t = r->reverse ? len - 1 - s : s;
            if (hprev)
                memcpy(hprev + (i * T + t) * H, h, (size_t)H * sizeof *h);
            for (int64_t g = 0; g < gh; g++) {
                ax[g] = b_ih ? b_ih[g] : 0;
                ah[g] = b_hh ? b_hh[g] : 0;
                for (int64_t f = 0; f < F; f++)
                    ax[g] += w_ih[g * F + f] * x[(i * T + t) * F + f];
                for (int64_t k = 0; k < H; k++)
                    ah[g] += w_hh[g * H + k] * h[k];
            }
            for (int64_t j = 0; j < H; j++) {
                switch (r->cell) {
                case DLRT_CELL_RNN_TANH:
                    h[j] = tanh(ax[j] + ah[j]);
                    break;
                case DLRT_CELL_RNN_RELU:
                    h[j] = fmax(ax[j] + ah[j], 0.0);
                    break;
                case DLRT_CELL_LSTM: {
                    double gi = 1 / (1 + exp(-(ax[j] + ah[j])));
                    double gf = 1 / (1 + exp(-(ax[H + j] + ah[H + j])));
                    double gg = tanh(ax[2 * H + j] + ah[2 * H + j]);
                    double go = 1 / (1 + exp(-(ax[3 * H + j] + ah[3 * H + j])));
                    c[j] = gf * c[j] + gi * gg;
                    h[j] = go * tanh(c[j]);
                    break;
                }
                case DLRT_CELL_GRU: {
                    double gr = 1 / (1 + exp(-(ax[j] + ah[j])));
                    double gz = 1 / (1 + exp(-(ax[H + j] + ah[H + j])));
                    double gn = tanh(ax[2 * H + j] + gr * ah[2 * H + j]);
                    h[j] = (1 - gz) * gn + gz * h[j];
                    break;
                }
                }
            }
            if (!r->last)
                memcpy(y + (i * T + t) * H, h, (size_t)H * sizeof *h);
        }
        if (r->last)
            memcpy(y + i * H, h, (size_t)H * sizeof *h);
    }
    free(h);
    free(c);
    free(ax);
    free(ah);
}

/* A recurrent layer's case, and its operands in double for the reference
 * (absent ones NULL). */
typedef struct RnnCtx {
    DlrtRnn r;
    int64_t n;
    const int32_t *lengths;
    double *x, *w_ih, *w_hh, *b_ih, *b_hh, *h0, *c0;
    double *rr; /* the loss's weights, laid out as y */
    double *y;  /* the reference's y, which the loss overwrites */
} RnnCtx;

/* L = sum(rr * y), y by rnn_ref */
static double rnn_loss_ref(void *ctx) {
    RnnCtx *c = ctx;
    rnn_ref(&c->r, c->n, c->x, c->w_ih, c->w_hh, c->b_ih, c->b_hh, c->lengths, c->h0, c->c0,
            c->y, NULL);
    const DlrtRnn *r = &c->r;
    return dot(c->rr, c->y, c->n * (r->last ? 1 : r->steps) * r->hidden);
}

static int64_t rnn_gates_of(DlrtCell cell) {
    return cell == DLRT_CELL_LSTM ? 4 : cell == DLRT_CELL_GRU ? 3 : 1;
}

/* The five gradients from dpre_ih and dpre_hh (dlrt_rnn_backward's, in
 * double) as the compiler sums them with the dense kernels: dx, dw_ih,
 * dw_hh, db_ih, db_hh, in that order in grads. */
static void rnn_grads(const RnnCtx *c, const double *hprev, const double *dpre_ih,
                      const double *dpre_hh, double *const grads[5]) {
    const DlrtRnn *r = &c->r;
    int64_t rows = c->n * r->steps, F = r->input, H = r->hidden;
    int64_t gh = rnn_gates_of(r->cell) * H;
    double *dx = grads[0], *dw_ih = grads[1], *dw_hh = grads[2], *db_ih = grads[3],
           *db_hh = grads[4];
    memset(dx, 0, (size_t)(rows * F) * sizeof *dx);
    memset(dw_ih, 0, (size_t)(gh * F) * sizeof *dw_ih);
    memset(dw_hh, 0, (size_t)(gh * H) * sizeof *dw_hh);
    memset(db_ih, 0, (size_t)gh * sizeof *db_ih);
    memset(db_hh, 0, (size_t)gh * sizeof *db_hh);
    for (int64_t row = 0; row < rows; row++)
        for (int64_t g = 0; g < gh; g++) {
            double di = dpre_ih[row * gh + g], dh = dpre_hh[row * gh + g];
            for (int64_t f = 0; f < F; f++) {
                dx[row * F + f] += di * c->w_ih[g * F + f];
                dw_ih[g * F + f] += di * c->x[row * F + f];
            }
            for (int64_t k = 0; k < H; k++)
                dw_hh[g * H + k] += dh * hprev[row * H + k];
            db_ih[g] += di;
            db_hh[g] += dh;
        }
}

/* Whether rows [len, T) of each sample, `width` values each, are zeros. */
static bool rnn_padding_zero(const RnnCtx *c, const double *v, int64_t width) {
    int64_t T = c->r.steps;
    for (int64_t i = 0; i < c->n; i++)
        for (int64_t t = c->lengths ? c->lengths[i] : T; t < T; t++)
            for (int64_t j = 0; j < width; j++)
                if (v[(i * T + t) * width + j] != 0)
                    return false;
    return true;
}

static bool rnn_padding_zero_f32(const RnnCtx *c, const float *v, int64_t width) {
    int64_t count = c->n * c->r.steps * width;
    double *d = dalloc(count);
    to_double(v, d, count);
    bool zero = rnn_padding_zero(c, d, width);
    free(d);
    return zero;
}

static const char *const rnn_cell_names[] = {"rnn_tanh", "rnn_relu", "lstm", "gru"};

/* One layer (cell, sizes, reverse, last; lengths may be NULL; h0, c0 and
 * the biases given or not): the f32 and f64 forward kernels against
 * rnn_ref, inference and training alike; the gradients the f64 backward
 * kernel's dpre give (rnn_grads) against central differences of rnn_ref,
 * at every value, or at `probes` of each tensor's; the f32 backward
 * against the f64; padded steps zero; on 1 and 2 threads, with and without
 * fast activations, each call twice with the same bits. */
static void test_rnn_case(Tally *t, DlrtRng *rng, DlrtCell cell, int64_t n, int64_t T,
                          int64_t F, int64_t H, bool reverse, bool last,
                          const int32_t *lengths, bool h0, bool c0, bool b_ih, bool b_hh,
                          int64_t probes) {
    DlrtRnn r = {.cell = cell, .steps = T, .input = F, .hidden = H, .reverse = reverse,
                 .last = last};
    int64_t gh = rnn_gates_of(cell) * H;
    int64_t S = cell == DLRT_CELL_LSTM ? 5 * H : cell == DLRT_CELL_GRU ? 4 * H : H;
    int64_t nx = n * T * F, ny = n * (last ? 1 : T) * H, nseq = n * T * H;
    int64_t counts[5] = {nx, gh * F, gh * H, gh, gh};
    char what[160];
    snprintf(what, sizeof what, "%s n=%lld T=%lld F=%lld H=%lld%s%s%s%s%s%s%s",
             rnn_cell_names[cell], (long long)n, (long long)T, (long long)F, (long long)H,
             reverse ? " reverse" : "", last ? " last" : "", lengths ? " lengths" : "",
             h0 ? " h0" : "", c0 ? " c0" : "", b_ih ? " b_ih" : "", b_hh ? " b_hh" : "");

    /* the operands: f32 values, and the same in double; the weights of
       torch's initialization's scale, so that gates do not saturate */
    float *fv[7];
    double *dv[7];
    int64_t vcount[7] = {nx, gh * F, gh * H, gh, gh, n * H, n * H};
    bool given[7] = {true, true, true, b_ih, b_hh, h0, c0 && cell == DLRT_CELL_LSTM};
    for (int k = 0; k < 7; k++) {
        fv[k] = falloc(vcount[k]);
        dv[k] = dalloc(vcount[k]);
        fill_random(rng, fv[k], dv[k], vcount[k]);
        if (k >= 1 && k <= 4) {
            float scale = (float)(1 / sqrt((double)H));
            for (int64_t i = 0; i < vcount[k]; i++)
                dv[k][i] = fv[k][i] *= scale;
        }
    }
#define F32(k) (given[k] ? fv[k] : NULL)
#define F64(k) (given[k] ? dv[k] : NULL)
    RnnCtx ctx = {.r = r, .n = n, .lengths = lengths, .x = dv[0], .w_ih = dv[1], .w_hh = dv[2],
                  .b_ih = F64(3), .b_hh = F64(4), .h0 = F64(5), .c0 = F64(6),
                  .rr = dalloc(ny), .y = dalloc(ny)};
    float *rr32 = falloc(ny);
    fill_random(rng, rr32, ctx.rr, ny);
    double *yref = dalloc(ny), *hpref = dalloc(nseq);
    rnn_ref(&r, n, ctx.x, ctx.w_ih, ctx.w_hh, ctx.b_ih, ctx.b_hh, lengths, ctx.h0, ctx.c0, yref,
            hpref);

    /* central differences of the loss, at every value or at `probes` of
       each tensor's, evenly spread */
    double *fd[5], *grads64[5], *grads32[5];
    int64_t step[5];
    for (int k = 0; k < 5; k++) {
        fd[k] = dalloc(counts[k]);
        grads64[k] = dalloc(counts[k]);
        grads32[k] = dalloc(counts[k]);
        step[k] = probes && counts[k] > probes ? counts[k] / probes : 1;
        if (!given[k])
            continue;
        for (int64_t i = 0; i < counts[k]; i += step[k])
            fd_grad(rnn_loss_ref, &ctx, dv[k] + i, 1, 1e-6, fd[k] + i);
    }

    int saved = dlrt_threads();
    size_t base = strlen(what);
    for (int mode = 0; mode < 4; mode++) {
        /* 1 and 2 threads, libm's activations and the fast ones (f32) */
        int threads = 1 + mode / 2;
        r.fast = mode % 2 == 1;
        dlrt_set_threads(threads);
        /* workspaces for a larger batch than this call's, poisoned */
        int64_t wf = dlrt_rnn_workspace(&r, n + 3, threads);
        int64_t wb = dlrt_rnn_backward_workspace(&r, n + 3, threads);
        float *work32 = falloc(wf > wb ? wf : wb);
        double *work64 = dalloc(wf > wb ? wf : wb);
        for (int64_t i = 0; i < (wf > wb ? wf : wb); i++)
            work64[i] = NAN;

        /* f32 forward: inference and training (twice) give the same bits,
           close to the reference */
        float *y32 = falloc(ny), *y32b = falloc(ny), *y32c = falloc(ny);
        float *hp32 = falloc(nseq), *hp32b = falloc(nseq);
        float *cache32 = falloc(n * T * S), *cache32b = falloc(n * T * S);
        dlrt_rnn_forward(&r, n, fv[0], fv[1], fv[2], F32(3), F32(4), lengths, F32(5), F32(6),
                         NULL, NULL, y32, NULL, NULL, work32, threads);
        dlrt_rnn_forward(&r, n, fv[0], fv[1], fv[2], F32(3), F32(4), lengths, F32(5), F32(6),
                         NULL, NULL, y32b, hp32, cache32, work32, threads);
        dlrt_rnn_forward(&r, n, fv[0], fv[1], fv[2], F32(3), F32(4), lengths, F32(5), F32(6),
                         NULL, NULL, y32c, hp32b, cache32b, work32, threads);
        snprintf(what + base, sizeof what - base, " t%d%s", threads, r.fast ? " fast" : "");
        CHECK_CLOSE(t, what, y32, yref, ny, 1e-5);
        CHECK_CLOSE(t, what, hp32, hpref, nseq, 1e-5);
        CHECK(t, memcmp(y32, y32b, (size_t)ny * sizeof *y32) == 0);
        CHECK(t, memcmp(y32b, y32c, (size_t)ny * sizeof *y32) == 0 &&
                     memcmp(hp32, hp32b, (size_t)nseq * sizeof *hp32) == 0 &&
                     memcmp(cache32, cache32b, (size_t)(n * T * S) * sizeof *cache32) == 0);
        CHECK(t, rnn_padding_zero_f32(&ctx, cache32, S));

        /* f64 forward, within rounding of the reference */
        double *y64 = dalloc(ny), *hp64 = dalloc(nseq), *cache64 = dalloc(n * T * S);
        dlrt_rnn_forward_f64(&r, n, dv[0], dv[1], dv[2], F64(3), F64(4), lengths, F64(5),
                             F64(6), NULL, NULL, y64, hp64, cache64, work64, threads);
        double ey = rel_error_f64(y64, yref, ny), eh = rel_error_f64(hp64, hpref, nseq);
        if (!CHECK(t, ey <= 1e-12 && eh <= 1e-12))
            fprintf(stderr, "    %s f64 forward: y %.3g, hprev %.3g\n", what, ey, eh);

        /* f64 backward: the gradients against central differences; a GRU
           with both dpre, the others with dpre_ih alone and with both (then
           the same) */
        double *di64 = dalloc(n * T * gh), *dh64 = dalloc(n * T * gh);
        for (int64_t i = 0; i < n * T * gh; i++)
            di64[i] = dh64[i] = NAN;
        dlrt_rnn_backward_f64(&r, n, ctx.rr, cache64, hp64, dv[2], lengths, F64(6), di64,
                              cell == DLRT_CELL_GRU ? dh64 : NULL, work64, threads);
        rnn_grads(&ctx, hp64, di64, cell == DLRT_CELL_GRU ? dh64 : di64, grads64);
        static const char *const names[5] = {"dx", "dw_ih", "dw_hh", "db_ih", "db_hh"};
        for (int k = 0; k < 5; k++) {
            if (!given[k])
                continue;
            double diff = 0, top = 1e-12;
            for (int64_t i = 0; i < counts[k]; i += step[k]) {
                diff = fmax(diff, fabs(grads64[k][i] - fd[k][i]));
                top = fmax(top, fabs(fd[k][i]));
            }
            if (!CHECK(t, diff / top <= 1e-7))
                fprintf(stderr, "    %s %s: relative error %.3g\n", what, names[k], diff / top);
        }
        CHECK(t, rnn_padding_zero(&ctx, di64, gh));
        if (cell == DLRT_CELL_GRU) {
            CHECK(t, rnn_padding_zero(&ctx, dh64, gh));
        } else {
            double *dboth = dalloc(n * T * gh);
            dlrt_rnn_backward_f64(&r, n, ctx.rr, cache64, hp64, dv[2], lengths, F64(6), dboth,
                                  dh64, work64, threads);
            CHECK(t, memcmp(dboth, di64, (size_t)(n * T * gh) * sizeof *dboth) == 0 &&
                         memcmp(dh64, di64, (size_t)(n * T * gh) * sizeof *dh64) == 0);
            free(dboth);
        }

        /* f32 backward: close to f64's, twice the same bits */
        float *di32 = falloc(n * T * gh), *dh32 = falloc(n * T * gh);
        float *di32b = falloc(n * T * gh), *dh32b = falloc(n * T * gh);
        float *dhh32 = cell == DLRT_CELL_GRU ? dh32 : NULL, *dhh32b = dhh32 ? dh32b : NULL;
        dlrt_rnn_backward(&r, n, rr32, cache32, hp32, fv[2], lengths, F32(6), di32, dhh32, work32,
                          threads);
        dlrt_rnn_backward(&r, n, rr32, cache32, hp32, fv[2], lengths, F32(6), di32b, dhh32b,
                          work32, threads);
        CHECK_CLOSE_TO(t, what, di32, di64, n * T * gh, 1e-4, 1e-3);
        CHECK(t, memcmp(di32, di32b, (size_t)(n * T * gh) * sizeof *di32) == 0);
        CHECK(t, rnn_padding_zero_f32(&ctx, di32, gh));
        if (dhh32) {
            CHECK_CLOSE_TO(t, what, dh32, dh64, n * T * gh, 1e-4, 1e-3);
            CHECK(t, memcmp(dh32, dh32b, (size_t)(n * T * gh) * sizeof *dh32) == 0);
        }
        /* and the gradients they give, as the compiler sums them */
        double *di32d = dalloc(n * T * gh), *dh32d = dalloc(n * T * gh), *hp32d = dalloc(nseq);
        to_double(di32, di32d, n * T * gh);
        to_double(dhh32 ? dh32 : di32, dh32d, n * T * gh);
        to_double(hp32, hp32d, nseq);
        rnn_grads(&ctx, hp32d, di32d, dh32d, grads32);
        for (int k = 0; k < 5; k++) {
            double e = rel_error_f64(grads32[k], grads64[k], counts[k]);
            if (!CHECK(t, e <= 1e-4))
                fprintf(stderr, "    %s f32 %s: relative error %.3g\n", what, names[k], e);
        }
        free(di32d);
        free(dh32d);
        free(hp32d);
        free(di32);
        free(dh32);
        free(di32b);
        free(dh32b);
        free(di64);
        free(dh64);
        free(y64);
        free(hp64);
        free(cache64);
        free(y32);
        free(y32b);
        free(y32c);
        free(hp32);
        free(hp32b);
        free(cache32);
        free(cache32b);
        free(work32);
        free(work64);
    }
    dlrt_set_threads(saved);
#undef F32
#undef F64
    for (int k = 0; k < 7; k++) {
        free(fv[k]);
        free(dv[k]);
    }
    for (int k = 0; k < 5; k++) {
        free(fd[k]);
        free(grads64[k]);
        free(grads32[k]);
    }
    free(ctx.rr);
    free(ctx.y);
    free(rr32);
    free(yref);
    free(hpref);
}

/* The cells' activations, seen in an LSTM's cache (i, f, g, o: sigmoid,
 * sigmoid, tanh, sigmoid of x, with unit weights, no bias, one step):
 * libm's, the bits of dlrt_sigmoid_forward and dlrt_tanh_forward, and with
 * r.fast within 2 ulp (tanh) and 3 ulp (sigmoid) of the exact values, or
 * 1e-37 where they are tiny, NaN for NaN. */
static void test_rnn_activations(Tally *t) {
    enum { N = 4099, S = 5 };
    DlrtRnn r = {.cell = DLRT_CELL_LSTM, .steps = 1, .input = 1, .hidden = 1};
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-7f, 0.625f, -0.625f, 87.0f, -87.0f,
                                    88.5f, -88.5f, 1e4f, -1e4f, INFINITY, -INFINITY, NAN};
    enum { NSPECIAL = sizeof special / sizeof *special };
    float x[N], pre[N], w_ih[4] = {1, 1, 1, 1}, w_hh[4] = {0}, y[N], hprev[N], cache[N * S],
          sig[N], th[N];
    for (int i = 0; i < N; i++) {
        x[i] = i < NSPECIAL ? special[i] : -30.0f + 60.0f * (float)(i - NSPECIAL) / (N - NSPECIAL);
        pre[i] = 0.0f + x[i]; /* the cell's pre-activation, the bias plus x: +0 for -0 */
    }
    float *work = falloc(dlrt_rnn_workspace(&r, N, 1));
    dlrt_sigmoid_forward(N, pre, sig);
    dlrt_tanh_forward(N, pre, th);
    for (int fast = 0; fast <= 1; fast++) {
        r.fast = fast == 1;
        dlrt_rnn_forward(&r, N, x, w_ih, w_hh, NULL, NULL, NULL, NULL, NULL, NULL, NULL, y,
                         hprev, cache, work, 1);
        double worst_sig = 0, worst_tanh = 0;
        bool same = true, nan = true;
        for (int i = 0; i < N; i++) {
            float got[4] = {cache[i * S], cache[i * S + 1], cache[i * S + 2], cache[i * S + 3]};
            if (!fast) {
                same &= memcmp(&got[0], &sig[i], sizeof *got) == 0 &&
                        memcmp(&got[1], &sig[i], sizeof *got) == 0 &&
                        memcmp(&got[2], &th[i], sizeof *got) == 0 &&
                        memcmp(&got[3], &sig[i], sizeof *got) == 0;
                continue;
            }
            if (isnan(x[i])) {
                nan &= isnan(got[0]) && isnan(got[2]) && isnan(got[3]);
                continue;
            }
            double s = 1 / (1 + exp(-(double)x[i])), h = tanh((double)x[i]);
            for (int k = 0; k < 4; k++) {
                double want = k == 2 ? h : s;
                double ulp = fabs(want) < 1e-37 ? 1e-37 : ldexp(1.0, ilogb(want) - 23);
                double e = fabs(got[k] - want) / ulp;
                if (k == 2)
                    worst_tanh = fmax(worst_tanh, e);
                else
                    worst_sig = fmax(worst_sig, e);
            }
        }
        if (!fast) {
            CHECK(t, same);
            continue;
        }
        CHECK(t, nan);
        if (!CHECK(t, worst_sig <= 3 && worst_tanh <= 2))
            fprintf(stderr, "    fast activations: sigmoid %.3g ulp, tanh %.3g ulp\n", worst_sig,
                    worst_tanh);
    }
    free(work);
}

static void test_rnn(Tally *t, DlrtRng *rng) {
    static const int32_t len_a[] = {2, 4, 1}, len_b[] = {3, 1, 4}, len_c[] = {4, 2, 3},
                         len_d[] = {0, 3, 4};
    for (int cell = DLRT_CELL_RNN_TANH; cell <= DLRT_CELL_GRU; cell++) {
        DlrtCell c = (DlrtCell)cell;
        /* small enough for differences at every value: every option */
        test_rnn_case(t, rng, c, 3, 4, 3, 4, false, false, NULL, true, true, true, true, 0);
        test_rnn_case(t, rng, c, 3, 4, 3, 4, true, false, len_a, true, false, true, false, 0);
        test_rnn_case(t, rng, c, 3, 4, 3, 4, false, true, len_b, false, false, false, true, 0);
        test_rnn_case(t, rng, c, 3, 4, 3, 4, true, true, len_c, true, true, true, true, 0);
        test_rnn_case(t, rng, c, 3, 4, 2, 3, false, false, len_d, true, true, true, true, 0);
        test_rnn_case(t, rng, c, 3, 4, 2, 3, true, true, len_d, false, true, true, true, 0);
        test_rnn_case(t, rng, c, 1, 5, 2, 3, true, false, NULL, false, false, false, false, 0);
        test_rnn_case(t, rng, c, 1, 3, 4, 5, false, true, NULL, true, true, true, true, 0);
        /* a batch that is no multiple of 16, shared by two workers, with and
           without lengths: differences at some values */
        int32_t lengths[37];
        for (int i = 0; i < 37; i++)
            lengths[i] = 1 + (int32_t)dlrt_rng_below(rng, 9);
        test_rnn_case(t, rng, c, 37, 9, 13, 24, cell % 2 == 1, false, lengths, true, true, true,
                      true, 12);
        test_rnn_case(t, rng, c, 37, 9, 13, 24, cell % 2 == 0, cell >= 2, NULL, false, false,
                      true, true, 12);
    }
}

/* A stateful layer's chunks: a sequence run as two chunks, the second
 * starting from the states the first ended in (hn and cn written over h0
 * and c0, as a stateful layer's generated code does), gives what one run
 * over the whole gives, and the same final states. */
static void test_rnn_chunks(Tally *t, DlrtRng *rng) {
    enum { N = 5, T = 6, A = 2, F = 3, H = 4 }; /* chunks of A and T - A steps */
    for (int cell = DLRT_CELL_RNN_TANH; cell <= DLRT_CELL_GRU; cell++) {
        for (int threads = 1; threads <= 2; threads++) {
            DlrtRnn r = {.cell = (DlrtCell)cell, .steps = T, .input = F, .hidden = H};
            int64_t gh = rnn_gates_of(r.cell) * H;
            float *x = falloc(N * T * F), *w_ih = falloc(gh * F), *w_hh = falloc(gh * H);
            float *b = falloc(gh), *y = falloc(N * T * H), *hn = falloc(N * H);
            float *cn = falloc(N * H), *xa = falloc(N * A * F), *xb = falloc(N * (T - A) * F);
            float *ya = falloc(N * A * H), *yb = falloc(N * (T - A) * H);
            float *h = falloc(N * H), *c = falloc(N * H);
            fill_random(rng, x, NULL, N * T * F);
            fill_random(rng, w_ih, NULL, gh * F);
            fill_random(rng, w_hh, NULL, gh * H);
            fill_random(rng, b, NULL, gh);
            for (int64_t i = 0; i < N; i++) {
                memcpy(xa + i * A * F, x + i * T * F, sizeof *x * A * F);
                memcpy(xb + i * (T - A) * F, x + (i * T + A) * F, sizeof *x * (T - A) * F);
            }
            DlrtRnn ra = r, rb = r;
            ra.steps = A;
            rb.steps = T - A;
            float *work = falloc(dlrt_rnn_workspace(&r, N, threads));
            dlrt_rnn_forward(&r, N, x, w_ih, w_hh, b, NULL, NULL, NULL, NULL, hn, cn, y, NULL,
                             NULL, work, threads);
            dlrt_rnn_forward(&ra, N, xa, w_ih, w_hh, b, NULL, NULL, NULL, NULL, h, c, ya, NULL,
                             NULL, work, threads);
            dlrt_rnn_forward(&rb, N, xb, w_ih, w_hh, b, NULL, NULL, h, c, h, c, yb, NULL, NULL,
                             work, threads);
            float *whole = falloc(N * T * H);
            for (int64_t i = 0; i < N; i++) {
                memcpy(whole + i * T * H, ya + i * A * H, sizeof *y * A * H);
                memcpy(whole + (i * T + A) * H, yb + i * (T - A) * H, sizeof *y * (T - A) * H);
            }
            char what[64];
            snprintf(what, sizeof what, "rnn chunks %s t%d", rnn_cell_names[cell], threads);
            CHECK_VALUES(t, what, whole, y, N * T * H, 1e-6);
            CHECK_VALUES(t, what, h, hn, N * H, 1e-6);
            if (r.cell == DLRT_CELL_LSTM)
                CHECK_VALUES(t, what, c, cn, N * H, 1e-6);
            else /* not an LSTM's: cn stays as it was */
                CHECK(t, isnan(cn[0]) && isnan(c[N * H - 1]));
            float *bufs[] = {x, w_ih, w_hh, b, y, hn, cn, xa, xb, ya, yb, h, c, work, whole};
            for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++)
                free(bufs[k]);
        }
    }
}

/* dlrt_alloc: zeroed memory on a cache line (the generated networks'
 * buffers), for sizes that are not multiples of the line too; NULL when the
 * size overflows. */
static void test_alloc(Tally *t) {
    size_t counts[] = {0, 1, 3, 17, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        float *p = dlrt_alloc(counts[i], sizeof *p);
        CHECK(t, p != NULL);
        if (!p)
            continue;
        CHECK(t, (uintptr_t)p % DLRT_ALIGN == 0);
        bool zero = true;
        for (size_t j = 0; j < counts[i]; j++)
            zero &= p[j] == 0;
        CHECK(t, zero);
        free(p);
    }
    CHECK(t, dlrt_alloc(SIZE_MAX / 2, 4) == NULL);
    CHECK(t, dlrt_alloc(SIZE_MAX, 1) == NULL);
}

static int run_unit_tests(void) {
    Tally t = {0};
    DlrtRng rng;
    dlrt_rng_seed(&rng, 20240601);
    test_alloc(&t);
    test_conv_by_hand(&t);
    test_conv_large(&t, &rng);
    test_maxpool_by_hand(&t);
    test_avgpool_by_hand(&t);
    test_optimizers_by_hand(&t);
    test_optimizers_random(&t, &rng);
    test_dense_sgd_update(&t, &rng);
    test_dense_adam_update(&t, &rng);
    test_clip(&t, &rng);
    test_conv(&t, &rng);
    test_dense(&t, &rng);
    test_pool(&t, &rng);
    test_maxpool_special_values(&t, &rng);
    test_maxpool_argmax_2x2(&t, &rng);
    test_maxpool_bands(&t, &rng);
    test_activations(&t, &rng);
    test_globalavgpool(&t, &rng);
    test_softmax(&t, &rng);
    test_losses_f64(&t, &rng);
    test_batchnorm_f64(&t, &rng);
    test_copy_rows(&t);
    test_relu_grad_fused(&t, &rng);
    test_sum(&t, &rng);
    test_rnn_activations(&t);
    test_rnn(&t, &rng);
    test_rnn_chunks(&t, &rng);
    printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* The run mode                                                             */
/* ------------------------------------------------------------------------ */

#define MAX_PARAMS 32
#define MAX_ARRAYS 24

typedef struct Array {
    char name[32];
    int64_t count;
    float *data;
} Array;

/* One case of a SPEC file and its outputs. */
typedef struct Case {
    char label[64];
    char op[32];
    int nparams;
    char keys[MAX_PARAMS][32];
    double values[MAX_PARAMS];
    int nin;
    Array in[MAX_ARRAYS];
    int nout;
    Array out[MAX_ARRAYS];
    char error[256]; /* the first problem with the case, or "" */
} Case;

static void case_error(Case *c, const char *what, const char *name) {
    if (!c->error[0])
        snprintf(c->error, sizeof c->error, "%s '%s'", what, name);
}

/* An integer parameter; a missing one is an error (and 1, to keep sizes
 * sane until the error is reported). */
static int64_t iparam(Case *c, const char *key) {
    for (int i = 0; i < c->nparams; i++)
        if (strcmp(c->keys[i], key) == 0)
            return (int64_t)c->values[i];
    case_error(c, "missing parameter", key);
    return 1;
}

static float fparam(Case *c, const char *key) {
    for (int i = 0; i < c->nparams; i++)
        if (strcmp(c->keys[i], key) == 0)
            return (float)c->values[i];
    case_error(c, "missing parameter", key);
    return 0.0f;
}

static bool has_input(const Case *c, const char *name) {
    for (int i = 0; i < c->nin; i++)
        if (strcmp(c->in[i].name, name) == 0)
            return true;
    return false;
}

/* An input array of count values; missing or of another size is an error
 * (and a zeroed buffer, so that the kernels still run safely). */
static float *input(Case *c, const char *name, int64_t count) {
    for (int i = 0; i < c->nin; i++)
        if (strcmp(c->in[i].name, name) == 0) {
            if (c->in[i].count == count)
                return c->in[i].data;
            case_error(c, "wrong size of input", name);
        }
    case_error(c, "missing input", name);
    if (c->nout >= MAX_ARRAYS) /* reuse the last output slot as scratch */
        c->nout--;
    Array *a = &c->out[c->nout++];
    snprintf(a->name, sizeof a->name, "%s", "?");
    a->count = count;
    a->data = calloc((size_t)(count > 0 ? count : 1), sizeof *a->data);
    if (!a->data)
        exit(2);
    return a->data;
}

/* A fresh, NaN-poisoned output array. */
static float *output(Case *c, const char *name, int64_t count) {
    if (c->nout >= MAX_ARRAYS) {
        case_error(c, "too many outputs at", name);
        c->nout--;
        free(c->out[c->nout].data);
    }
    Array *a = &c->out[c->nout++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->count = count;
    a->data = falloc(count);
    return a->data;
}

static float *copy_of(Case *c, const char *out_name, const float *src, int64_t count) {
    float *p = output(c, out_name, count);
    memcpy(p, src, (size_t)count * sizeof *p);
    return p;
}

/* The rnn case of run_case. */
static void run_rnn_case(Case *c) {
    int64_t cell = iparam(c, "cell");
    if (cell < DLRT_CELL_RNN_TANH || cell > DLRT_CELL_GRU)
        case_error(c, "no such cell", "cell");
    DlrtRnn r = {.cell = (DlrtCell)cell, .steps = iparam(c, "T"), .input = iparam(c, "F"),
                 .hidden = iparam(c, "H"), .reverse = iparam(c, "reverse") != 0,
                 .last = iparam(c, "last") != 0, .fast = iparam(c, "fast") != 0};
    int64_t n = iparam(c, "n"), T = r.steps, F = r.input, H = r.hidden;
    int64_t gh = rnn_gates_of(r.cell) * H;
    int64_t S = r.cell == DLRT_CELL_LSTM ? 5 * H : r.cell == DLRT_CELL_GRU ? 4 * H : H;
    const float *x = input(c, "x", n * T * F), *w_ih = input(c, "w_ih", gh * F);
    const float *w_hh = input(c, "w_hh", gh * H);
    const float *b_ih = has_input(c, "b_ih") ? input(c, "b_ih", gh) : NULL;
    const float *b_hh = has_input(c, "b_hh") ? input(c, "b_hh", gh) : NULL;
    const float *h0 = has_input(c, "h0") ? input(c, "h0", n * H) : NULL;
    const float *c0 = has_input(c, "c0") ? input(c, "c0", n * H) : NULL;
    const float *lens = has_input(c, "lengths") ? input(c, "lengths", n) : NULL;
    const float *dy = input(c, "dy", n * (r.last ? 1 : T) * H);
    if (c->error[0])
        return;
    int32_t *lengths = NULL;
    if (lens) {
        lengths = malloc((size_t)n * sizeof *lengths);
        if (!lengths)
            exit(2);
        for (int64_t i = 0; i < n; i++)
            lengths[i] = (int32_t)lens[i];
    }
    int64_t wf = dlrt_rnn_workspace(&r, n, dlrt_threads());
    int64_t wb = dlrt_rnn_backward_workspace(&r, n, dlrt_threads());
    float *work = falloc(wf > wb ? wf : wb), *hprev = falloc(n * T * H);
    float *cache = falloc(n * T * S), *dpre_ih = falloc(n * T * gh);
    float *dpre_hh = r.cell == DLRT_CELL_GRU ? falloc(n * T * gh) : NULL;
    dlrt_rnn_forward(&r, n, x, w_ih, w_hh, b_ih, b_hh, lengths, h0, c0, NULL, NULL,
                     output(c, "y", n * (r.last ? 1 : T) * H), hprev, cache, work,
                     dlrt_threads());
    dlrt_rnn_backward(&r, n, dy, cache, hprev, w_hh, lengths, c0, dpre_ih, dpre_hh, work,
                      dlrt_threads());
    const float *dq = dpre_hh ? dpre_hh : dpre_ih;
    dlrt_dense_backward_input(n * T, F, gh, dpre_ih, w_ih, NULL, output(c, "dx", n * T * F));
    dlrt_dense_backward_weight(n * T, F, gh, dpre_ih, x, output(c, "dw_ih", gh * F));
    dlrt_dense_backward_weight(n * T, H, gh, dq, hprev, output(c, "dw_hh", gh * H));
    dlrt_bias_backward(n * T, gh, 1, dpre_ih, output(c, "db_ih", gh));
    dlrt_bias_backward(n * T, gh, 1, dq, output(c, "db_hh", gh));
    free(lengths);
    free(work);
    free(hprev);
    free(cache);
    free(dpre_ih);
    free(dpre_hh);
}

/* Runs one case.  The ops, their parameters, inputs -> outputs:
 *   conv2d   n c h w f oh ow kh kw sh sw ph pw dh dw groups; x w [b] dy
 *            -> y dx dw db (y with b when given; db from bias_backward)
 *   dense    n in out; x w [b] dy -> y dx dw db
 *   relu, sigmoid, tanh   count; x dy -> y dx
 *   maxpool, avgpool      n c h w oh ow kh kw sh sw ph pw count_include_pad;
 *            x dy -> y dx
 *   globalavgpool         n c hw; x dy -> y dx
 *   softmax  outer axis inner; x dy -> y dx
 *   concat   outer parts len0 len1 ...; in0 in1 ... dy -> y d0 d1 ...
 *            (copy_rows into [outer, sum len] and back out of dy)
 *   add      count; a b -> y y_in_a y_in_b (the last two written in place)
 *   sgd      count steps lr momentum nesterov weight_decay; p g0 g1 ...
 *            -> p [momentum_buffer]
 *   adam     count steps lr beta1 beta2 eps weight_decay; p g0 g1 ...
 *            -> p exp_avg exp_avg_sq (steps counted from 1)
 *   rnn      n T F H cell reverse last fast (DlrtRnn, cell as DlrtCell);
 *            x w_ih w_hh [b_ih] [b_hh] [h0] [c0] [lengths] dy
 *            -> y dx dw_ih dw_hh db_ih db_hh (the training forward, the
 *            backward recurrence, then the dense kernels over its dpre, as
 *            the compiler sums them; db_* also without the bias) */
static void run_case(Case *c) {
    const char *op = c->op;
    if (strcmp(op, "conv2d") == 0) {
        DlrtConv cv = {.c = iparam(c, "c"), .h = iparam(c, "h"), .w = iparam(c, "w"),
                       .f = iparam(c, "f"), .oh = iparam(c, "oh"), .ow = iparam(c, "ow"),
                       .kh = iparam(c, "kh"), .kw = iparam(c, "kw"), .sh = iparam(c, "sh"),
                       .sw = iparam(c, "sw"), .ph = iparam(c, "ph"), .pw = iparam(c, "pw"),
                       .dh = iparam(c, "dh"), .dw = iparam(c, "dw"),
                       .groups = iparam(c, "groups")};
        int64_t n = iparam(c, "n");
        if (cv.groups <= 0 || cv.c % cv.groups || cv.f % cv.groups) {
            case_error(c, "bad groups for", c->label);
            return;
        }
        int64_t nx = n * cv.c * cv.h * cv.w, ny = n * cv.f * cv.oh * cv.ow;
        int64_t nw = cv.f * (cv.c / cv.groups) * cv.kh * cv.kw;
        const float *x = input(c, "x", nx), *w = input(c, "w", nw), *dy = input(c, "dy", ny);
        const float *b = has_input(c, "b") ? input(c, "b", cv.f) : NULL;
        float *work = falloc(dlrt_conv2d_workspace(&cv, dlrt_threads()));
        if (!c->error[0]) {
            dlrt_conv2d_forward(&cv, n, x, w, b, output(c, "y", ny), work, dlrt_threads());
            dlrt_conv2d_backward_input(&cv, n, dy, w, NULL, output(c, "dx", nx), work, dlrt_threads());
            dlrt_conv2d_backward_weight(&cv, n, dy, x, output(c, "dw", nw), work, dlrt_threads());
            dlrt_bias_backward(n, cv.f, cv.oh * cv.ow, dy, output(c, "db", cv.f));
        }
        free(work);
    } else if (strcmp(op, "dense") == 0) {
        int64_t n = iparam(c, "n"), in = iparam(c, "in"), out = iparam(c, "out");
        const float *x = input(c, "x", n * in), *w = input(c, "w", out * in);
        const float *dy = input(c, "dy", n * out);
        const float *b = has_input(c, "b") ? input(c, "b", out) : NULL;
        if (!c->error[0]) {
            dlrt_dense_forward(n, in, out, x, w, b, DLRT_ACT_NONE, 0, output(c, "y", n * out));
            dlrt_dense_backward_input(n, in, out, dy, w, NULL, output(c, "dx", n * in));
            dlrt_dense_backward_weight(n, in, out, dy, x, output(c, "dw", out * in));
            dlrt_bias_backward(n, out, 1, dy, output(c, "db", out));
        }
    } else if (strcmp(op, "rnn") == 0) {
        run_rnn_case(c);
    } else if (strcmp(op, "relu") == 0 || strcmp(op, "sigmoid") == 0 ||
               strcmp(op, "tanh") == 0) {
        int64_t count = iparam(c, "count");
        const float *x = input(c, "x", count), *dy = input(c, "dy", count);
        if (c->error[0])
            return;
        float *y = output(c, "y", count), *dx = output(c, "dx", count);
        if (op[0] == 'r') {
            dlrt_relu_forward(count, x, y);
            dlrt_relu_backward(count, dy, y, dx);
        } else if (op[0] == 's') {
            dlrt_sigmoid_forward(count, x, y);
            dlrt_sigmoid_backward(count, dy, y, dx);
        } else {
            dlrt_tanh_forward(count, x, y);
            dlrt_tanh_backward(count, dy, y, dx);
        }
    } else if (strcmp(op, "maxpool") == 0 || strcmp(op, "avgpool") == 0) {
        DlrtPool p = {.c = iparam(c, "c"), .h = iparam(c, "h"), .w = iparam(c, "w"),
                      .oh = iparam(c, "oh"), .ow = iparam(c, "ow"), .kh = iparam(c, "kh"),
                      .kw = iparam(c, "kw"), .sh = iparam(c, "sh"), .sw = iparam(c, "sw"),
                      .ph = iparam(c, "ph"), .pw = iparam(c, "pw"),
                      .count_include_pad = iparam(c, "count_include_pad") != 0};
        int64_t n = iparam(c, "n"), nx = n * p.c * p.h * p.w, ny = n * p.c * p.oh * p.ow;
        const float *x = input(c, "x", nx), *dy = input(c, "dy", ny);
        if (c->error[0])
            return;
        float *y = output(c, "y", ny), *dx = output(c, "dx", nx);
        if (op[0] == 'm') {
            dlrt_maxpool_forward(&p, n, x, y);
            dlrt_maxpool_backward(&p, n, dy, x, dx);
        } else {
            dlrt_avgpool_forward(&p, n, x, y);
            dlrt_avgpool_backward(&p, n, dy, dx);
        }
    } else if (strcmp(op, "globalavgpool") == 0) {
        int64_t n = iparam(c, "n"), ch = iparam(c, "c"), hw = iparam(c, "hw");
        const float *x = input(c, "x", n * ch * hw), *dy = input(c, "dy", n * ch);
        if (c->error[0])
            return;
        dlrt_globalavgpool_forward(n, ch, hw, x, output(c, "y", n * ch));
        dlrt_globalavgpool_backward(n, ch, hw, dy, NULL, output(c, "dx", n * ch * hw));
    } else if (strcmp(op, "softmax") == 0) {
        int64_t outer = iparam(c, "outer"), axis = iparam(c, "axis"), inner = iparam(c, "inner");
        int64_t count = outer * axis * inner;
        const float *x = input(c, "x", count), *dy = input(c, "dy", count);
        if (c->error[0])
            return;
        float *y = output(c, "y", count);
        dlrt_softmax_forward(outer, axis, inner, x, y);
        dlrt_softmax_backward(outer, axis, inner, dy, y, output(c, "dx", count));
    } else if (strcmp(op, "concat") == 0) {
        int64_t outer = iparam(c, "outer"), parts = iparam(c, "parts"), total = 0;
        int64_t lens[MAX_ARRAYS / 2];
        if (parts < 1 || parts > MAX_ARRAYS / 2) {
            case_error(c, "bad number of parts in", c->label);
            return;
        }
        char name[32];
        for (int64_t i = 0; i < parts; i++) {
            snprintf(name, sizeof name, "len%" PRId64, i);
            lens[i] = iparam(c, name);
            total += lens[i];
        }
        const float *dy = input(c, "dy", outer * total);
        const float *in[MAX_ARRAYS / 2];
        for (int64_t i = 0; i < parts; i++) {
            snprintf(name, sizeof name, "in%" PRId64, i);
            in[i] = input(c, name, outer * lens[i]);
        }
        if (c->error[0])
            return;
        float *y = output(c, "y", outer * total);
        for (int64_t i = 0, off = 0; i < parts; off += lens[i], i++)
            dlrt_copy_rows(outer, lens[i], in[i], lens[i], 0, y, total, off);
        for (int64_t i = 0, off = 0; i < parts; off += lens[i], i++) {
            snprintf(name, sizeof name, "d%" PRId64, i);
            dlrt_copy_rows(outer, lens[i], dy, total, off, output(c, name, outer * lens[i]),
                           lens[i], 0);
        }
    } else if (strcmp(op, "add") == 0) {
        int64_t count = iparam(c, "count");
        const float *a = input(c, "a", count), *b = input(c, "b", count);
        if (c->error[0])
            return;
        dlrt_add(count, a, b, output(c, "y", count));
        float *ya = copy_of(c, "y_in_a", a, count);
        dlrt_add(count, ya, b, ya);
        float *yb = copy_of(c, "y_in_b", b, count);
        dlrt_add(count, a, yb, yb);
    } else if (strcmp(op, "sum") == 0) {
        int64_t count = iparam(c, "count");
        const float *terms[4];
        for (int k = 0; k < 4; k++) {
            char name[8];
            snprintf(name, sizeof name, "t%d", k);
            terms[k] = input(c, name, count);
        }
        const float *relu_y = input(c, "relu_y", count);
        if (c->error[0])
            return;
        dlrt_sum(count, 4, terms, false, NULL, output(c, "y", count));
        dlrt_sum(count, 4, terms, true, NULL, output(c, "y_relu", count));
        dlrt_sum(count, 4, terms, false, relu_y, output(c, "y_relu_grad", count));
        float *y2 = copy_of(c, "y_in_t2", terms[2], count);
        const float *over2[] = {terms[0], terms[1], y2, terms[3]};
        dlrt_sum(count, 4, over2, false, NULL, y2);
    } else if (strcmp(op, "sgd") == 0 || strcmp(op, "adam") == 0) {
        int64_t count = iparam(c, "count"), steps = iparam(c, "steps");
        bool adam = op[0] == 'a';
        float lr = fparam(c, "lr"), wd = fparam(c, "weight_decay");
        float momentum = adam ? 0.0f : fparam(c, "momentum");
        bool nesterov = adam ? false : iparam(c, "nesterov") != 0;
        float beta1 = adam ? fparam(c, "beta1") : 0.0f, beta2 = adam ? fparam(c, "beta2") : 0.0f;
        float eps = adam ? fparam(c, "eps") : 0.0f;
        const float *p0 = input(c, "p", count);
        if (steps < 0 || steps > MAX_ARRAYS - 2) {
            case_error(c, "bad number of steps in", c->label);
            return;
        }
        if (c->error[0])
            return;
        float *p = copy_of(c, "p", p0, count);
        float *s1 = NULL, *s2 = NULL;
        if (adam) {
            s1 = output(c, "exp_avg", count);
            s2 = output(c, "exp_avg_sq", count);
            memset(s2, 0, (size_t)count * sizeof *s2);
        } else if (momentum != 0.0f) {
            s1 = output(c, "momentum_buffer", count);
        }
        if (s1)
            memset(s1, 0, (size_t)count * sizeof *s1);
        char name[32];
        for (int64_t s = 0; s < steps; s++) {
            snprintf(name, sizeof name, "g%" PRId64, s);
            const float *g = input(c, name, count);
            if (c->error[0])
                return;
            if (adam)
                dlrt_adam_update(count, g, lr, (int32_t)(s + 1), beta1, beta2, eps, wd, p, s1,
                                 s2);
            else
                dlrt_sgd_update(count, g, lr, momentum, nesterov, wd, p, s1);
        }
    } else {
        case_error(c, "unknown op", op);
    }
}

/* Reads the next case; false at the end of the file or on an error (then
 * c->error says which). */
static bool read_case(FILE *in, Case *c) {
    char word[64];
    memset(c, 0, sizeof *c);
    if (fscanf(in, "%63s", word) != 1)
        return false;
    if (strcmp(word, "case") != 0 ||
        fscanf(in, "%63s %31s %d", c->label, c->op, &c->nparams) != 3 || c->nparams < 0 ||
        c->nparams > MAX_PARAMS) {
        snprintf(c->error, sizeof c->error, "expected 'case LABEL OP NPARAMS'");
        return false;
    }
    for (int i = 0; i < c->nparams; i++)
        if (fscanf(in, "%31s %lf", c->keys[i], &c->values[i]) != 2) {
            snprintf(c->error, sizeof c->error, "%s: expected KEY VALUE", c->label);
            return false;
        }
    if (fscanf(in, "%d", &c->nin) != 1 || c->nin < 0 || c->nin > MAX_ARRAYS) {
        snprintf(c->error, sizeof c->error, "%s: expected the number of arrays", c->label);
        c->nin = 0;
        return false;
    }
    for (int i = 0; i < c->nin; i++) {
        Array *a = &c->in[i];
        long long count;
        if (fscanf(in, "%31s %lld", a->name, &count) != 2 || count < 0 || count > 100000000) {
            snprintf(c->error, sizeof c->error, "%s: expected NAME COUNT", c->label);
            c->nin = i;
            return false;
        }
        a->count = count;
        a->data = falloc(count);
        for (int64_t j = 0; j < count; j++)
            if (fscanf(in, "%f", &a->data[j]) != 1) {
                snprintf(c->error, sizeof c->error, "%s: array %s ends early", c->label,
                         a->name);
                c->nin = i + 1;
                return false;
            }
    }
    return true;
}

static void free_case(Case *c) {
    for (int i = 0; i < c->nin; i++)
        free(c->in[i].data);
    for (int i = 0; i < c->nout; i++)
        free(c->out[i].data);
}

static int run_mode(const char *spec, const char *out_path) {
    FILE *in = fopen(spec, "r");
    if (!in) {
        fprintf(stderr, "test_kernels: cannot open '%s': %s\n", spec, strerror(errno));
        return 1;
    }
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "test_kernels: cannot open '%s': %s\n", out_path, strerror(errno));
        fclose(in);
        return 1;
    }
    Case *c = malloc(sizeof *c);
    int status = 0, cases = 0;
    while (c && read_case(in, c)) {
        run_case(c);
        if (c->error[0]) {
            fprintf(stderr, "test_kernels: %s: case %s: %s\n", spec, c->label, c->error);
            status = 1;
        } else {
            fprintf(out, "case %s %d\n", c->label, c->nout);
            for (int i = 0; i < c->nout; i++) {
                fprintf(out, "%s %" PRId64, c->out[i].name, c->out[i].count);
                for (int64_t j = 0; j < c->out[i].count; j++)
                    fprintf(out, " %.9g", (double)c->out[i].data[j]);
                fputc('\n', out);
            }
            cases++;
        }
        free_case(c);
    }
    if (c && c->error[0]) {
        fprintf(stderr, "test_kernels: %s: %s\n", spec, c->error);
        free_case(c);
        status = 1;
    }
    if (!c || cases == 0)
        status = 1;
    free(c);
    fclose(in);
    if (fclose(out) != 0)
        status = 1;
    return status;
}

int main(int argc, char **argv) {
    if (argc == 1)
        return run_unit_tests();
    if (argc == 4 && strcmp(argv[1], "run") == 0)
        return run_mode(argv[2], argv[3]);
    fprintf(stderr, "usage: test_kernels [run SPEC OUT]\n");
    return 2;
}
