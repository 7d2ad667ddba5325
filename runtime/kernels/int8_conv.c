/* int8_conv.c — the int8 convolution of int8 inference (dlc
 * --quantize=int8, docs/quantization.md); a dense layer is a 1x1 one.
 * The requantization of its sums is int8.c's (dlrt_requantize), which the
 * vector epilogue here computes lane by lane with the same integers.
 *
 * Every path sums the products exactly in int32, so every path, thread
 * count and split gives the same integers.  Three paths:
 *
 *   - portable C (DlrtQConv.vnni false): each output position's window as a
 *     row of int8 (im2col, padded to 64 bytes), dotted with a filter's row;
 *   - AVX-512 VNNI, convolutions: vpdpbusd multiplies 64 unsigned bytes by
 *     64 signed ones and adds each four products into one of 16 int32
 *     lanes.  The lanes are 16 output positions of one filter, the four
 *     bytes four channels at one tap: the operand is converted once per
 *     sample into 4-channel groups ([c/4][h][w][4], biased by 128 to
 *     unsigned, the padding ring a biased 0), and the weights are packed
 *     alike ([f][c/4][kh][kw][4], by dlrt_qconv_s8_pack: once by NAME_freeze
 *     for inference, else at each call).  Then the 64 bytes of 16
 *     consecutive positions at one tap are contiguous, so a register block
 *     of 4 filters by 6 vectors of positions loads 6 vectors and broadcasts
 *     4 weights for 24 vpdpbusd: no im2col.  Positions run over the padded
 *     width (the grid oh x wq, its last wq - ow columns computed and not
 *     stored), so a vector crosses rows and a 7x7 plane fills 4 vectors.  A
 *     stride s splits the padded operand into s x s phase planes (rows and
 *     columns by their remainder mod s), so the positions stay contiguous.
 *     sum w (x + 128) - 128 sum w = sum w x: the weights' sums (packed with
 *     them) are taken back in the epilogue, with int32 wrapping, which is
 *     exact since the true sum fits.  The weights stay within -127..127
 *     (the quantize pass's symmetric range), so no product saturates;
 *   - AVX-512 VNNI, dense layers (1x1 on a 1x1 plane): each sample's row
 *     dotted with 4 filters' rows at a time, 64 bytes per instruction, the
 *     rows read as they are (the tails masked), x biased in registers.
 *
 * Samples are split among the workers; fewer samples than workers split
 * each sample's filters (or, with few filters, its positions) instead.
 * Nothing is allocated: the caller's scratch memory holds the packed
 * weights when not given and each worker's converted operand. */
#include <string.h>

#include "dlrt.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_VNNI_PATH 1
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static bool is_dense(const DlrtQConv *q) {
    return q->h == 1 && q->w == 1 && q->kh == 1 && q->kw == 1 && q->oh == 1 && q->ow == 1 &&
           q->groups == 1;
}

/* ---- the VNNI path's geometry ------------------------------------------- */

/* The register block: filters by vectors of 16 positions. */
enum { BLOCK_F = 4, BLOCK_V = 6 };

typedef struct {
    int64_t cg, fg;    /* a group's channels and filters */
    bool columns;      /* the 4 bytes of an entry are 4 columns of one channel
                          (a window's 4 taps in a row), not 4 channels */
    int64_t c4;        /* its 4-channel groups, or with columns its channels */
    int64_t kg;        /* with columns, a window row's groups of 4 taps */
    int64_t taps;      /* kh * kw, or with columns kh * kg */
    int64_t k4;        /* bytes of a filter's packed weights: c4 * taps * 4 */
    int64_t hq, wq;    /* a phase plane's rows and columns (of 4-byte entries) */
    int64_t grid;      /* positions computed: oh * wq, the extra columns not stored */
    int64_t xbytes;    /* a worker's converted operand, with a tail that reads past it may touch */
} Geometry;

/* What the epilogue needs of a filter. */
typedef struct {
    int64_t mult;  /* the requantization's multiplier and shift */
    int32_t shift;
    int32_t add;   /* added to the biased sums: the bias less 128 times the weights' sum */
} Epilogue;

/* The longest padded row (and its phases) that a conversion by columns
 * copies on the stack. */
enum { ROW_MAX = 4096 };

/* Entries of 4 channels, except where a group has so few channels that 4
 * columns of each take at most 3/4 of the steps (LeNet-5's first layer:
 * 10 steps of 4 taps against 25 of 1 channel and 3 of padding). */
static Geometry geometry(const DlrtQConv *q) {
    Geometry g = {.cg = q->c / q->groups, .fg = q->f / q->groups, .taps = q->kh * q->kw};
    g.c4 = (g.cg + 3) / 4;
    g.hq = (q->h + 2 * q->ph + q->sh - 1) / q->sh;
    g.wq = (q->w + 2 * q->pw + q->sw - 1) / q->sw;
    int64_t kg = (q->kw + 3) / 4;
    if (q->dw == 1 && g.cg * q->kh * kg * 4 <= g.c4 * g.taps * 3 &&
        (g.wq + 4) * q->sw + 8 + q->sw * (g.wq + 8) <= ROW_MAX)
        g.columns = true, g.c4 = g.cg, g.kg = kg, g.taps = q->kh * kg;
    g.k4 = g.c4 * g.taps * 4;
    g.grid = q->oh * g.wq;
    /* a vector at the grid's last position reads up to 15 entries past it,
       plus the farthest tap's offset: within the last plane and a row on */
    g.xbytes = (g.c4 * q->sh * q->sw * g.hq * g.wq + g.wq + 16 * BLOCK_V) * 4;
    return g;
}

size_t dlrt_qconv_s8_packed(const DlrtQConv *q) {
    size_t sums = round64((size_t)q->f * sizeof(int32_t));
    if (is_dense(q))
        return sums;
    return sums + round64((size_t)(q->f * geometry(q).k4));
}

void dlrt_qconv_s8_pack(const DlrtQConv *q, const int8_t *w, void *packed) {
    int32_t *sums = packed;
    int64_t cg = q->c / q->groups, taps = q->kh * q->kw, k = cg * taps;
    for (int64_t f = 0; f < q->f; f++) {
        int32_t s = 0;
        for (int64_t i = 0; i < k; i++)
            s += w[f * k + i];
        sums[f] = s;
    }
    if (is_dense(q))
        return;
    Geometry g = geometry(q);
    int8_t *w4 = (int8_t *)packed + round64((size_t)q->f * sizeof(int32_t));
    memset(w4, 0, (size_t)(q->f * g.k4));
    for (int64_t f = 0; f < q->f; f++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t t = 0; t < taps; t++) {
                int64_t ky = t / q->kw, kx = t % q->kw;
                int64_t at = g.columns ? ((c * q->kh + ky) * g.kg + kx / 4) * 4 + kx % 4
                                       : ((c / 4) * taps + t) * 4 + c % 4;
                w4[f * g.k4 + at] = w[(f * cg + c) * taps + t];
            }
}

/* ---- the portable path ---------------------------------------------------- */

/* Taps of a group's window, padded to whole 64-byte blocks. */
static int64_t taps(const DlrtQConv *q) { return q->c / q->groups * q->kh * q->kw; }
static int64_t padded(const DlrtQConv *q) { return (taps(q) + 63) & ~(int64_t)63; }

/* The rows of group g's windows of one sample x [c,h,w]: row p holds the
 * window of output position p, channel by channel, each kh x kw; the
 * padding around the image 0, and the row's tail past the taps 0. */
static void im2col(const DlrtQConv *q, const int8_t *x, int64_t g, int8_t *col) {
    int64_t cg = q->c / q->groups, kt = taps(q), kp = padded(q);
    for (int64_t oy = 0; oy < q->oh; oy++)
        for (int64_t ox = 0; ox < q->ow; ox++) {
            int8_t *row = col + (oy * q->ow + ox) * kp;
            int64_t k = 0;
            for (int64_t ci = 0; ci < cg; ci++) {
                const int8_t *plane = x + (g * cg + ci) * q->h * q->w;
                for (int64_t ky = 0; ky < q->kh; ky++) {
                    int64_t iy = oy * q->sh - q->ph + ky * q->dh;
                    for (int64_t kx = 0; kx < q->kw; kx++, k++) {
                        int64_t ix = ox * q->sw - q->pw + kx * q->dw;
                        bool in = iy >= 0 && iy < q->h && ix >= 0 && ix < q->w;
                        row[k] = in ? plane[iy * q->w + ix] : 0;
                    }
                }
            }
            memset(row + kt, 0, (size_t)(kp - kt));
        }
}

static int32_t dot_portable(const int8_t *a, const int8_t *b, int64_t kp) {
    int32_t s = 0;
    for (int64_t k = 0; k < kp; k++)
        s += (int32_t)a[k] * (int32_t)b[k];
    return s;
}

/* One sample's results, group by group: wp the weights padded as the rows. */
static void portable_sample(const DlrtQConv *q, const int8_t *x, const int8_t *wp,
                            const DlrtRequant *rq, int8_t *y, int32_t *acc, int8_t *col) {
    int64_t fg = q->f / q->groups, kp = padded(q), np = q->oh * q->ow;
    for (int64_t g = 0; g < q->groups; g++) {
        im2col(q, x, g, col);
        for (int64_t p = 0; p < np; p++)
            for (int64_t f = g * fg; f < (g + 1) * fg; f++) {
                int32_t s = dot_portable(wp + f * kp, col + p * kp, kp);
                if (rq)
                    y[f * np + p] = dlrt_requantize(s, &rq[f], q->relu);
                else
                    acc[f * np + p] = s;
            }
    }
}

static void portable(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                     const DlrtRequant *rq, int8_t *y, int32_t *acc, void *work, int threads) {
    int64_t kt = taps(q), kp = padded(q), np = q->oh * q->ow;
    int8_t *wp = work, *cols = wp + round64((size_t)(q->f * kp));
    for (int64_t f = 0; f < q->f; f++) {
        memcpy(wp + f * kp, w + f * kt, (size_t)kt);
        memset(wp + f * kp + kt, 0, (size_t)(kp - kt));
    }
    int64_t xs = q->c * q->h * q->w, ys = q->f * np;
    size_t colsize = round64((size_t)(np * kp)); /* a worker's rows */
#ifdef _OPENMP
    int t = threads < 1 ? 1 : threads > n ? (int)n : threads;
#pragma omp parallel for num_threads(t) schedule(static) if (t > 1)
#else
    (void)threads; /* one worker */
#endif
    for (int64_t s = 0; s < n; s++) {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        portable_sample(q, x + s * xs, wp, rq, y ? y + s * ys : NULL, acc ? acc + s * ys : NULL,
                        cols + (size_t)me * colsize);
    }
}

static size_t portable_work(const DlrtQConv *q, int threads) {
    size_t kp = (size_t)padded(q), p = (size_t)(q->oh * q->ow);
    return round64((size_t)q->f * kp) + (size_t)(threads > 1 ? threads : 1) * round64(p * kp);
}

/* ---- the VNNI path -------------------------------------------------------- */

#ifdef HAVE_VNNI_PATH

/* len columns of four channels' rows r[0..3] into dst, 4 bytes a column,
 * biased by 128: 64 columns at a time (byte and word unpacking within
 * 128-bit lanes, then a 4x4 transpose of the lanes), the rest 16 at a time,
 * the last ones masked. */
VNNI static void interleave4(const int8_t *const r[4], int64_t len, uint8_t *dst) {
    int64_t i = 0;
    __m512i bias = _mm512_set1_epi8((char)0x80);
    for (; i + 64 <= len; i += 64) {
        __m512i a = _mm512_loadu_si512((const void *)(r[0] + i)),
                b = _mm512_loadu_si512((const void *)(r[1] + i)),
                c = _mm512_loadu_si512((const void *)(r[2] + i)),
                d = _mm512_loadu_si512((const void *)(r[3] + i));
        __m512i ab0 = _mm512_unpacklo_epi8(a, b), ab1 = _mm512_unpackhi_epi8(a, b);
        __m512i cd0 = _mm512_unpacklo_epi8(c, d), cd1 = _mm512_unpackhi_epi8(c, d);
        /* lane L of q[k]: columns 16 L + 4 k .. + 3 */
        __m512i q0 = _mm512_unpacklo_epi16(ab0, cd0), q1 = _mm512_unpackhi_epi16(ab0, cd0),
                q2 = _mm512_unpacklo_epi16(ab1, cd1), q3 = _mm512_unpackhi_epi16(ab1, cd1);
        /* transpose the lanes: out[L] = (q0, q1, q2, q3) lane L */
        __m512i t0 = _mm512_shuffle_i32x4(q0, q1, 0x44), t1 = _mm512_shuffle_i32x4(q2, q3, 0x44),
                t2 = _mm512_shuffle_i32x4(q0, q1, 0xee), t3 = _mm512_shuffle_i32x4(q2, q3, 0xee);
        __m512i o0 = _mm512_shuffle_i32x4(t0, t1, 0x88), o1 = _mm512_shuffle_i32x4(t0, t1, 0xdd),
                o2 = _mm512_shuffle_i32x4(t2, t3, 0x88), o3 = _mm512_shuffle_i32x4(t2, t3, 0xdd);
        _mm512_storeu_si512((void *)(dst + i * 4), _mm512_xor_si512(o0, bias));
        _mm512_storeu_si512((void *)(dst + i * 4 + 64), _mm512_xor_si512(o1, bias));
        _mm512_storeu_si512((void *)(dst + i * 4 + 128), _mm512_xor_si512(o2, bias));
        _mm512_storeu_si512((void *)(dst + i * 4 + 192), _mm512_xor_si512(o3, bias));
    }
    for (; i < len; i += 16) {
        int64_t m = len - i < 16 ? len - i : 16;
        __mmask16 in = (__mmask16)((1u << m) - 1);
        __m128i a = _mm_maskz_loadu_epi8(in, r[0] + i), b = _mm_maskz_loadu_epi8(in, r[1] + i),
                c = _mm_maskz_loadu_epi8(in, r[2] + i), d = _mm_maskz_loadu_epi8(in, r[3] + i);
        __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
        __m512i v = _mm512_castsi128_si512(_mm_unpacklo_epi16(ab0, cd0));
        v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(ab0, cd0), 1);
        v = _mm512_inserti32x4(v, _mm_unpacklo_epi16(ab1, cd1), 2);
        v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(ab1, cd1), 3);
        _mm512_mask_storeu_epi32(dst + i * 4, in, _mm512_xor_si512(v, bias));
    }
}

/* Sample x's group g converted: xb [c4][sh][sw][hq][wq][4] of x + 128 (the
 * padding ring, the channels past the group's and the tail 128: a biased
 * 0).  Entry (c4, ry, rx, qy, qx) holds padded row qy * sh + ry and column
 * qx * sw + rx; only the phases some tap reads are written (a 1x1
 * convolution of stride 2 reads one of four).  Four channels go together:
 * by interleave4 where the stride is 1 (a whole plane at once without
 * padding), else one 32-bit store per column. */
/* The conversion by columns: entry (c, ry, rx, qy, qx) holds padded
 * columns qx * sw + rx .. + 3 of channel c's padded row qy * sh + ry.  Each
 * row is copied padded with zeros, split into its sw column phases, and
 * interleave4 takes the 4 columns from 4 phase arrays at 4 offsets. */
VNNI static void convert_columns(const DlrtQConv *q, const Geometry *g, const int8_t *x,
                                 int64_t grp, uint8_t *xb) {
    memset(xb, 0x80, (size_t)g->xbytes);
    int64_t plane = g->hq * g->wq, sw = q->sw, len = (g->wq + 4) * sw + 8;
    int8_t row[ROW_MAX];
    for (int64_t c = 0; c < g->cg; c++) {
        const int8_t *src = x + (grp * g->cg + c) * q->h * q->w;
        for (int64_t iy = 0; iy < q->h; iy++) {
            int64_t py = iy + q->ph, ry = py % q->sh, qy = py / q->sh;
            int8_t *padded = row, *phase = row + len; /* sw phases of wq + 8 columns */
            memset(padded, 0, (size_t)len);
            memcpy(padded + q->pw, src + iy * q->w, (size_t)q->w);
            if (sw > 1)
                for (int64_t k = 0; k < sw; k++)
                    for (int64_t i = 0; i < g->wq + 8 && i * sw + k < len; i++)
                        phase[k * (g->wq + 8) + i] = padded[i * sw + k];
            for (int64_t rx = 0; rx < sw; rx++) {
                const int8_t *r[4];
                for (int j = 0; j < 4; j++)
                    r[j] = sw == 1 ? padded + j
                                   : phase + ((rx + j) % sw) * (g->wq + 8) + (rx + j) / sw;
                interleave4(r, g->wq, xb + (((c * q->sh + ry) * sw + rx) * plane + qy * g->wq) * 4);
            }
        }
    }
}

VNNI static void convert(const DlrtQConv *q, const Geometry *g, const int8_t *x, int64_t grp,
                         uint8_t *xb) {
    if (g->columns) {
        convert_columns(q, g, x, grp, xb);
        return;
    }
    int64_t plane = g->hq * g->wq, hw = q->h * q->w;
    /* without padding or stride, and whole groups of 4 channels, every
       entry but the tail is written */
    bool whole = q->ph == 0 && q->pw == 0 && q->sh == 1 && q->sw == 1 && g->cg % 4 == 0;
    size_t body = whole ? (size_t)(g->c4 * plane * 4) : 0;
    memset(xb + body, 0x80, (size_t)g->xbytes - body);
    if (whole) {
        for (int64_t c4 = 0; c4 < g->c4; c4++) {
            const int8_t *r[4];
            for (int j = 0; j < 4; j++)
                r[j] = x + (grp * g->cg + c4 * 4 + j) * hw;
            interleave4(r, hw, xb + c4 * plane * 4);
        }
        return;
    }
    bool used_y[64] = {false}, used_x[64] = {false}; /* phases read (strides up to 64) */
    for (int64_t k = 0; k < q->kh; k++)
        used_y[(k * q->dh) % q->sh % 64] = true;
    for (int64_t k = 0; k < q->kw; k++)
        used_x[(k * q->dw) % q->sw % 64] = true;
    for (int64_t c4 = 0; c4 < g->c4; c4++) {
        const int8_t *src[4];
        int64_t real = g->cg - c4 * 4 < 4 ? g->cg - c4 * 4 : 4; /* channels of the group here */
        for (int j = 0; j < 4; j++)
            src[j] = j < real ? x + (grp * g->cg + c4 * 4 + j) * hw : NULL;
        for (int64_t iy = 0; iy < q->h; iy++) {
            int64_t py = iy + q->ph, ry = py % q->sh;
            if (!used_y[ry % 64])
                continue;
            for (int64_t rx = 0; rx < q->sw; rx++) {
                if (!used_x[rx % 64])
                    continue;
                uint8_t *dst = xb + (((c4 * q->sh + ry) * q->sw + rx) * plane + (py / q->sh) * g->wq) * 4;
                /* the first column of this phase, and its entry */
                int64_t ix = ((rx - q->pw) % q->sw + q->sw) % q->sw, qx = (ix + q->pw) / q->sw;
                if (q->sw == 1 && real == 4) {
                    const int8_t *r[4] = {src[0] + iy * q->w, src[1] + iy * q->w,
                                          src[2] + iy * q->w, src[3] + iy * q->w};
                    interleave4(r, q->w, dst + qx * 4);
                    continue;
                }
                const int8_t *r[4];
                for (int j = 0; j < 4; j++)
                    r[j] = src[j] ? src[j] + iy * q->w : NULL;
                uint32_t *o = (uint32_t *)(void *)dst;
                if (real < 4) /* the channels past the group's are 0 */
                    for (; ix < q->w; ix += q->sw, qx++)
                        o[qx] = ((uint32_t)(uint8_t)r[0][ix] |
                                 (uint32_t)(uint8_t)(r[1] ? r[1][ix] : 0) << 8 |
                                 (uint32_t)(uint8_t)(r[2] ? r[2][ix] : 0) << 16 |
                                 (uint32_t)(uint8_t)(r[3] ? r[3][ix] : 0) << 24) ^ 0x80808080u;
                else
                    for (; ix < q->w; ix += q->sw, qx++)
                        o[qx] = ((uint32_t)(uint8_t)r[0][ix] | (uint32_t)(uint8_t)r[1][ix] << 8 |
                                 (uint32_t)(uint8_t)r[2][ix] << 16 |
                                 (uint32_t)(uint8_t)r[3][ix] << 24) ^ 0x80808080u;
            }
        }
    }
}

/* The 4-byte entries from a plane group's start to tap t's operand for
 * grid position 0. */
static void tap_offsets(const DlrtQConv *q, const Geometry *g, int32_t *off) {
    int64_t plane = g->hq * g->wq, per_row = g->columns ? g->kg : q->kw;
    for (int64_t ky = 0; ky < q->kh; ky++)
        for (int64_t kx = 0; kx < per_row; kx++) {
            /* with columns, tap group kx starts at column 4 kx */
            int64_t dy = ky * q->dh, dx = g->columns ? kx * 4 : kx * q->dw;
            off[ky * per_row + kx] = (int32_t)(((dy % q->sh) * q->sw + dx % q->sw) * plane +
                                               (dy / q->sh) * g->wq + dx / q->sw);
        }
}

/* 16 sums (the operand biased) requantized to 16 int8, as dlrt_requantize:
 * (acc + bias) mult rounded half to even at 2^shift, by adding 2^(shift-1)
 * - 1 and the quotient's lowest bit before the arithmetic shift. */
VNNI static inline __m128i requantize16(__m512i v, const Epilogue *e, __m512i lo) {
    __m512i t = _mm512_add_epi32(v, _mm512_set1_epi32(e->add));
    __m512i m = _mm512_set1_epi64(e->mult), hi = _mm512_set1_epi64(127);
    __m128i count = _mm_cvtsi32_si128(e->shift);
    __m512i rnd = _mm512_set1_epi64(e->shift ? ((int64_t)1 << (e->shift - 1)) - 1 : 0);
    __m512i odd = _mm512_set1_epi64(e->shift ? 1 : 0);
    __m512i half[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(t)),
                       _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(t, 1))};
    __m128i out[2];
    for (int i = 0; i < 2; i++) {
        __m512i p = _mm512_mul_epi32(half[i], m);
        __m512i b = _mm512_and_si512(_mm512_sra_epi64(p, count), odd);
        p = _mm512_sra_epi64(_mm512_add_epi64(_mm512_add_epi64(p, rnd), b), count);
        p = _mm512_min_epi64(_mm512_max_epi64(p, lo), hi);
        out[i] = _mm512_cvtepi64_epi8(p);
    }
    return _mm_unpacklo_epi64(out[0], out[1]);
}

/* Where a vector of 16 grid positions goes: one masked store per output
 * row it crosses (the grid's extra columns are not stored).  A vector
 * crosses at most 16 rows (a grid of 1 column). */
typedef struct {
    int n;              /* rows crossed */
    __mmask16 mask[16]; /* the lanes in each */
    int64_t at[16];     /* lane 0's place in a filter's plane, in that row's terms */
} Rows;

static void rows_of(const DlrtQConv *q, int64_t wq, int64_t p0, Rows *v) {
    v->n = 0;
    for (int64_t r = p0 / wq; r * wq < p0 + 16 && r < q->oh; r++) {
        int64_t first = r * wq - p0 > 0 ? r * wq - p0 : 0;
        int64_t end = r * wq + q->ow - p0 < 16 ? r * wq + q->ow - p0 : 16;
        if (first < end) {
            v->mask[v->n] = (__mmask16)(((1u << end) - 1) & ~((1u << first) - 1));
            v->at[v->n++] = r * q->ow + (p0 - r * wq);
        }
    }
}

/* The part of a block's results to store. */
typedef struct {
    const DlrtQConv *q;
    const Geometry *g;
    int8_t *y;          /* the group's first filter's results (int8), or */
    int32_t *acc;       /* its sums */
    const Epilogue *ep; /* the group's filters' */
    int64_t np;         /* a filter's results: oh * ow */
} Store;

/* Vector v of filter f at the positions of `rows`. */
VNNI static inline void store16(const Store *st, int64_t f, const Rows *rows, __m512i v,
                                __m512i lo) {
    if (st->y) {
        __m128i b = requantize16(v, &st->ep[f], lo);
        for (int k = 0; k < rows->n; k++)
            _mm_mask_storeu_epi8(st->y + f * st->np + rows->at[k], rows->mask[k], b);
    } else {
        __m512i a = _mm512_add_epi32(v, _mm512_set1_epi32(st->ep[f].add)); /* the sums alone */
        for (int k = 0; k < rows->n; k++)
            _mm512_mask_storeu_epi32(st->acc + f * st->np + rows->at[k], rows->mask[k], a);
    }
}

/* Filters f0..f0+NF-1 of the group at grid positions p0.. (NV vectors):
 * xb the converted operand, w4 the group's packed weights. */
VNNI static inline __attribute__((always_inline)) void
block(const Store *st, const uint8_t *xb, const int8_t *w4, const int32_t *off, int64_t f0,
      int64_t p0, const Rows *rows, const int NF, const int NV) {
    const Geometry *g = st->g;
    int64_t group = st->q->sh * st->q->sw * g->hq * g->wq * 4; /* bytes of a 4-channel group */
    __m512i acc[BLOCK_F][BLOCK_V];
#pragma GCC unroll 4
    for (int i = 0; i < NF; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NV; j++)
            acc[i][j] = _mm512_setzero_si512();
    const int8_t *w = w4 + f0 * g->k4;
    for (int64_t c = 0; c < g->c4; c++) {
        const uint8_t *xc = xb + c * group + p0 * 4;
        for (int64_t t = 0; t < g->taps; t++, w += 4) {
            const uint8_t *xt = xc + (int64_t)off[t] * 4;
            __m512i b[BLOCK_F];
#pragma GCC unroll 4
            for (int i = 0; i < NF; i++) {
                int32_t wi;
                memcpy(&wi, w + i * g->k4, 4);
                b[i] = _mm512_set1_epi32(wi);
            }
#pragma GCC unroll 6
            for (int j = 0; j < NV; j++) {
                __m512i a = _mm512_loadu_si512((const void *)(xt + j * 64));
#pragma GCC unroll 4
                for (int i = 0; i < NF; i++)
                    acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, b[i]);
            }
        }
    }
    __m512i lo = _mm512_set1_epi64(st->q->relu ? 0 : -128);
#pragma GCC unroll 4
    for (int i = 0; i < NF; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NV; j++)
            store16(st, f0 + i, &rows[j], acc[i][j], lo);
}

/* Filters [fa, fb) of the group at grid positions [pa, pb). */
VNNI static void blocks(const Store *st, const uint8_t *xb, const int8_t *w4, const int32_t *off,
                        int64_t fa, int64_t fb, int64_t pa, int64_t pb) {
    Rows rows[BLOCK_V];
    for (int64_t p0 = pa; p0 < pb; p0 += 16 * BLOCK_V) {
        int nv = (int)((pb - p0 + 15) / 16 < BLOCK_V ? (pb - p0 + 15) / 16 : BLOCK_V);
        for (int j = 0; j < nv; j++)
            rows_of(st->q, st->g->wq, p0 + 16 * j, &rows[j]);
        for (int64_t f0 = fa; f0 < fb; f0 += BLOCK_F) {
            int nf = (int)(fb - f0 < BLOCK_F ? fb - f0 : BLOCK_F);
#define CASE(F, V) case (F) * 8 + (V): block(st, xb, w4, off, f0, p0, rows, F, V); break;
#define CASES(F) CASE(F, 1) CASE(F, 2) CASE(F, 3) CASE(F, 4) CASE(F, 5) CASE(F, 6)
            switch (nf * 8 + nv) {
                CASES(1) CASES(2) CASES(3) CASES(4)
            default:
                break;
            }
#undef CASES
#undef CASE
        }
    }
}

/* Dense layers take 16 filters at a time: a sample's 16 sums, one per
 * accumulator, reduced together into one vector of 16 lanes. */
enum { DENSE_F = 16 };

/* s[i] = the sum of a[i]'s 16 lanes: pairs of accumulators interleaved and
 * added, then pairs of those, then the 128-bit lanes. */
VNNI static inline __m512i reduce16(const __m512i a[DENSE_F]) {
    __m512i t[8], u[4];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++) /* lane L of u[i]: a[4i..4i+3]'s partial sums over lane L */
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    __m512i v0 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88),
                                  _mm512_shuffle_i32x4(u[0], u[1], 0xdd));
    __m512i v1 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], 0x88),
                                  _mm512_shuffle_i32x4(u[2], u[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(v0, v1, 0x88), _mm512_shuffle_i32x4(v0, v1, 0xdd));
}

/* 16 sums (the operand biased) of 16 filters requantized, each lane with
 * its filter's epilogue, as requantize16 does with one. */
VNNI static inline __m128i requantize16_lanes(__m512i v, const Epilogue *e, __m512i lo) {
    __m512i add = _mm512_setzero_si512(), hi = _mm512_set1_epi64(127), one = _mm512_set1_epi64(1);
    __m512i mult[2], shift[2];
    int32_t a[16];
    int64_t m[16], sh[16];
    for (int i = 0; i < 16; i++)
        a[i] = e[i].add, m[i] = e[i].mult, sh[i] = e[i].shift;
    add = _mm512_loadu_si512((const void *)a);
    mult[0] = _mm512_loadu_si512((const void *)m), mult[1] = _mm512_loadu_si512((const void *)(m + 8));
    shift[0] = _mm512_loadu_si512((const void *)sh), shift[1] = _mm512_loadu_si512((const void *)(sh + 8));
    __m512i t = _mm512_add_epi32(v, add);
    __m512i half[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(t)),
                       _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(t, 1))};
    __m128i out[2];
    for (int i = 0; i < 2; i++) {
        __m512i odd = _mm512_min_epi64(shift[i], one); /* 1 where shift > 0 */
        __m512i rnd = _mm512_sub_epi64(_mm512_srli_epi64(_mm512_sllv_epi64(one, shift[i]), 1), odd);
        __m512i p = _mm512_mul_epi32(half[i], mult[i]);
        __m512i b = _mm512_and_si512(_mm512_srav_epi64(p, shift[i]), odd);
        p = _mm512_srav_epi64(_mm512_add_epi64(_mm512_add_epi64(p, rnd), b), shift[i]);
        p = _mm512_min_epi64(_mm512_max_epi64(p, lo), hi);
        out[i] = _mm512_cvtepi64_epi8(p);
    }
    return _mm_unpacklo_epi64(out[0], out[1]);
}

/* Dense: each sample's row dotted with filters [fa, fb)'s, 16 at a time
 * (the weights' rows as they are, the tail of a row masked), x biased in
 * registers; ep the filters' epilogues. */
VNNI static void dense_rows(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                            const Epilogue *ep, int8_t *y, int32_t *acc, int64_t fa, int64_t fb) {
    int64_t k = q->c, full = k / 64 * 64;
    __mmask64 tail = (__mmask64)((k - full) ? (~0ull >> (64 - (k - full))) : 0);
    __m512i bias = _mm512_set1_epi8((char)0x80), lo = _mm512_set1_epi64(q->relu ? 0 : -128);
    for (int64_t f0 = fa; f0 < fb; f0 += DENSE_F) {
        int nf = fb - f0 < DENSE_F ? (int)(fb - f0) : DENSE_F;
        __mmask16 out = (__mmask16)((1u << nf) - 1);
        Epilogue e[DENSE_F] = {{0, 0, 0}};
        memcpy(e, ep + f0, sizeof *e * (size_t)nf);
        for (int64_t s = 0; s < n; s++) {
            const int8_t *xs = x + s * k;
            __m512i a[DENSE_F];
            for (int j = 0; j < DENSE_F; j++)
                a[j] = _mm512_setzero_si512();
            for (int64_t i = 0; i < full; i += 64) {
                __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void *)(xs + i)), bias);
                for (int j = 0; j < nf; j++)
                    a[j] = _mm512_dpbusd_epi32(a[j], v,
                                               _mm512_loadu_si512((const void *)(w + (f0 + j) * k + i)));
            }
            if (tail) {
                __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, xs + full), bias);
                for (int j = 0; j < nf; j++)
                    a[j] = _mm512_dpbusd_epi32(a[j], v,
                                               _mm512_maskz_loadu_epi8(tail, w + (f0 + j) * k + full));
            }
            __m512i sum = reduce16(a);
            if (y)
                _mm_mask_storeu_epi8(y + s * q->f + f0, out, requantize16_lanes(sum, e, lo));
            else {
                int32_t add[DENSE_F];
                for (int j = 0; j < DENSE_F; j++)
                    add[j] = e[j].add;
                _mm512_mask_storeu_epi32(acc + s * q->f + f0, out,
                                         _mm512_add_epi32(sum, _mm512_loadu_si512((const void *)add)));
            }
        }
    }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One call's plan, which each worker reads. */
typedef struct {
    const DlrtQConv *q;
    const Geometry *g;
    int64_t n;
    const int8_t *x, *w, *w4; /* the operand, the weights, packed in 4-channel groups */
    const int32_t *sums;      /* the filters' sums */
    const DlrtRequant *rq;
    int8_t *y;
    int32_t *acc;
    const Epilogue *ep;       /* per filter (convolutions) */
    const int32_t *offs;      /* the taps' offsets */
    char *xbs;                /* the workers' converted operands */
    int64_t units, parts;     /* (sample, group) jobs times parts of each */
    int64_t fblocks, vectors; /* a group's blocks of filters, vectors of positions */
    bool by_filters;          /* a job's parts split its filters (else its positions) */
} Plan;

/* Dense: worker me of t takes its share of the blocks of 4 filters. */
VNNI static void dense_worker(const Plan *p, int me, int t) {
    int64_t fblocks = (p->q->f + DENSE_F - 1) / DENSE_F;
    dense_rows(p->q, p->n, p->x, p->w, p->ep, p->y, p->acc, fblocks * me / t * DENSE_F,
               min64(fblocks * (me + 1) / t * DENSE_F, p->q->f));
}

/* Convolutions: worker me of t takes its share of the units. */
VNNI static void conv_worker(const Plan *p, int me, int t) {
    const DlrtQConv *q = p->q;
    const Geometry *g = p->g;
    int64_t np = q->oh * q->ow, xs = q->c * q->h * q->w, ys = q->f * np;
    uint8_t *xb = (uint8_t *)p->xbs + (size_t)me * round64((size_t)g->xbytes);
    int64_t converted = -1;
    for (int64_t u = p->units * me / t; u < p->units * (me + 1) / t; u++) {
        int64_t job = u / p->parts, part = u % p->parts, s = job / q->groups, grp = job % q->groups;
        if (converted != job)
            convert(q, g, p->x + s * xs, grp, xb), converted = job;
        Store st = {.q = q, .g = g, .y = p->y ? p->y + s * ys + grp * g->fg * np : NULL,
                    .acc = p->acc ? p->acc + s * ys + grp * g->fg * np : NULL,
                    .ep = p->ep + grp * g->fg, .np = np};
        int64_t fa = 0, fb = g->fg, pa = 0, pb = g->grid;
        if (p->by_filters)
            fa = p->fblocks * part / p->parts * BLOCK_F,
            fb = min64(p->fblocks * (part + 1) / p->parts * BLOCK_F, g->fg);
        else
            pa = p->vectors * part / p->parts * 16,
            pb = min64(p->vectors * (part + 1) / p->parts * 16, g->grid);
        blocks(&st, xb, p->w4 + grp * g->fg * g->k4, p->offs, fa, fb, pa, pb);
    }
}

/* worker(p, me, t) on t workers: called directly on one, without a team */
static void run(void (*worker)(const Plan *, int, int), const Plan *p, int t) {
    if (t <= 1) {
        worker(p, 0, 1);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(t)
    worker(p, omp_get_thread_num(), t);
#endif
}

VNNI static void vnni(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                      const DlrtRequant *rq, int8_t *y, int32_t *acc, const void *packed,
                      void *work, int threads) {
    size_t packed_bytes = dlrt_qconv_s8_packed(q);
    if (!packed) {
        dlrt_qconv_s8_pack(q, w, work);
        packed = work;
    }
    char *scratch = (char *)work + packed_bytes; /* past the packing, used or not */
    Plan p = {.q = q, .n = n, .x = x, .w = w, .sums = packed, .rq = rq, .y = y, .acc = acc};
    int t = threads < 1 ? 1 : threads;
#ifndef _OPENMP
    t = 1; /* one worker */
#endif
    /* the epilogue of every filter (rq NULL: the weights' sums alone) */
    Epilogue *ep = (Epilogue *)scratch;
    scratch += round64((size_t)q->f * sizeof *ep);
    for (int64_t f = 0; f < q->f; f++) {
        uint32_t b = rq ? (uint32_t)rq[f].bias : 0;
        ep[f] = (Epilogue){.add = (int32_t)(b - 128u * (uint32_t)p.sums[f]),
                           .mult = rq ? rq[f].mult : 0, .shift = rq ? rq[f].shift : 0};
    }
    p.ep = ep;
    if (is_dense(q)) {
        int64_t fblocks = (q->f + DENSE_F - 1) / DENSE_F;
        run(dense_worker, &p, t > fblocks ? (int)fblocks : t);
        return;
    }
    Geometry g = geometry(q);
    p.g = &g;
    p.w4 = (const int8_t *)packed + round64((size_t)q->f * sizeof(int32_t));
    /* the taps' offsets, then each worker's converted operand */
    int32_t *offs = (int32_t *)scratch;
    scratch += round64((size_t)g.taps * sizeof *offs);
    tap_offsets(q, &g, offs);
    p.offs = offs, p.xbs = scratch;
    /* jobs: (sample, group); with fewer than the workers each is split
       into parts, by blocks of filters where there are enough, else by
       vectors of positions */
    int64_t jobs = n * q->groups;
    p.parts = jobs >= t ? 1 : (t + jobs - 1) / jobs;
    p.fblocks = (g.fg + BLOCK_F - 1) / BLOCK_F, p.vectors = (g.grid + 15) / 16;
    p.by_filters = p.fblocks >= 2 * p.parts || p.fblocks >= p.vectors;
    p.units = jobs * p.parts;
    run(conv_worker, &p, p.units < t ? (int)p.units : t);
}

#endif /* HAVE_VNNI_PATH */

/* ---- the entry points ---------------------------------------------------- */

size_t dlrt_qconv_s8_work(const DlrtQConv *q, int threads) {
#ifdef HAVE_VNNI_PATH
    if (q->vnni) {
        size_t t = (size_t)(threads > 1 ? threads : 1), bytes = dlrt_qconv_s8_packed(q);
        bytes += round64((size_t)q->f * sizeof(Epilogue));
        if (!is_dense(q)) {
            Geometry g = geometry(q);
            bytes += round64((size_t)g.taps * sizeof(int32_t)) + t * round64((size_t)g.xbytes);
        }
        return bytes;
    }
#endif
    return portable_work(q, threads);
}

bool dlrt_cpu_has_vnni(void) {
#ifdef HAVE_VNNI_PATH
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

void dlrt_qconv_s8(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                   const DlrtRequant *rq, int8_t *y, int32_t *acc, const void *packed,
                   void *work, int threads) {
#ifdef HAVE_VNNI_PATH
    if (q->vnni) {
        vnni(q, n, x, w, rq, y, acc, packed, work, threads);
        return;
    }
#endif
    (void)packed;
    portable(q, n, x, w, rq, y, acc, work, threads);
}
