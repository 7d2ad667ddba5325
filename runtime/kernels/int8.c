/* int8.c — the kernels of int8 inference (dlc --quantize=int8,
 * docs/quantization.md): quantize and dequantize, the requantization of
 * int32 sums, the int8 convolution (a dense layer is a 1x1 one) and max
 * pooling (the maximum of the integers, whose scale it keeps).
 *
 * The convolution lays each output position's window out as a row of
 * int8 (im2col, the row padded with zeros to whole 64-byte blocks), and
 * each result is the dot product of that row with a filter's row of
 * weights (padded alike), summed in int32: exact, so every path gives the
 * same integers.  Two paths:
 *   - portable C: the products of int8 by int8 summed in int32, which the
 *     compiler vectorizes as it can;
 *   - AVX-512 VNNI (DlrtQConv.vnni): vpdpbusd multiplies unsigned by
 *     signed bytes and adds each four products into an int32 lane, so the
 *     row is stored biased by 128 (x + 128, 0..255; a padding zero is 128)
 *     and 128 times the filter's sum of weights is taken back from each
 *     sum: sum w (x + 128) - 128 sum w = sum w x.  The weights stay -127..127
 *     (the quantize pass's symmetric range), so no product saturates.
 * The weights are padded and summed again at each call (as the batchnorm
 * fold is: a few operations per weight against oh * ow multiply-adds per
 * weight), into the caller's scratch memory; nothing is allocated.
 *
 * The requantization is integer: (acc + bias) * mult / 2^shift, rounded
 * half to even, then clamped, with bias, mult and shift computed once per
 * call and filter from the f32 scales in double (dlrt_requant_init).
 * Samples are split among the workers, each with its own column buffer,
 * so a thread count always gives the same bits (any count does: the sums
 * are exact). */
#include <math.h>
#include <string.h>

#include "dlrt.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VNNI_PATH 1
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- quantize, dequantize ----------------------------------------------- */

static int8_t quantize_one(double t) {
    if (!(t == t))
        return 0;
    return t >= 127 ? 127 : t <= -128 ? -128 : (int8_t)t;
}

void dlrt_quantize_s8(int64_t count, const float *x, float scale, int8_t *q) {
    for (int64_t i = 0; i < count; i++)
        q[i] = quantize_one(rintf(x[i] / scale));
}

void dlrt_quantize_s8_f64(int64_t count, const double *x, double scale, int8_t *q) {
    for (int64_t i = 0; i < count; i++)
        q[i] = quantize_one(rint(x[i] / scale));
}

void dlrt_dequantize_s8(int64_t count, const int8_t *q, float scale, float *y) {
    for (int64_t i = 0; i < count; i++)
        y[i] = (float)q[i] * scale;
}

void dlrt_dequantize_s8_f64(int64_t count, const int8_t *q, double scale, double *y) {
    for (int64_t i = 0; i < count; i++)
        y[i] = (double)q[i] * scale;
}

/* ---- weights ------------------------------------------------------------- */

double dlrt_quantize_weights(int64_t f, int64_t k, const float *w, const float *b,
                             const float *bn_w, const float *bn_b, const float *bn_mean,
                             const float *bn_var, double eps, int8_t *qw, float *wscale,
                             float *qbias) {
    double signal = 0, noise = 0;
    for (int64_t i = 0; i < f; i++) {
        double scale = bn_w ? (double)bn_w[i] / sqrt((double)bn_var[i] + eps) : 1;
        double bias = b ? b[i] : 0;
        qbias[i] = (float)(bn_w ? (double)bn_b[i] + (bias - (double)bn_mean[i]) * scale : bias);
        double amax = 0;
        for (int64_t j = 0; j < k; j++)
            amax = fmax(amax, fabs((double)w[i * k + j] * scale));
        float s = amax > 0 ? (float)(amax / 127) : 1.0f;
        wscale[i] = s;
        for (int64_t j = 0; j < k; j++) {
            double v = (double)w[i * k + j] * scale, q = rint(v / s);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            qw[i * k + j] = (int8_t)q;
            signal += v * v;
            noise += (v - q * s) * (v - q * s);
        }
    }
    return noise > 0 ? 10 * log10(signal / noise) : INFINITY;
}

/* ---- max pooling ---------------------------------------------------------- */

void dlrt_maxpool_s8(const DlrtPool *pool, int64_t n, const int8_t *x, int8_t *y) {
    const DlrtPool *p = pool;
    for (int64_t plane = 0; plane < n * p->c; plane++) {
        const int8_t *xp = x + plane * p->h * p->w;
        int8_t *yp = y + plane * p->oh * p->ow;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            int64_t y0 = oy * p->sh - p->ph, y1 = y0 + p->kh;
            y0 = y0 < 0 ? 0 : y0, y1 = y1 > p->h ? p->h : y1;
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t x0 = ox * p->sw - p->pw, x1 = x0 + p->kw;
                x0 = x0 < 0 ? 0 : x0, x1 = x1 > p->w ? p->w : x1;
                int8_t m = -128;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        m = xp[iy * p->w + ix] > m ? xp[iy * p->w + ix] : m;
                yp[oy * p->ow + ox] = m;
            }
        }
    }
}

/* ---- requantization ------------------------------------------------------ */

/* The most |bias| in units of the sums: |acc| is at most 65536 * 127 * 128
 * < 2^30, so (acc + bias) * mult stays below 2^62. */
#define BIAS_LIMIT ((double)(1 << 30))

void dlrt_requant_init(double acc_scale, double bias, double out_scale, DlrtRequant *r) {
    double b = rint(bias / acc_scale);
    r->bias = (int32_t)(b > BIAS_LIMIT ? BIAS_LIMIT : b < -BIAS_LIMIT ? -BIAS_LIMIT : b);
    int e;
    double mant = frexp(acc_scale / out_scale, &e); /* 0.5 <= mant < 1 */
    int64_t m = (int64_t)rint(ldexp(mant, 31));
    if (m == (INT64_C(1) << 31)) /* rounded up to 1.0 */
        m >>= 1, e++;
    int shift = 31 - e;
    if (shift > 62) /* a multiplier below 2^-32: every result rounds to 0 */
        m = 0, shift = 0;
    else if (shift < 0) /* a multiplier of 2^31 or more: every nonzero sum saturates */
        m = INT32_MAX, shift = 0;
    r->mult = (int32_t)m;
    r->shift = shift;
}

int8_t dlrt_requantize(int32_t acc, const DlrtRequant *r, bool relu) {
    int64_t p = ((int64_t)acc + r->bias) * r->mult;
    int64_t q = p;
    if (r->shift > 0) {
        q = p >> r->shift; /* floor: arithmetic shift */
        int64_t rem = p - q * ((int64_t)1 << r->shift), half = (int64_t)1 << (r->shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
    }
    int64_t lo = relu ? 0 : -128;
    return (int8_t)(q < lo ? lo : q > 127 ? 127 : q);
}

/* ---- the convolution ----------------------------------------------------- */

/* Taps of a group's window, padded to whole 64-byte blocks. */
static int64_t taps(const DlrtQConv *q) { return q->c / q->groups * q->kh * q->kw; }
static int64_t padded(const DlrtQConv *q) { return (taps(q) + 63) & ~(int64_t)63; }

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t dlrt_qconv_s8_work(const DlrtQConv *q, int threads) {
    size_t kp = (size_t)padded(q), p = (size_t)(q->oh * q->ow);
    return round64((size_t)q->f * kp) + round64((size_t)q->f * sizeof(int32_t)) +
           (size_t)(threads > 1 ? threads : 1) * round64(p * kp);
}

bool dlrt_cpu_has_vnni(void) {
#ifdef HAVE_VNNI_PATH
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#else
    return false;
#endif
}

/* The rows of group g's windows of one sample x [c,h,w]: row p holds the
 * window of output position p, channel by channel, each kh x kw; the
 * padding around the image is 0, stored as `bias` (128 for VNNI: a biased
 * zero), and the row's tail past the taps 0 (its weights are 0). */
static void im2col(const DlrtQConv *q, const int8_t *x, int64_t g, uint8_t bias, uint8_t *col) {
    int64_t cg = q->c / q->groups, kt = taps(q), kp = padded(q);
    for (int64_t oy = 0; oy < q->oh; oy++)
        for (int64_t ox = 0; ox < q->ow; ox++) {
            uint8_t *row = col + (oy * q->ow + ox) * kp;
            int64_t k = 0;
            for (int64_t ci = 0; ci < cg; ci++) {
                const int8_t *plane = x + (g * cg + ci) * q->h * q->w;
                for (int64_t ky = 0; ky < q->kh; ky++) {
                    int64_t iy = oy * q->sh - q->ph + ky * q->dh;
                    for (int64_t kx = 0; kx < q->kw; kx++, k++) {
                        int64_t ix = ox * q->sw - q->pw + kx * q->dw;
                        bool in = iy >= 0 && iy < q->h && ix >= 0 && ix < q->w;
                        row[k] = in ? (uint8_t)(plane[iy * q->w + ix] + bias) : bias;
                    }
                }
            }
            memset(row + kt, 0, (size_t)(kp - kt));
        }
}

static int32_t dot_portable(const int8_t *a, const uint8_t *b, int64_t kp) {
    int32_t s = 0;
    for (int64_t k = 0; k < kp; k++)
        s += (int32_t)a[k] * (int32_t)(int8_t)b[k];
    return s;
}

#ifdef HAVE_VNNI_PATH
/* sum over k of w[k] * xb[k], xb unsigned (the operand biased by 128) */
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static int32_t dot_vnni(const int8_t *w, const uint8_t *xb, int64_t kp) {
    __m512i s = _mm512_setzero_si512();
    for (int64_t k = 0; k < kp; k += 64)
        s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512((const void *)(xb + k)),
                                _mm512_loadu_si512((const void *)(w + k)));
    return _mm512_reduce_add_epi32(s);
}
#endif

/* One sample's results, group by group. */
static void qconv_sample(const DlrtQConv *q, const int8_t *x, const int8_t *wp,
                         const int32_t *wsum, const DlrtRequant *rq, int8_t *y, int32_t *acc,
                         uint8_t *col) {
    int64_t fg = q->f / q->groups, kp = padded(q), np = q->oh * q->ow;
    bool vnni = false;
#ifdef HAVE_VNNI_PATH
    vnni = q->vnni;
#endif
    for (int64_t g = 0; g < q->groups; g++) {
        im2col(q, x, g, vnni ? 128 : 0, col);
        for (int64_t p = 0; p < np; p++) {
            const uint8_t *row = col + p * kp;
            for (int64_t f = g * fg; f < (g + 1) * fg; f++) {
                int32_t s;
#ifdef HAVE_VNNI_PATH
                if (vnni)
                    s = dot_vnni(wp + f * kp, row, kp) - 128 * wsum[f];
                else
#endif
                    s = dot_portable(wp + f * kp, row, kp);
                if (rq)
                    y[f * np + p] = dlrt_requantize(s, &rq[f], q->relu);
                else
                    acc[f * np + p] = s;
            }
        }
    }
}

void dlrt_qconv_s8(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                   const DlrtRequant *rq, int8_t *y, int32_t *acc, void *work, int threads) {
    int64_t kt = taps(q), kp = padded(q), np = q->oh * q->ow;
    int8_t *wp = work;
    int32_t *wsum = (int32_t *)((char *)work + round64((size_t)(q->f * kp)));
    uint8_t *cols = (uint8_t *)wsum + round64((size_t)q->f * sizeof(int32_t));
    for (int64_t f = 0; f < q->f; f++) {
        int32_t s = 0;
        for (int64_t k = 0; k < kt; k++)
            s += wp[f * kp + k] = w[f * kt + k];
        memset(wp + f * kp + kt, 0, (size_t)(kp - kt));
        wsum[f] = s;
    }
    int64_t xs = q->c * q->h * q->w, ys = q->f * np;
#ifdef _OPENMP
    int t = threads < 1 ? 1 : threads > n ? (int)n : threads;
    size_t colsize = round64((size_t)(np * kp)); /* a worker's columns */
    if (t > 1) {
#pragma omp parallel for num_threads(t) schedule(static)
        for (int64_t s = 0; s < n; s++)
            qconv_sample(q, x + s * xs, wp, wsum, rq, y ? y + s * ys : NULL,
                         acc ? acc + s * ys : NULL, cols + (size_t)omp_get_thread_num() * colsize);
        return;
    }
#else
    (void)threads; /* one worker */
#endif
    for (int64_t s = 0; s < n; s++)
        qconv_sample(q, x + s * xs, wp, wsum, rq, y ? y + s * ys : NULL, acc ? acc + s * ys : NULL,
                     cols);
}
