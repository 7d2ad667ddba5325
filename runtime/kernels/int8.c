/* int8.c — the small kernels of int8 inference (dlc --quantize=int8,
 * docs/quantization.md): quantize and dequantize, the weights' quantization
 * (a batchnorm folded in), max pooling (the maximum of the integers, whose
 * scale it keeps) and the requantization of int32 sums, which is integer:
 * (acc + bias) * mult / 2^shift, rounded half to even, then clamped, with
 * bias, mult and shift computed once per call and filter from the f32
 * scales in double (dlrt_requant_init).  The ops that keep a network int8
 * between its layers are here too, on the same integer rounding: the
 * residual addition of two int8 tensors of their own scales (dlrt_qadd_s8),
 * a concatenation's copy that requantizes each operand to the result's
 * scale (dlrt_requantize_rows_s8) and global average pooling as an int32
 * sum requantized (dlrt_qglobalavgpool_s8).  The convolution is
 * int8_conv.c's. */
#include <math.h>
#include <string.h>

#include "dlrt.h"
#include "parallel.h"

/* The workers of an elementwise loop over `count` elements: kernels.c's
 * rule (dlrt_workers), and each worker takes one contiguous share. */
static int elementwise_workers(int64_t count) { return dlrt_workers(1 << 30, count, count); }

static void share(int64_t count, int64_t k, int t, int64_t *lo, int64_t *hi) {
    *lo = count * k / t, *hi = count * (k + 1) / t;
}

/* ---- quantize, dequantize ----------------------------------------------- */

static int8_t quantize_one(double t) {
    if (!(t == t))
        return 0;
    return t >= 127 ? 127 : t <= -128 ? -128 : (int8_t)t;
}

/* The f32 form without branches, so that GCC vectorizes it (this file is
 * compiled at -O3 for the machine, as kernels.c is): the clamps as min and
 * max, which leave NaN where it is (the comparisons are false), then NaN
 * (t != t) to 0; rintf rounds half to even in the default rounding mode.
 * The same integers as quantize_one of the same rintf. */
static void quantize_range(int64_t lo, int64_t hi, const float *x, float scale, int8_t *q) {
    for (int64_t i = lo; i < hi; i++) {
        float t = rintf(x[i] / scale);
        t = t > 127.0f ? 127.0f : t;
        t = t < -128.0f ? -128.0f : t;
        q[i] = (int8_t)(int32_t)(t == t ? t : 0.0f);
    }
}

void dlrt_quantize_s8(int64_t count, const float *x, float scale, int8_t *q) {
    int t = elementwise_workers(count);
    PARALLEL_FOR(t, for (int64_t k = 0; k < t; k++) {
        int64_t lo, hi;
        share(count, k, t, &lo, &hi);
        quantize_range(lo, hi, x, scale, q);
    });
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

static inline int8_t max_s8(int8_t a, int8_t b) { return a > b ? a : b; }

/* One output row's windows ox0 <= ox < ox1, each wholly inside the plane
 * (no clipping), whose top-left input is row + ox * SW: for a kernel of
 * KH x KW and a stride SW known at compile time the loops unroll to
 * straight maxima, which GCC vectorizes (strided loads as permutations). */
#define MAXPOOL_ROW(KH, KW, SW)                                                \
    for (int64_t ox = ox0; ox < ox1; ox++) {                                  \
        const int8_t *r = row + ox * (SW);                                    \
        int8_t m = r[0];                                                      \
        for (int64_t ky = 0; ky < (KH); ky++)                                 \
            for (int64_t kx = 0; kx < (KW); kx++)                             \
                m = max_s8(m, r[ky * w + kx]);                                \
        yrow[ox] = m;                                                         \
    }

/* The windows of output row oy, clipped to the plane, from ox0 to ox1. */
static void maxpool_clipped(const DlrtPool *p, const int8_t *xp, int8_t *yp, int64_t oy,
                            int64_t ox0, int64_t ox1) {
    int64_t y0 = oy * p->sh - p->ph, y1 = y0 + p->kh;
    y0 = y0 < 0 ? 0 : y0, y1 = y1 > p->h ? p->h : y1;
    for (int64_t ox = ox0; ox < ox1; ox++) {
        int64_t x0 = ox * p->sw - p->pw, x1 = x0 + p->kw;
        x0 = x0 < 0 ? 0 : x0, x1 = x1 > p->w ? p->w : x1;
        int8_t m = -128;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++)
                m = max_s8(m, xp[iy * p->w + ix]);
        yp[oy * p->ow + ox] = m;
    }
}

/* The first output index whose window starts at or after 0, and the end
 * of those that also end at or before `size`: the windows not clipped. */
static void inside(int64_t out, int64_t k, int64_t s, int64_t pad, int64_t size, int64_t *lo,
                   int64_t *hi) {
    int64_t a = (pad + s - 1) / s, b = size + pad - k < 0 ? 0 : (size + pad - k) / s + 1;
    b = b > out ? out : b;
    *lo = a > b ? b : a;
    *hi = b;
}

/* 2x2 windows of stride 2 that tile the plane exactly (h = 2 oh, w = 2 ow,
 * no padding: LeNet's, VGG's).  Then every plane, and so the tensor, is
 * rows double rows [rows][2][w] whose row r gives output row r, and the
 * passes run over as many double rows at a time as the buffers hold.
 * Wide rows (VGG's): the maximum of each row pair into v (contiguous
 * rows), then of each pair of neighbours in v, whose pair j is output j.
 * Narrow rows (LeNet's 28 and 10 bytes), where a loop a row long would not
 * vectorize: the maximum of each pair of neighbours into u
 * ([rows][2][ow]), then of each element of u and the one a row below into
 * v, whose even rows are the outputs (the odd rows computed and never
 * read, for loops that run long). */
#define MAXPOOL_2X2_BUF 4096
static void maxpool_2x2(const DlrtPool *p, int64_t rows, const int8_t *x, int8_t *y) {
    int8_t u[MAXPOOL_2X2_BUF], v[MAXPOOL_2X2_BUF];
    int64_t w = p->w, ow = p->ow, band = MAXPOOL_2X2_BUF / w;
    for (int64_t r0 = 0; r0 < rows; r0 += band) {
        int64_t count = rows - r0 < band ? rows - r0 : band;
        const int8_t *xr = x + r0 * 2 * w;
        int8_t *yr = y + r0 * ow;
        if (ow >= 64) {
            for (int64_t r = 0; r < count; r++)
                for (int64_t i = 0; i < w; i++)
                    v[r * w + i] = max_s8(xr[2 * r * w + i], xr[(2 * r + 1) * w + i]);
            for (int64_t j = 0; j < count * ow; j++)
                yr[j] = max_s8(v[2 * j], v[2 * j + 1]);
            continue;
        }
        int64_t m = count * w; /* bytes of u: 2 count ow */
        for (int64_t k = 0; k < m; k++)
            u[k] = max_s8(xr[2 * k], xr[2 * k + 1]);
        for (int64_t k = 0; k < m - ow; k++)
            v[k] = max_s8(u[k], u[k + ow]);
        for (int64_t r = 0; r < count; r++)
            memcpy(yr + r * ow, v + 2 * r * ow, (size_t)ow);
    }
}

/* Any window, in two passes that vectorize: each input row's maxima over
 * the window's columns (the row padded with -128, the least int8, which a
 * maximum ignores as the clipping does: windows that reach past the plane,
 * padding and ceil_mode's, take the maximum of what they cover) into hm,
 * then each output row's maximum over the rows its window covers.  The
 * row and hm live in the caller's buffer of maxpool_separable_bytes. */
static int64_t maxpool_separable_bytes(const DlrtPool *p) {
    return (p->ow * p->sw + p->kw + 64) + p->h * p->ow;
}

static void maxpool_separable(const DlrtPool *p, const int8_t *xp, int8_t *yp, int8_t *buf) {
    int64_t ow = p->ow, sw = p->sw, kw = p->kw, len = ow * sw + kw + 64;
    int8_t *row = buf, *hm = buf + len;
    memset(row, -128, (size_t)len);
    for (int64_t iy = 0; iy < p->h; iy++) {
        memcpy(row + p->pw, xp + iy * p->w, (size_t)p->w);
        int8_t *h = hm + iy * ow;
        /* column by column of the window, each a loop over the outputs */
        if (sw == 1) {
            memcpy(h, row, (size_t)ow);
            for (int64_t kx = 1; kx < kw; kx++)
                for (int64_t ox = 0; ox < ow; ox++)
                    h[ox] = max_s8(h[ox], row[ox + kx]);
        } else {
            for (int64_t ox = 0; ox < ow; ox++)
                h[ox] = row[ox * sw];
            for (int64_t kx = 1; kx < kw; kx++)
                for (int64_t ox = 0; ox < ow; ox++)
                    h[ox] = max_s8(h[ox], row[ox * sw + kx]);
        }
    }
    for (int64_t oy = 0; oy < p->oh; oy++) {
        int64_t y0 = oy * p->sh - p->ph, y1 = y0 + p->kh;
        y0 = y0 < 0 ? 0 : y0, y1 = y1 > p->h ? p->h : y1;
        int8_t *out = yp + oy * ow;
        memset(out, -128, (size_t)ow);
        for (int64_t iy = y0; iy < y1; iy++) {
            const int8_t *h = hm + iy * ow;
            for (int64_t ox = 0; ox < ow; ox++)
                out[ox] = max_s8(out[ox], h[ox]);
        }
    }
}

/* out[ox] = in[ox sw], ox < ow: a stride of 2 as the first byte of each
 * 16-bit pair, which GCC vectorizes (a narrowing) where the byte-by-byte
 * loop it does not. */
static void pick_row(const int8_t *in, int64_t ow, int64_t sw, int8_t *out) {
    if (sw == 1) {
        memcpy(out, in, (size_t)ow);
        return;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (sw == 2) {
        for (int64_t ox = 0; ox < ow; ox++) {
            uint16_t pair;
            memcpy(&pair, in + 2 * ox, sizeof pair);
            out[ox] = (int8_t)(uint8_t)pair;
        }
        return;
    }
#endif
    for (int64_t ox = 0; ox < ow; ox++)
        out[ox] = in[ox * sw];
}

/* The same two passes over the whole padded plane as one array (a pass's
 * maxima that straddle two rows are never read), at every row and column,
 * then the outputs picked out at the stride: long loops instead of a short
 * one per row, which small planes (GoogLeNet's) spent their time in.  The
 * plane is padded with -128 as far as the last window reaches (ceil_mode). */
static void plane_extent(const DlrtPool *p, int64_t *hp, int64_t *wp) {
    int64_t a = p->ph + p->h, b = (p->oh - 1) * p->sh + p->kh;
    int64_t c = p->pw + p->w, d = (p->ow - 1) * p->sw + p->kw;
    *hp = a > b ? a : b, *wp = c > d ? c : d;
}

static int64_t maxpool_plane_bytes(const DlrtPool *p) {
    int64_t hp, wp;
    plane_extent(p, &hp, &wp);
    return 2 * (hp * wp + 64);
}

static void maxpool_plane(const DlrtPool *p, const int8_t *xp, int8_t *yp, int8_t *buf) {
    int64_t hp, wp;
    plane_extent(p, &hp, &wp);
    int64_t n = hp * wp;
    int8_t *pad = buf, *hm = buf + n + 64;
    memset(pad, -128, (size_t)(n + 64));
    for (int64_t iy = 0; iy < p->h; iy++)
        memcpy(pad + (iy + p->ph) * wp + p->pw, xp + iy * p->w, (size_t)p->w);
    int64_t nh = n - p->kw + 1; /* the maxima over the window's columns */
    memcpy(hm, pad, (size_t)nh);
    for (int64_t kx = 1; kx < p->kw; kx++)
        for (int64_t i = 0; i < nh; i++)
            hm[i] = max_s8(hm[i], pad[i + kx]);
    /* then over its rows, into pad, as far as the last output */
    int64_t nv = (p->oh - 1) * p->sh * wp + (p->ow - 1) * p->sw + 1;
    memcpy(pad, hm, (size_t)nv);
    for (int64_t ky = 1; ky < p->kh; ky++)
        for (int64_t i = 0; i < nv; i++)
            pad[i] = max_s8(pad[i], hm[i + ky * wp]);
    /* the outputs, every sw-th of every sh-th row */
    int64_t oh = p->oh, ow = p->ow, sh = p->sh, sw = p->sw;
    for (int64_t oy = 0; oy < oh; oy++) {
        const int8_t *v = pad + oy * sh * wp;
        int8_t *out = yp + oy * ow;
        pick_row(v, ow, sw, out);
    }
}

/* The separable passes' buffer, on the stack up to this size. */
#define MAXPOOL_SEPARABLE_BUF 32768

/* Small planes many at a time as one array, with no padded copy and no loop a row long
 * (GoogLeNet's rows are 7 to 28 bytes; planes of up to 32x32, where this
 * measured faster than maxpool_plane): every position's window maxima
 * over the window's columns into hm, then over its rows into v, each a few
 * loops over the whole array that vectorize, then the outputs picked out
 * at the strides (v is the output itself where the windows keep the
 * plane's size: stride 1, k = 2 pad + 1).  Position (iy, ix) takes the
 * window that starts at (iy - ph, ix - pw), so output (oy, ox) is position
 * (oy sh, ox sw), which must lie in the plane (it does unless ceil_mode's
 * last window starts in the padding).  A tap counts where it lies in the
 * plane, which an element's column (col) or row (row) in its plane tells;
 * every window holds its position (pad < k), so leaving the others out is
 * what the padding (never a maximum) does. */
#define MAXPOOL_MASKED_BUF 16384
#define MAXPOOL_MASKED_PLANE 1024 /* larger planes are faster padded one at a time */
static bool maxpool_masked_fits(const DlrtPool *p) {
    return p->h <= 255 && p->w <= 255 && p->h * p->w <= MAXPOOL_MASKED_PLANE &&
           p->ph < p->kh && p->pw < p->kw && (p->oh - 1) * p->sh < p->h &&
           (p->ow - 1) * p->sw < p->w;
}

/* out[i] = the maximum of in[i + (k - pad) step] over the k < kn whose
 * index idx[i] + k - pad lies in [0, size), i < n; where i + (k - pad) step
 * leaves the array, so does the index its plane. */
static void window_max(const int8_t *in, const uint8_t *idx, int64_t size, int64_t kn,
                       int64_t pad, int64_t step, int64_t n, int8_t *out) {
    memcpy(out, in, (size_t)n); /* the position's own tap */
    for (int64_t k = 0; k < kn; k++) {
        int64_t d = k - pad, off = d * step;
        if (d == 0)
            continue;
        uint8_t lo = (uint8_t)(d < 0 ? -d : 0), hi = (uint8_t)(d > 0 ? size - d : size);
        for (int64_t i = off < 0 ? -off : 0; i < (off > 0 ? n - off : n); i++) {
            int8_t v = in[i + off];
            out[i] = idx[i] >= lo && idx[i] < hi && v > out[i] ? v : out[i];
        }
    }
}

/* a[0..part) repeated to fill a[0..n) */
static void repeat(uint8_t *a, int64_t part, int64_t n) {
    for (int64_t have = part; have < n; have *= 2)
        memcpy(a + have, a, (size_t)(n - have < have ? n - have : have));
}

static void maxpool_masked(const DlrtPool *p, int64_t planes, const int8_t *x, int8_t *y) {
    int8_t hm[MAXPOOL_MASKED_BUF], v[MAXPOOL_MASKED_BUF];
    uint8_t col[MAXPOOL_MASKED_BUF], row[MAXPOOL_MASKED_BUF];
    int64_t h = p->h, w = p->w, n = planes * h * w, oh = p->oh, ow = p->ow;
    for (int64_t i = 0; i < w; i++)
        col[i] = (uint8_t)i;
    repeat(col, w, n);
    for (int64_t r = 0; r < h; r++)
        memset(row + r * w, (int)r, (size_t)w);
    repeat(row, h * w, n);
    bool same = p->sh == 1 && p->sw == 1 && oh == h && ow == w;
    window_max(x, col, w, p->kw, p->pw, 1, n, hm);
    window_max(hm, row, h, p->kh, p->ph, w, n, same ? y : v);
    if (same)
        return;
    int64_t sh = p->sh, sw = p->sw;
    for (int64_t r = 0; r < planes * oh; r++) {
        const int8_t *in = v + (r / oh * h + r % oh * sh) * w;
        int8_t *out = y + r * ow;
        pick_row(in, ow, sw, out);
    }
}

/* A plane's windows by loops: those that reach past the plane (padding,
 * ceil_mode) clipped to it (the edges, by the generic loop); the others,
 * the interior, by a loop without bounds checks, unrolled for the usual
 * windows. */
static void maxpool_loops(const DlrtPool *p, const int8_t *xp, int8_t *yp) {
    int64_t oy0, oy1, ox0, ox1, w = p->w, sw = p->sw;
    inside(p->oh, p->kh, p->sh, p->ph, p->h, &oy0, &oy1);
    inside(p->ow, p->kw, p->sw, p->pw, p->w, &ox0, &ox1);
    for (int64_t oy = 0; oy < p->oh; oy++) {
        if (oy < oy0 || oy >= oy1) {
            maxpool_clipped(p, xp, yp, oy, 0, p->ow);
            continue;
        }
        maxpool_clipped(p, xp, yp, oy, 0, ox0);
        const int8_t *row = xp + (oy * p->sh - p->ph) * w - p->pw;
        int8_t *yrow = yp + oy * p->ow;
        if (p->kh == 2 && p->kw == 2 && sw == 2)
            MAXPOOL_ROW(2, 2, 2)
        else if (p->kh == 3 && p->kw == 3 && sw == 2)
            MAXPOOL_ROW(3, 3, 2)
        else if (p->kh == 3 && p->kw == 3 && sw == 1)
            MAXPOOL_ROW(3, 3, 1)
        else
            MAXPOOL_ROW(p->kh, p->kw, sw)
        maxpool_clipped(p, xp, yp, oy, ox1, p->ow);
    }
}

/* How a plane is pooled. */
typedef enum { POOL_PLANE, POOL_SEPARABLE, POOL_LOOPS } PoolWay;

static void maxpool_one(const DlrtPool *p, PoolWay way, const int8_t *xp, int8_t *yp) {
    int8_t buf[MAXPOOL_SEPARABLE_BUF];
    switch (way) {
    case POOL_PLANE: maxpool_plane(p, xp, yp, buf); break;
    case POOL_SEPARABLE: maxpool_separable(p, xp, yp, buf); break;
    case POOL_LOOPS: maxpool_loops(p, xp, yp); break;
    }
}

/* 2x2 windows of stride 2 that tile the plane take maxpool_2x2; planes
 * small enough, maxpool_masked; others the passes over the whole plane
 * where it fits on the stack, or row by row where a row does, else
 * maxpool_loops.  The planes are shared among the workers. */
void dlrt_maxpool_s8(const DlrtPool *pool, int64_t n, const int8_t *x, int8_t *y) {
    const DlrtPool *p = pool;
    int64_t planes = n * p->c, hw = p->h * p->w, ohw = p->oh * p->ow;
    int t = dlrt_workers(1 << 30, planes, planes * (hw + ohw * p->kh * p->kw));
    if (p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 && p->pw == 0 &&
        p->h == 2 * p->oh && p->w == 2 * p->ow && p->w <= MAXPOOL_2X2_BUF) {
        /* the tensor as double rows, a worker's share each */
        int64_t rows = planes * p->oh;
        PARALLEL_FOR(t, for (int64_t k = 0; k < t; k++) {
            int64_t first = rows * k / t, last = rows * (k + 1) / t;
            maxpool_2x2(p, last - first, x + first * 2 * p->w, y + first * p->ow);
        });
        return;
    }
    if (maxpool_masked_fits(p)) {
        /* as many planes at a time as the buffers hold, or a worker's share */
        int64_t most = MAXPOOL_MASKED_BUF / hw, each = (planes + t - 1) / t;
        int64_t per = each < most ? each : most, chunks = (planes + per - 1) / per;
        PARALLEL_FOR(t, for (int64_t k = 0; k < chunks; k++) {
            int64_t first = k * per, count = planes - first < per ? planes - first : per;
            maxpool_masked(p, count, x + first * hw, y + first * ohw);
        });
        return;
    }
    PoolWay way = maxpool_plane_bytes(p) <= MAXPOOL_SEPARABLE_BUF       ? POOL_PLANE
                  : maxpool_separable_bytes(p) <= MAXPOOL_SEPARABLE_BUF ? POOL_SEPARABLE
                                                                        : POOL_LOOPS;
    PARALLEL_FOR(t, for (int64_t i = 0; i < planes; i++)
                        maxpool_one(p, way, x + i * hw, y + i * ohw););
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

/* p / 2^shift rounded half to even (shift 0..62): the floor from an
 * arithmetic shift, the remainder against half the divisor; no branch, so
 * that the loops below vectorize. */
static inline int64_t round_shift(int64_t p, int shift) {
    if (shift == 0)
        return p;
    int64_t q = p >> shift, rem = p & (((int64_t)1 << shift) - 1),
            half = (int64_t)1 << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

static inline int8_t clamp_s8(int64_t q, int64_t lo) {
    return (int8_t)(q < lo ? lo : q > 127 ? 127 : q);
}

int8_t dlrt_requantize(int32_t acc, const DlrtRequant *r, bool relu) {
    return clamp_s8(round_shift(((int64_t)acc + r->bias) * r->mult, r->shift), relu ? 0 : -128);
}

/* ---- int8 between the layers: add, concatenation, global average pool --- */

void dlrt_qadd_init(double scale_a, double scale_b, double scale_y, DlrtQAdd *r) {
    double ma = scale_a / scale_y, mb = scale_b / scale_y, top = ma > mb ? ma : mb;
    int e;
    frexp(top, &e); /* top = mant 2^e, 0.5 <= mant < 1 */
    int shift = 31 - e;
    /* the larger multiplier rounded to 2^31 takes one bit less */
    if (shift >= 0 && shift <= 62 && rint(ldexp(top, shift)) >= 2147483648.0)
        shift--;
    if (shift > 62) { /* both below 2^-32: every sum rounds to 0 */
        r->mult_a = r->mult_b = 0, r->shift = 0;
        return;
    }
    shift = shift < 0 ? 0 : shift; /* 2^31 or more: saturated below */
    double a = rint(ldexp(ma, shift)), b = rint(ldexp(mb, shift));
    r->mult_a = (int32_t)(a > INT32_MAX ? INT32_MAX : a);
    r->mult_b = (int32_t)(b > INT32_MAX ? INT32_MAX : b);
    r->shift = shift;
}

/* |a mult_a + b mult_b| <= 2 2^7 2^31 = 2^39: no overflow in int64, and
 * exact in a double, whose 53 bits also hold it scaled by 2^-shift (a
 * power of two; shift <= 62 keeps it a normal number); rint of that, in
 * the default rounding mode, is round_shift's half to even.  So the loop
 * runs in doubles, which vectorize where 64-bit integer products do not,
 * with the same integers. */
static void qadd_range(int64_t lo, int64_t hi, const int8_t *a, const int8_t *b,
                       const DlrtQAdd *r, double least, int8_t *y) {
    double ma = r->mult_a, mb = r->mult_b, scale = ldexp(1.0, -r->shift);
    for (int64_t i = lo; i < hi; i++) {
        double v = rint(((double)a[i] * ma + (double)b[i] * mb) * scale);
        v = v < least ? least : v;
        v = v > 127.0 ? 127.0 : v;
        y[i] = (int8_t)(int32_t)v;
    }
}

void dlrt_qadd_s8(int64_t count, const int8_t *a, const int8_t *b, const DlrtQAdd *r, bool relu,
                  int8_t *y) {
    int t = elementwise_workers(count);
    PARALLEL_FOR(t, for (int64_t k = 0; k < t; k++) {
        int64_t lo, hi;
        share(count, k, t, &lo, &hi);
        qadd_range(lo, hi, a, b, r, relu ? 0.0 : -128.0, y);
    });
}

/* Row i of the concatenation's copy.  Where (|x| + |bias|) mult < 2^53
 * (a concatenation's bias is 0: 2^7 2^31), the product is exact in a
 * double, and so the loop runs in doubles as qadd_range does. */
static void requantize_row(int64_t len, const int8_t *xr, const DlrtRequant *r, bool copy,
                           bool exact, int8_t *yr) {
    int64_t mult = r->mult, bias = r->bias;
    int shift = r->shift;
    if (copy) {
        memcpy(yr, xr, (size_t)len);
    } else if (exact) {
        double m = (double)mult, b = (double)bias, scale = ldexp(1.0, -shift);
        for (int64_t j = 0; j < len; j++) {
            double v = rint(((double)xr[j] + b) * m * scale);
            v = v < -128.0 ? -128.0 : v;
            v = v > 127.0 ? 127.0 : v;
            yr[j] = (int8_t)(int32_t)v;
        }
    } else {
        for (int64_t j = 0; j < len; j++)
            yr[j] = clamp_s8(round_shift((xr[j] + bias) * mult, shift), -128);
    }
}

void dlrt_requantize_rows_s8(int64_t rows, int64_t len, const int8_t *x, const DlrtRequant *r,
                             int8_t *y, int64_t ld_y) {
    int64_t mult = r->mult, bias = r->bias;
    int shift = r->shift;
    /* a multiplier of exactly 1 (2^30 / 2^30, as two equal scales give) is a copy */
    bool copy = bias == 0 && shift <= 62 && mult == ((int64_t)1 << shift);
    bool exact = (128.0 + fabs((double)bias)) * (double)mult < 0x1p53;
    int t = dlrt_workers(1 << 30, rows, rows * len);
    PARALLEL_FOR(t, for (int64_t i = 0; i < rows; i++)
                        requantize_row(len, x + i * len, r, copy, exact, y + i * ld_y););
}

void dlrt_qglobalavgpool_s8(int64_t planes, int64_t hw, const int8_t *x, const DlrtRequant *r,
                            int8_t *y) {
    for (int64_t i = 0; i < planes; i++) {
        const int8_t *xp = x + i * hw;
        int32_t sum = 0;
        for (int64_t j = 0; j < hw; j++)
            sum += xp[j];
        y[i] = dlrt_requantize(sum, r, false);
    }
}
