/* int8_conv.c — the int8 convolution of int8 inference (dlc
 * --quantize=int8, docs/quantization.md); a dense layer is a 1x1 one.
 * The requantization of its sums is int8.c's.
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
 * Samples are split among the workers, each with its own column buffer,
 * so a thread count always gives the same bits (any count does: the sums
 * are exact). */
#include <string.h>

#include "dlrt.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VNNI_PATH 1
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

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
