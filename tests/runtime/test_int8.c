/* test_int8.c — libdlrt's int8 kernels (runtime/kernels/int8*.c) against
 * an integer reference written here, bit for bit.
 *
 *   test_int8     the tests; the last line says "N passed, M failed" (exit
 *                 1 on any failure); the VNNI cases say "skipped" on a CPU
 *                 without AVX-512 VNNI
 *
 * - the rounding of requantization, half to even, on ties of both signs,
 *   and its clamps (with and without relu); of quantize, rint's half to
 *   even, its clamps and NaN; dequantize;
 * - dlrt_requant_init's multiplier and shift for known scales;
 * - the convolution (and the dense layer, a 1x1 convolution of [in,1,1])
 *   on random operands (signed, and nonnegative as after a ReLU) and
 *   weights of many geometries (strides, padding, dilation, groups,
 *   depthwise, windows of taps not a multiple of 64, the VNNI path's
 *   blocks, phase planes and splits), the extremes (-128 or 127 everywhere
 *   by weights of +-127), requantized or as int32 sums, on the portable,
 *   AVX2 and VNNI paths (each where the CPU has it), the weights packed at
 *   the call and beforehand, at one worker and two: every result equal to
 *   a direct convolution summed in int64 and
 *   requantized by exact integer division (sign and magnitude, the
 *   remainder against half the divisor: another computation than the
 *   kernel's floor shift);
 * - max pooling of int8 against the maximum over each clipped window, for
 *   the unrolled 2x2 and 3x3 windows and others, with and without padding
 *   and ceil_mode's windows past the edge, and 2x2 windows tiling planes
 *   of one band of rows or several;
 * - quantize over long vectors (the vectorized loop and its tail) against
 *   rint in double of the same f32 quotient;
 * - the ops between layers: the residual addition's multipliers and
 *   rounding (ties of both signs, clamps, relu) against the sum a mult_a +
 *   b mult_b divided by 2^shift in double (exact: below 2^40) and rounded by
 *   rint, and within one unit of the real-valued a s_a / s_y + b s_b / s_y;
 *   the concatenation's requantizing copy (equal scales a byte copy); global
 *   average pooling's sum requantized, against the sum in int64. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HARNESS_FILE "test_int8.c"
#include "harness.h"

/* ---- the reference ------------------------------------------------------- */

/* (acc + bias) * mult / 2^shift rounded half to even, by sign and magnitude */
static int64_t ref_round(int64_t acc, const DlrtRequant *r) {
    int64_t p = (acc + r->bias) * (int64_t)r->mult;
    if (r->shift == 0)
        return p;
    uint64_t a = p < 0 ? (uint64_t)-p : (uint64_t)p, den = (uint64_t)1 << r->shift;
    uint64_t q = a / den, rem = a % den;
    if (2 * rem > den || (2 * rem == den && (q & 1)))
        q++;
    return p < 0 ? -(int64_t)q : (int64_t)q;
}

static int8_t ref_requantize(int64_t acc, const DlrtRequant *r, bool relu) {
    int64_t q = ref_round(acc, r), lo = relu ? 0 : -128;
    return (int8_t)(q < lo ? lo : q > 127 ? 127 : q);
}

/* the sums of a direct convolution, in int64 */
static void ref_conv(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                     int64_t *acc) {
    int64_t cg = q->c / q->groups, fg = q->f / q->groups;
    for (int64_t s = 0; s < n; s++)
        for (int64_t f = 0; f < q->f; f++)
            for (int64_t oy = 0; oy < q->oh; oy++)
                for (int64_t ox = 0; ox < q->ow; ox++) {
                    int64_t sum = 0, g = f / fg;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t ky = 0; ky < q->kh; ky++)
                            for (int64_t kx = 0; kx < q->kw; kx++) {
                                int64_t iy = oy * q->sh - q->ph + ky * q->dh;
                                int64_t ix = ox * q->sw - q->pw + kx * q->dw;
                                if (iy < 0 || iy >= q->h || ix < 0 || ix >= q->w)
                                    continue;
                                sum += (int64_t)w[((f * cg + ci) * q->kh + ky) * q->kw + kx] *
                                       x[((s * q->c + g * cg + ci) * q->h + iy) * q->w + ix];
                            }
                    acc[((s * q->f + f) * q->oh + oy) * q->ow + ox] = sum;
                }
}

/* ---- cases ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static void test_rounding(void) {
    /* a multiplier of exactly 1/2: mult 2^30, shift 31 */
    DlrtRequant half;
    dlrt_requant_init(0.5, 0, 1.0, &half);
    CHECK(half.mult == (1 << 30) && half.shift == 31 && half.bias == 0);
    int32_t accs[] = {1, 3, 5, -1, -3, -5, 2, -2, 7};
    int8_t want[] = {0, 2, 2, 0, -2, -2, 1, -1, 4}; /* 0.5, 1.5, 2.5, ... to even */
    for (size_t i = 0; i < sizeof accs / sizeof *accs; i++)
        CHECK(dlrt_requantize(accs[i], &half, false) == want[i]);
    CHECK(dlrt_requantize(-3, &half, true) == 0); /* relu: the ReLU folded in */
    CHECK(dlrt_requantize(1000, &half, false) == 127);
    CHECK(dlrt_requantize(-1000, &half, false) == -128);
    /* a bias of 2.5 units of the sums rounds to 2, -2.5 to -2 */
    DlrtRequant r;
    dlrt_requant_init(2.0, 5.0, 2.0, &r);
    CHECK(r.bias == 2 && dlrt_requantize(0, &r, false) == 2);
    dlrt_requant_init(2.0, -5.0, 2.0, &r);
    CHECK(r.bias == -2 && dlrt_requantize(0, &r, false) == -2);
    /* a multiplier of 1: shift 30, mult 2^30 */
    dlrt_requant_init(0.25, 0, 0.25, &r);
    CHECK(r.mult == (1 << 30) && r.shift == 30 && dlrt_requantize(-77, &r, false) == -77);
    /* 3/8 = 0.75 * 2^-1 */
    dlrt_requant_init(0.375, 0, 1.0, &r);
    CHECK(r.mult == 3 << 29 && r.shift == 32 && dlrt_requantize(4, &r, false) == 2 &&
          dlrt_requantize(12, &r, false) == 4 && dlrt_requantize(-4, &r, false) == -2);
    /* quantize: rint, half to even; clamps; NaN to 0 */
    float x[] = {2.5f, 3.5f, -2.5f, -3.5f, 0.49f, 200.0f, -300.0f, NAN, INFINITY, -INFINITY};
    int8_t wantq[] = {2, 4, -2, -4, 0, 127, -128, 0, 127, -128};
    int8_t q[10];
    dlrt_quantize_s8(10, x, 1.0f, q);
    CHECK(memcmp(q, wantq, sizeof q) == 0);
    double xd[] = {0.25, 0.75, -0.25, 1.25};
    int8_t wantd[] = {0, 2, 0, 2}; /* over 0.5: 0.5, 1.5, -0.5, 2.5 */
    dlrt_quantize_s8_f64(4, xd, 0.5, q);
    CHECK(memcmp(q, wantd, 4) == 0);
    float y[3];
    int8_t qq[3] = {-128, 0, 127};
    dlrt_dequantize_s8(3, qq, 0.5f, y);
    CHECK(y[0] == -64.0f && y[1] == 0.0f && y[2] == 63.5f);
}

/* One geometry: random operands, weights and scales (or the extremes:
 * -128, or 127 where nonnegative, by +-127), through every path at 1 and 2
 * workers, against the reference; nonnegative operands (ReLU's) take
 * AVX2's byte products. */
static void test_conv_with(DlrtQConv q, int64_t n, bool extremes, bool have_vnni, bool nonneg,
                           double ratio) {
    int64_t cg = q.c / q.groups;
    int64_t nx = n * q.c * q.h * q.w, nw = q.f * cg * q.kh * q.kw, ny = n * q.f * q.oh * q.ow;
    int8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw), *y = malloc((size_t)ny),
           *want = malloc((size_t)ny);
    int32_t *acc = malloc(sizeof *acc * (size_t)ny);
    int64_t *ref = malloc(sizeof *ref * (size_t)ny);
    DlrtRequant *rq = malloc(sizeof *rq * (size_t)q.f);
    for (int64_t i = 0; i < nx; i++)
        x[i] = extremes ? (nonneg ? 127 : -128)
                        : (int8_t)(nonneg ? next_u32() % 128 : next_u32() % 256 - 128);
    for (int64_t i = 0; i < nw; i++)
        w[i] = extremes ? (i % 2 ? 127 : -127) : (int8_t)(next_u32() % 255 - 127);
    for (int64_t f = 0; f < q.f; f++)
        if (ratio > 0) /* every filter's multiplier ratio, no bias */
            dlrt_requant_init(ratio, 0, 1, &rq[f]);
        else
            dlrt_requant_init(0.02 * (0.5 + next_u32() % 1000 / 1000.0) * 0.01 * (1 + f % 3),
                              (double)(next_u32() % 2001) / 1000.0 - 1.0, 0.05, &rq[f]);
    ref_conv(&q, n, x, w, ref);
    for (int64_t i = 0; i < ny; i++)
        want[i] = ref_requantize(ref[i], &rq[(i / (q.oh * q.ow)) % q.f], q.relu);
    size_t bytes = 0; /* the most any path needs */
    for (int way = 0; way < 3; way++) {
        DlrtQConv qv = q;
        qv.avx2 = way == 1, qv.vnni = way == 2;
        size_t b = dlrt_qconv_s8_work(&qv, 2);
        bytes = b > bytes ? b : bytes;
    }
    void *work = dlrt_alloc(bytes + 64, 1);
    void *packed = dlrt_alloc(dlrt_qconv_s8_packed(&q), 1);
    dlrt_qconv_s8_pack(&q, w, packed);
    char label[200];
    snprintf(label, sizeof label, "c=%lld %lldx%lld f=%lld k=%lldx%lld s=%lld p=%lld d=%lld g=%lld "
             "relu=%d n=%lld%s%s", (long long)q.c, (long long)q.h, (long long)q.w, (long long)q.f,
             (long long)q.kh, (long long)q.kw, (long long)q.sh, (long long)q.ph, (long long)q.dh,
             (long long)q.groups, q.relu, (long long)n, extremes ? " extremes" : "",
             nonneg ? " nonnegative" : "");
    static const char *const ways[] = {"portable", "AVX2", "VNNI"};
    for (int way = 0; way < 3; way++) {
        if ((way == 2 && !have_vnni) || (way == 1 && !dlrt_cpu_has_avx2()))
            continue;
        q.avx2 = way == 1, q.vnni = way == 2;
        for (int threads = 1; threads <= 2; threads++) {
            /* the weights packed at the call, then packed beforehand */
            memset(y, 0x55, (size_t)ny);
            dlrt_qconv_s8(&q, n, x, w, rq, y, NULL, NULL, work, threads);
            bool same = memcmp(y, want, (size_t)ny) == 0;
            memset(y, 0x55, (size_t)ny);
            dlrt_qconv_s8(&q, n, x, w, rq, y, NULL, packed, work, threads);
            same &= memcmp(y, want, (size_t)ny) == 0;
            dlrt_qconv_s8(&q, n, x, w, NULL, NULL, acc, NULL, work, threads);
            for (int64_t i = 0; i < ny; i++)
                same &= acc[i] == ref[i];
            if (!same)
                fprintf(stderr, "test_int8.c: %s, %s path, %d workers:\n", label, ways[way],
                        threads);
            CHECK(same);
        }
    }
    free(work), free(packed);
    free(x), free(w), free(y), free(want), free(acc), free(ref), free(rq);
}

static void test_conv(DlrtQConv q, int64_t n, bool extremes, bool have_vnni) {
    test_conv_with(q, n, extremes, have_vnni, false, 0);
    test_conv_with(q, n, extremes, have_vnni, true, 0);
}

static DlrtQConv conv(int64_t c, int64_t h, int64_t w, int64_t f, int64_t k, int64_t s,
                      int64_t p, int64_t d, int64_t g, bool relu) {
    DlrtQConv q = {.c = c, .h = h, .w = w, .f = f, .kh = k, .kw = k, .sh = s, .sw = s, .ph = p,
                   .pw = p, .dh = d, .dw = d, .groups = g, .relu = relu};
    q.oh = (h + 2 * p - d * (k - 1) - 1) / s + 1;
    q.ow = (w + 2 * p - d * (k - 1) - 1) / s + 1;
    return q;
}

static DlrtQConv dense(int64_t in, int64_t out, bool relu) {
    return (DlrtQConv){.c = in, .h = 1, .w = 1, .f = out, .oh = 1, .ow = 1, .kh = 1, .kw = 1,
                       .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1, .relu = relu};
}

static void test_maxpool(void) {
    DlrtPool p = {.c = 2, .h = 5, .w = 5, .oh = 3, .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2,
                  .ph = 1, .pw = 1};
    int8_t x[2 * 2 * 25], y[2 * 2 * 9];
    for (int i = 0; i < 100; i++)
        x[i] = (int8_t)(next_u32() % 256 - 128);
    dlrt_maxpool_s8(&p, 2, x, y);
    bool same = true;
    for (int pl = 0; pl < 4; pl++)
        for (int oy = 0; oy < 3; oy++)
            for (int ox = 0; ox < 3; ox++) {
                int m = -1000;
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                        if (iy >= 0 && iy < 5 && ix >= 0 && ix < 5 && x[pl * 25 + iy * 5 + ix] > m)
                            m = x[pl * 25 + iy * 5 + ix];
                    }
                same &= y[pl * 9 + oy * 3 + ox] == m;
            }
    CHECK(same);
}

/* max pooling of one geometry against the maximum over each window
 * clipped to the plane */
static void test_maxpool_geometry(int64_t c, int64_t h, int64_t w, int64_t k, int64_t s,
                                  int64_t pad, bool ceil_mode) {
    DlrtPool p = {.c = c, .h = h, .w = w, .kh = k, .kw = k, .sh = s, .sw = s, .ph = pad,
                  .pw = pad};
    int64_t span_h = h + 2 * pad - k, span_w = w + 2 * pad - k;
    p.oh = (span_h + (ceil_mode ? s - 1 : 0)) / s + 1;
    p.ow = (span_w + (ceil_mode ? s - 1 : 0)) / s + 1;
    /* ceil_mode: the last window starts inside the plane or its padding */
    if (ceil_mode && (p.oh - 1) * s >= h + pad)
        p.oh--;
    if (ceil_mode && (p.ow - 1) * s >= w + pad)
        p.ow--;
    int64_t n = 2, nx = n * c * h * w, ny = n * c * p.oh * p.ow;
    int8_t *x = malloc((size_t)nx), *y = malloc((size_t)ny);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (int8_t)(next_u32() % 256 - 128);
    dlrt_maxpool_s8(&p, n, x, y);
    bool same = true;
    for (int64_t pl = 0; pl < n * c; pl++)
        for (int64_t oy = 0; oy < p.oh; oy++)
            for (int64_t ox = 0; ox < p.ow; ox++) {
                int m = -1000;
                for (int64_t ky = 0; ky < k; ky++)
                    for (int64_t kx = 0; kx < k; kx++) {
                        int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
                        if (iy >= 0 && iy < h && ix >= 0 && ix < w &&
                            x[(pl * h + iy) * w + ix] > m)
                            m = x[(pl * h + iy) * w + ix];
                    }
                same &= y[(pl * p.oh + oy) * p.ow + ox] == m;
            }
    if (!same)
        fprintf(stderr, "test_int8.c: maxpool %lldx%lld k=%lld s=%lld pad=%lld ceil=%d\n",
                (long long)h, (long long)w, (long long)k, (long long)s, (long long)pad, ceil_mode);
    CHECK(same);
    free(x), free(y);
}

/* quantize over COUNT values (ties, halves, NaN, the infinities, beyond the
 * clamps) against rint in double of each f32 quotient */
static void test_quantize_count(int COUNT) {
    float *x = malloc((size_t)COUNT * sizeof *x), *y = malloc((size_t)COUNT * sizeof *y);
    int8_t *q = malloc((size_t)COUNT);
    for (int i = 0; i < COUNT; i++)
        x[i] = i % 97 == 0   ? NAN
               : i % 89 == 0 ? (i % 2 ? INFINITY : -INFINITY)
               : i % 3 == 0  ? (float)((int)(next_u32() % 601) - 300) * 0.5f /* ties */
                             : (float)((double)(next_u32() % 200001) / 500.0 - 200.0);
    for (int pass = 0; pass < 2; pass++) {
        float scale = pass ? 0.37f : 1.0f;
        dlrt_quantize_s8(COUNT, x, scale, q);
        bool same = true;
        for (int i = 0; i < COUNT; i++) {
            float t = x[i] / scale;
            double r = t != t ? 0 : rint((double)t);
            r = r > 127 ? 127 : r < -128 ? -128 : r;
            same &= q[i] == (int8_t)r;
        }
        CHECK(same);
    }
    dlrt_dequantize_s8(COUNT, q, 0.37f, y);
    bool same = true;
    for (int i = 0; i < COUNT; i++)
        same &= y[i] == (float)q[i] * 0.37f;
    CHECK(same);
    free(x), free(y), free(q);
}

/* and over enough values to be shared among the workers */
static void test_quantize_long(void) {
    test_quantize_count(1003);
    test_quantize_count(150001);
}

/* (a mult_a + b mult_b) / 2^shift in double, exact, rounded by rint (half
 * to even), clamped */
static int8_t ref_qadd(int a, int b, const DlrtQAdd *r, bool relu) {
    double p = ldexp((double)a * r->mult_a + (double)b * r->mult_b, -r->shift);
    double q = rint(p), lo = relu ? 0 : -128;
    return (int8_t)(q < lo ? lo : q > 127 ? 127 : q);
}

static void test_qadd(void) {
    /* 1/2 and 1/4: one shift (31) for both, from the larger */
    DlrtQAdd r;
    dlrt_qadd_init(0.5, 0.25, 1.0, &r);
    CHECK(r.mult_a == 1 << 30 && r.mult_b == 1 << 29 && r.shift == 31);
    int8_t a[] = {1, 3, 1, -1, -3, -1, 5, 127, -128, -3};
    int8_t b[] = {0, 0, 2, -2, 0, 0, 2, 127, -128, 2};
    int8_t want[] = {0, 2, 1, -1, -2, 0, 3, 95, -96, -1}; /* 0.5 -> 0, 1.5 -> 2, -1.5 -> -2 */
    int8_t wantr[] = {0, 2, 1, 0, 0, 0, 3, 95, 0, 0};
    int8_t y[10];
    dlrt_qadd_s8(10, a, b, &r, false, y);
    CHECK(memcmp(y, want, sizeof y) == 0);
    dlrt_qadd_s8(10, a, b, &r, true, y);
    CHECK(memcmp(y, wantr, sizeof y) == 0);
    /* the clamps: 1 + 1 of the result's scale */
    dlrt_qadd_init(1.0, 1.0, 1.0, &r);
    CHECK(r.mult_a == 1 << 30 && r.shift == 30);
    int8_t big[] = {127, -128, 100, -100}, sum[4];
    dlrt_qadd_s8(4, big, big, &r, false, sum);
    CHECK(sum[0] == 127 && sum[1] == -128 && sum[2] == 127 && sum[3] == -128);
    /* in place, y over a */
    int8_t ip[] = {10, -20}, other[] = {5, 5};
    dlrt_qadd_s8(2, ip, other, &r, false, ip);
    CHECK(ip[0] == 15 && ip[1] == -15);
    /* a multiplier rounding up to 2^31 takes one bit less */
    dlrt_qadd_init(1.0 - 1e-12, 0.5, 1.0, &r);
    CHECK(r.mult_a == 1 << 30 && r.shift == 30);
    /* multipliers too small (0) and too large (saturated) */
    dlrt_qadd_init(1e-12, 1e-12, 1.0, &r);
    CHECK(r.mult_a == 0 && r.mult_b == 0);
    dlrt_qadd_init(1e10, 1.0, 1.0, &r);
    CHECK(r.shift == 0 && r.mult_a == INT32_MAX && r.mult_b == 1);
    /* random scales and values: exactly the reference, and within one unit
     * of the real sum */
    enum { COUNT = 4099, LONG = 200003 }; /* the last runs long: shared among the workers */
    int8_t *xa = malloc(LONG), *xb = malloc(LONG), *yy = malloc(LONG);
    bool same = true, near = true;
    for (int t = 0; t < 41; t++) {
        int count = t == 40 ? LONG : COUNT;
        double sa = 0.001 + next_u32() % 100000 / 1e6, sb = 0.001 + next_u32() % 100000 / 1e6,
               sy = 0.001 + next_u32() % 100000 / 1e6;
        bool relu = t % 2;
        dlrt_qadd_init(sa, sb, sy, &r);
        for (int i = 0; i < count; i++)
            xa[i] = (int8_t)(next_u32() % 256 - 128), xb[i] = (int8_t)(next_u32() % 256 - 128);
        dlrt_qadd_s8(count, xa, xb, &r, relu, yy);
        for (int i = 0; i < count; i++) {
            same &= yy[i] == ref_qadd(xa[i], xb[i], &r, relu);
            double real = rint(xa[i] * sa / sy + xb[i] * sb / sy);
            real = real < (relu ? 0 : -128) ? (relu ? 0 : -128) : real > 127 ? 127 : real;
            near &= fabs(real - yy[i]) <= 1;
        }
    }
    CHECK(same);
    CHECK(near);
    free(xa), free(xb), free(yy);
}

/* a concatenation of two operands along channels: the first of the
 * result's scale (a copy), the second requantized */
static void test_requantize_rows(void) {
    enum { ROWS = 3, LA = 37, LB = 50, LY = LA + LB };
    int8_t a[ROWS * LA], b[ROWS * LB], y[ROWS * LY];
    for (int i = 0; i < ROWS * LA; i++)
        a[i] = (int8_t)(next_u32() % 256 - 128);
    for (int i = 0; i < ROWS * LB; i++)
        b[i] = (int8_t)(next_u32() % 256 - 128);
    DlrtRequant ra, rb;
    dlrt_requant_init(0.05f, 0, 0.05f, &ra);
    dlrt_requant_init(0.0375, 0, 0.05, &rb); /* 0.75: ties at every multiple of 2 */
    memset(y, 0x55, sizeof y);
    dlrt_requantize_rows_s8(ROWS, LA, a, &ra, y, LY);
    dlrt_requantize_rows_s8(ROWS, LB, b, &rb, y + LA, LY);
    bool same = true;
    for (int r = 0; r < ROWS; r++) {
        same &= memcmp(y + r * LY, a + r * LA, LA) == 0;
        for (int j = 0; j < LB; j++)
            same &= y[r * LY + LA + j] == ref_requantize(b[r * LB + j], &rb, false);
    }
    CHECK(same);
    /* 2 * 0.75 = 1.5 -> 2, 6 * 0.75 = 4.5 -> 4, -2 * 0.75 -> -2 */
    int8_t t[] = {2, 6, -2, -6}, u[4];
    dlrt_requantize_rows_s8(1, 4, t, &rb, u, 4);
    CHECK(u[0] == 2 && u[1] == 4 && u[2] == -2 && u[3] == -4);
    /* a larger scale saturates */
    DlrtRequant up;
    dlrt_requant_init(1.0, 0, 0.25, &up);
    int8_t v[] = {40, -40, 31, -32}, w[4];
    dlrt_requantize_rows_s8(1, 4, v, &up, w, 4);
    CHECK(w[0] == 127 && w[1] == -128 && w[2] == 124 && w[3] == -128);
    /* enough rows to be shared among the workers, with and without a bias */
    enum { MANY = 2001, LEN = 50 };
    int8_t *xm = malloc(MANY * LEN), *ym = malloc(MANY * 2 * LEN);
    for (int i = 0; i < MANY * LEN; i++)
        xm[i] = (int8_t)(next_u32() % 256 - 128);
    for (int biased = 0; biased < 2; biased++) {
        DlrtRequant rm;
        dlrt_requant_init(0.0375, biased ? 0.9 : 0, 0.05, &rm);
        dlrt_requantize_rows_s8(MANY, LEN, xm, &rm, ym + LEN, 2 * LEN);
        bool all = true;
        for (int r = 0; r < MANY; r++)
            for (int j = 0; j < LEN; j++)
                all &= ym[r * 2 * LEN + LEN + j] == ref_requantize(xm[r * LEN + j], &rm, false);
        CHECK(all);
    }
    free(xm), free(ym);
}

static void test_qglobalavgpool(void) {
    int64_t sizes[] = {1, 49, 7 * 7 * 9, 64};
    for (int k = 0; k < 4; k++) {
        int64_t hw = sizes[k], planes = 11;
        int8_t *x = malloc((size_t)(planes * hw)), y[11];
        for (int64_t i = 0; i < planes * hw; i++)
            x[i] = k == 3 ? (i < 64 ? -128 : 127) : (int8_t)(next_u32() % 256 - 128);
        DlrtRequant r;
        dlrt_requant_init(0.02 / (double)hw, 0, k == 3 ? 0.02 : 0.013, &r);
        dlrt_qglobalavgpool_s8(planes, hw, x, &r, y);
        bool same = true;
        for (int64_t p = 0; p < planes; p++) {
            int64_t sum = 0;
            for (int64_t j = 0; j < hw; j++)
                sum += x[p * hw + j];
            same &= y[p] == ref_requantize(sum, &r, false);
        }
        CHECK(same);
        if (k == 3) /* the mean of -128s is -128, of 127s 127 */
            CHECK(y[0] == -128 && y[1] == 127);
        free(x);
    }
    /* a mean of 2.5 units rounds to 2, of -2.5 to -2, of 3.5 to 4 */
    int8_t x[] = {2, 3, -2, -3, 3, 4}, y[3];
    DlrtRequant r;
    dlrt_requant_init(1.0 / 2, 0, 1.0, &r);
    dlrt_qglobalavgpool_s8(3, 2, x, &r, y);
    CHECK(y[0] == 2 && y[1] == -2 && y[2] == 4);
}

int main(void) {
    bool vnni = dlrt_cpu_has_vnni();
    test_rounding();
    test_maxpool();
    test_maxpool_geometry(6, 28, 28, 2, 2, 0, false); /* LeNet-5's */
    test_maxpool_geometry(64, 56, 56, 2, 2, 0, false); /* narrow rows, many bands, two workers */
    test_maxpool_geometry(1, 40, 256, 2, 2, 0, false); /* two bands of rows */
    test_maxpool_geometry(1, 6, 3000, 2, 2, 0, false); /* a band of one row */
    test_maxpool_geometry(3, 15, 13, 2, 2, 0, true);
    test_maxpool_geometry(4, 16, 16, 3, 2, 1, false); /* ResNet's stem */
    test_maxpool_geometry(64, 112, 112, 3, 2, 1, false); /* its planes, shared among workers */
    test_maxpool_geometry(3, 13, 11, 3, 2, 0, true);  /* GoogLeNet's */
    test_maxpool_geometry(2, 4, 4, 2, 2, 1, true);    /* the last window in the padding */
    test_maxpool_geometry(3, 9, 9, 3, 1, 1, false);   /* the inception branch */
    test_maxpool_geometry(480, 14, 14, 3, 1, 1, false); /* its planes, in chunks */
    test_maxpool_geometry(5, 12, 13, 5, 1, 2, false);
    test_maxpool_geometry(3, 3, 4, 3, 1, 1, false);     /* edges meeting in the middle */
    test_maxpool_geometry(2, 5, 6, 1, 1, 0, false);     /* a window of one */
    test_maxpool_geometry(2, 200, 200, 3, 1, 1, false); /* a plane past the buffer */
    test_maxpool_geometry(2, 10, 12, 4, 3, 1, false);
    test_maxpool_geometry(2, 3, 3, 5, 1, 2, false);   /* a window wider than the plane */
    /* a plane too large for the whole-plane passes, not for the rows' */
    test_maxpool_geometry(2, 150, 150, 3, 2, 1, false);
    test_maxpool_geometry(1, 140, 141, 2, 1, 0, true);
    /* planes too large for either pass's buffer: the loops */
    test_maxpool_geometry(1, 300, 300, 3, 2, 1, true);
    test_maxpool_geometry(1, 260, 250, 3, 1, 1, false);
    test_quantize_long();
    test_qadd();
    test_requantize_rows();
    test_qglobalavgpool();
    /* LeNet-5's layers */
    test_conv(conv(1, 28, 28, 6, 5, 1, 2, 1, 1, true), 3, false, vnni);
    test_conv(conv(6, 14, 14, 16, 5, 1, 0, 1, 1, true), 2, false, vnni);
    test_conv(dense(400, 120, true), 5, false, vnni);
    test_conv(dense(84, 10, false), 4, false, vnni);
    /* strides, padding, dilation, kernels of other sizes */
    test_conv(conv(3, 11, 9, 8, 3, 2, 1, 1, 1, false), 2, false, vnni);
    test_conv(conv(5, 13, 13, 7, 3, 1, 2, 2, 1, false), 2, false, vnni);
    test_conv(conv(16, 7, 7, 32, 1, 1, 0, 1, 1, true), 2, false, vnni);
    test_conv(conv(13, 9, 9, 9, 2, 3, 0, 1, 1, false), 3, false, vnni);
    /* groups, depthwise */
    test_conv(conv(8, 8, 8, 12, 3, 1, 1, 1, 4, false), 2, false, vnni);
    test_conv(conv(6, 8, 8, 6, 3, 1, 1, 1, 6, true), 2, false, vnni);
    /* the VNNI path's register blocks, phase planes and splits: planes
       whose padded rows are not a vector's multiple, strides of 2 with and
       without padding, a 7x7 stem, one sample split among two workers by
       filters and (few filters) by positions, a dense layer's tail */
    test_conv(conv(64, 14, 14, 64, 3, 1, 1, 1, 1, true), 1, false, vnni);
    test_conv(conv(32, 15, 15, 20, 3, 2, 1, 1, 1, false), 2, false, vnni);
    test_conv(conv(16, 14, 14, 8, 1, 2, 0, 1, 1, true), 1, false, vnni);
    test_conv(conv(3, 32, 32, 16, 7, 2, 3, 1, 1, true), 1, false, vnni);
    test_conv(conv(24, 7, 7, 6, 3, 1, 1, 1, 1, false), 1, false, vnni);
    test_conv(conv(12, 7, 7, 17, 3, 1, 1, 1, 1, true), 2, false, vnni); /* blocks of 6, 6, 5 */
    test_conv(conv(4, 40, 40, 2, 3, 1, 1, 1, 1, false), 1, false, vnni);
    test_conv(conv(10, 9, 9, 5, 3, 2, 2, 2, 1, false), 1, false, vnni);
    test_conv(dense(512, 37, true), 9, false, vnni);
    /* planes converted 64 columns at a time: a whole 12x12 plane (1x1, no
       padding), rows of 66 columns with padding */
    test_conv(conv(32, 12, 12, 20, 1, 1, 0, 1, 1, true), 2, false, vnni);
    test_conv(conv(8, 66, 66, 3, 3, 1, 1, 1, 1, false), 1, false, vnni);
    /* entries of 4 columns of one channel (few channels, wide windows):
       strides 1 to 3, a row of 70, 7 taps a row (two groups, one short) */
    test_conv(conv(1, 70, 70, 5, 5, 1, 2, 1, 1, true), 1, false, vnni);
    test_conv(conv(2, 23, 23, 9, 7, 2, 3, 1, 1, false), 2, false, vnni);
    test_conv(conv(1, 17, 17, 4, 8, 3, 1, 1, 1, false), 1, false, vnni);
    /* the requantization's ties (a multiplier of 1/2: every odd sum) and
       multipliers of 2^-20 and 2^-40 (shifts over 45, which the VNNI
       epilogue computes in integers, not in double) */
    test_conv_with(conv(8, 9, 9, 8, 1, 1, 0, 1, 1, false), 2, false, vnni, false, 0.5);
    test_conv_with(conv(8, 9, 9, 8, 3, 1, 1, 1, 1, true), 2, false, vnni, true, 0.5);
    test_conv_with(conv(64, 6, 6, 4, 3, 1, 1, 1, 1, false), 1, false, vnni, false, 0x1p-20);
    test_conv_with(conv(64, 6, 6, 4, 3, 1, 1, 1, 1, false), 1, true, vnni, false, 0x1p-40);
    /* 129 taps: a window of three blocks of 64, the last nearly empty */
    test_conv(dense(129, 17, false), 3, false, vnni);
    /* the extremes: every product -128 * +-127, in long windows */
    test_conv(conv(64, 6, 6, 4, 3, 1, 1, 1, 1, false), 1, true, vnni);
    test_conv(dense(4096, 3, false), 2, true, vnni);
    if (!vnni)
        printf("VNNI path: skipped (this CPU has no AVX-512 VNNI)\n");
    return harness_report();
}
