/* int8.c — the small kernels of int8 inference (dlc --quantize=int8,
 * docs/quantization.md): quantize and dequantize, the weights' quantization
 * (a batchnorm folded in), max pooling (the maximum of the integers, whose
 * scale it keeps) and the requantization of int32 sums, which is integer:
 * (acc + bias) * mult / 2^shift, rounded half to even, then clamped, with
 * bias, mult and shift computed once per call and filter from the f32
 * scales in double (dlrt_requant_init).  The convolution is int8_conv.c's. */
#include <math.h>

#include "dlrt.h"

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
