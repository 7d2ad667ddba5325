/* int8_conv.c — the int8 convolution of int8 inference (dlc
 * --quantize=int8, docs/quantization.md); a dense layer is a 1x1 one.
 * The requantization of its sums is dlrt_requantize's, which the vector
 * epilogues compute lane by lane with the same integers.
 *
 * Every path sums the products exactly in int32, so every path, thread
 * count and split gives the same integers.  The paths:
 *
 *   - portable C (neither DlrtQConv.vnni nor .avx2, or a CPU without
 *     them): each output position's window as a row of int8 (im2col,
 *     padded to 64 bytes), dotted with a filter's row;
 *   - AVX-512 VNNI (int8_conv_vnni.c): vpdpbusd multiplies 64 unsigned
 *     bytes by 64 signed ones and adds each four products into one of 16
 *     int32 lanes.  The lanes are 16 output positions of one filter, the
 *     four bytes four channels at one tap: the operand is converted once
 *     per sample into 4-channel groups ([c/4][h][w][4], biased by 128 to
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
 *     A group of 1 or 2 channels with wide windows takes 4 columns of one
 *     channel per entry instead (a window row's taps 4 at a time).
 *     sum w (x + 128) - 128 sum w = sum w x: the weights' sums (packed with
 *     them) are taken back in the epilogue, with int32 wrapping, which is
 *     exact since the true sum fits.  The weights stay within -127..127
 *     (the quantize pass's symmetric range), so no product saturates.
 *     Dense layers dot each sample's row with 16 filters' rows at a time,
 *     the rows as they are;
 *   - AVX2 (int8_conv_avx2.c), the same conversion and packing in vectors
 *     of 8 positions: where the operand is nonnegative (every value after a
 *     ReLU) it is converted as it is and vpmaddubsw multiplies it by the
 *     weights, each pair of products at most 2 * 127 * 127, within int16
 *     (biased operands would saturate it: ONNX Runtime's pitfall), then
 *     vpmaddwd adds the pairs into int32; otherwise the biased bytes and
 *     the weights are widened to 16 bits for vpmaddwd.
 *
 * Samples are split among the workers; fewer samples than workers split
 * each sample's filters (or, with few filters, its positions) instead.
 * Nothing is allocated: the caller's scratch memory holds the packed
 * weights when not given and each worker's converted operand. */
#include <math.h>
#include <string.h>

#include "int8_conv.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the geometry and the packing ------------------------------------ */

/* The longest padded row (and its phases) that a conversion by columns
 * copies on the stack. */
enum { ROW_MAX = 4096 };

/* Entries of 4 channels, except where a group has so few channels that 4
 * columns of each take at most 3/4 of the steps (LeNet-5's first layer:
 * 10 steps of 4 taps against 25 of 1 channel and 3 of padding). */
Int8Geometry int8_geometry(const DlrtQConv *q) {
    Int8Geometry g = {.cg = q->c / q->groups, .fg = q->f / q->groups, .taps = q->kh * q->kw};
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
    g.xbytes = (g.c4 * q->sh * q->sw * g.hq * g.wq + g.wq + INT8_READ_AHEAD) * 4;
    g.worker = int8_round64((size_t)g.xbytes + 5 * (size_t)q->w); /* and convert's rows */
    return g;
}

size_t dlrt_qconv_s8_packed(const DlrtQConv *q) {
    size_t sums = int8_round64((size_t)q->f * sizeof(int32_t));
    if (int8_is_dense(q))
        return sums;
    return sums + int8_round64((size_t)(q->f * int8_geometry(q).k4));
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
    if (int8_is_dense(q))
        return;
    Int8Geometry g = int8_geometry(q);
    int8_t *w4 = (int8_t *)packed + int8_round64((size_t)q->f * sizeof(int32_t));
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
    int8_t *wp = work, *cols = wp + int8_round64((size_t)(q->f * kp));
    for (int64_t f = 0; f < q->f; f++) {
        memcpy(wp + f * kp, w + f * kt, (size_t)kt);
        memset(wp + f * kp + kt, 0, (size_t)(kp - kt));
    }
    int64_t xs = q->c * q->h * q->w, ys = q->f * np;
    size_t colsize = int8_round64((size_t)(np * kp)); /* a worker's rows */
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
    return int8_round64((size_t)q->f * kp) + (size_t)(threads > 1 ? threads : 1) * int8_round64(p * kp);
}

/* ---- the conversion of the operand ------------------------------------ */

#ifdef DLRT_INT8_X86 /* the vector paths' alone */

/* len columns of the rows r[0..3] into dst, 4 bytes a column, xor bias:
 * the conversion's interleaving where AVX-512 is not at hand. */
typedef void Interleave4(const int8_t *const r[4], int64_t len, uint8_t *dst, uint8_t bias);

static void interleave4_plain(const int8_t *const r[4], int64_t len, uint8_t *dst,
                              uint8_t bias) {
    for (int64_t i = 0; i < len; i++) {
        dst[4 * i] = (uint8_t)r[0][i] ^ bias, dst[4 * i + 1] = (uint8_t)r[1][i] ^ bias;
        dst[4 * i + 2] = (uint8_t)r[2][i] ^ bias, dst[4 * i + 3] = (uint8_t)r[3][i] ^ bias;
    }
}

/* The conversion by columns: entry (c, ry, rx, qy, qx) holds padded
 * columns qx * sw + rx .. + 3 of channel c's padded row qy * sh + ry.  Each
 * row is copied padded with zeros, split into its sw column phases, and
 * interleave4 takes the 4 columns from 4 phase arrays at 4 offsets. */
static void convert_columns(const DlrtQConv *q, const Int8Geometry *g, const int8_t *x,
                            int64_t grp, uint8_t *xb, Interleave4 *interleave4, uint8_t bias,
                            int64_t ca, int64_t cb) {
    int64_t plane = g->hq * g->wq, sw = q->sw, len = (g->wq + 4) * sw + 8;
    memset(xb + ca * q->sh * sw * plane * 4, bias, (size_t)((cb - ca) * q->sh * sw * plane * 4));
    int8_t row[ROW_MAX];
    for (int64_t c = ca; c < cb; c++) {
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
                interleave4(r, g->wq, xb + (((c * q->sh + ry) * sw + rx) * plane + qy * g->wq) * 4, bias);
            }
        }
    }
}

/* Groups [ca, cb) of the conversion (of channels, with columns), and with
 * `tail` the tail past the last; rows: convert's rows of the worker. */
static void convert(const DlrtQConv *q, const Int8Geometry *g, const int8_t *x, int64_t grp,
                    uint8_t *xb, bool avx512, uint8_t bias, int64_t ca, int64_t cb, bool tail,
                    int8_t *rows) {
    Interleave4 *interleave4 = interleave4_plain;
#ifdef DLRT_INT8_X86
    if (avx512)
        interleave4 = int8_interleave4_avx512;
#else
    (void)avx512;
#endif
    int64_t plane = g->hq * g->wq, hw = q->h * q->w, group = q->sh * q->sw * plane * 4;
    if (tail)
        memset(xb + g->c4 * group, bias, (size_t)(g->xbytes - g->c4 * group));
    if (g->columns) {
        convert_columns(q, g, x, grp, xb, interleave4, bias, ca, cb);
        return;
    }
    /* without padding or stride, and whole groups of 4 channels, every
       entry is written */
    if (q->ph == 0 && q->pw == 0 && q->sh == 1 && q->sw == 1 && g->cg % 4 == 0) {
        for (int64_t c4 = ca; c4 < cb; c4++) {
            const int8_t *r[4];
            for (int j = 0; j < 4; j++)
                r[j] = x + (grp * g->cg + c4 * 4 + j) * hw;
            interleave4(r, hw, xb + c4 * plane * 4, bias);
        }
        return;
    }
    memset(xb + ca * group, bias, (size_t)((cb - ca) * group));
    bool used_y[64] = {false}, used_x[64] = {false}; /* phases read (strides up to 64) */
    for (int64_t k = 0; k < q->kh; k++)
        used_y[(k * q->dh) % q->sh % 64] = true;
    for (int64_t k = 0; k < q->kw; k++)
        used_x[(k * q->dw) % q->sw % 64] = true;
    /* a row of zeros for the channels past the group's, and each of the 4
       rows split into its column phases (phase k: columns k, k + sw, ...) */
    int8_t *zeros = rows, *split = zeros + q->w;
    memset(zeros, 0, (size_t)q->w);
    int64_t sw = q->sw;
    for (int64_t c4 = ca; c4 < cb; c4++) {
        const int8_t *src[4];
        int64_t real = g->cg - c4 * 4 < 4 ? g->cg - c4 * 4 : 4; /* channels of the group here */
        for (int j = 0; j < 4; j++)
            src[j] = j < real ? x + (grp * g->cg + c4 * 4 + j) * hw : NULL;
        for (int64_t iy = 0; iy < q->h; iy++) {
            int64_t py = iy + q->ph, ry = py % q->sh;
            if (!used_y[ry % 64])
                continue;
            const int8_t *row[4];
            for (int j = 0; j < 4; j++)
                row[j] = src[j] ? src[j] + iy * q->w : zeros;
            uint8_t *dst = xb + ((c4 * q->sh + ry) * sw * plane + (py / q->sh) * g->wq) * 4;
            if (sw == 1) {
                interleave4(row, q->w, dst + q->pw * 4, bias);
                continue;
            }
            /* phase k of row j at split + j * w + k's first entry */
            int64_t start[64];
            for (int64_t k = 0, at = 0; k < sw && k < 64; at += (q->w - k + sw - 1) / sw, k++)
                start[k] = at;
            for (int j = 0; j < 4; j++) {
                int8_t *out = split + j * q->w;
                if (row[j] == zeros)
                    memset(out, 0, (size_t)q->w);
#ifdef DLRT_INT8_X86
                else if (sw == 2 && avx512)
                    int8_split2_avx512(row[j], q->w, out, out + start[1]);
#endif
                else
                    for (int64_t k = 0; k < sw; k++)
                        for (int64_t ix = k, i = start[k]; ix < q->w; ix += sw, i++)
                            out[i] = row[j][ix];
            }
            for (int64_t rx = 0; rx < sw; rx++) {
                if (!used_x[rx % 64])
                    continue;
                /* the columns of padded phase rx: source phase k, from entry qx */
                int64_t k = ((rx - q->pw) % sw + sw) % sw, qx = (k + q->pw) / sw;
                if (k >= q->w)
                    continue;
                const int8_t *r[4];
                for (int j = 0; j < 4; j++)
                    r[j] = split + j * q->w + start[k];
                interleave4(r, (q->w - k + sw - 1) / sw, dst + (rx * plane + qx) * 4, bias);
            }
        }
    }
}

/* The 4-byte entries from a plane group's start to tap t's operand for
 * grid position 0. */
static void tap_offsets(const DlrtQConv *q, const Int8Geometry *g, int32_t *off) {
    int64_t plane = g->hq * g->wq, per_row = g->columns ? g->kg : q->kw;
    for (int64_t ky = 0; ky < q->kh; ky++)
        for (int64_t kx = 0; kx < per_row; kx++) {
            /* with columns, tap group kx starts at column 4 kx */
            int64_t dy = ky * q->dh, dx = g->columns ? kx * 4 : kx * q->dw;
            off[ky * per_row + kx] = (int32_t)(((dy % q->sh) * q->sw + dx % q->sw) * plane +
                                               (dy / q->sh) * g->wq + dx / q->sw);
        }
}

/* ---- the vector paths' plan and workers -------------------------------- */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Dense: worker me of t takes its share of the blocks of 16 filters. */
static void dense_worker(const Int8Plan *p, int me, int t) {
    int64_t fblocks = (p->q->f + 15) / 16;
    p->dense(p, fblocks * me / t * 16, min64(fblocks * (me + 1) / t * 16, p->q->f));
}

/* Convolutions: worker me of t takes its share of the units.  One job (a
 * sample at batch 1) shared by all is converted by all, each its share of
 * the channel groups into worker 0's operand, a barrier apart. */
static void conv_worker(const Int8Plan *p, int me, int t) {
    const DlrtQConv *q = p->q;
    const Int8Geometry *g = p->g;
    int64_t np = q->oh * q->ow, xs = q->c * q->h * q->w, ys = q->f * np;
    uint8_t *mine = (uint8_t *)p->xbs + (size_t)me * g->worker, *xb = mine;
    int8_t *rows = (int8_t *)(mine + g->xbytes);
    uint8_t bias = p->biased ? 0x80 : 0;
    /* one unit each, so that every worker meets the barrier once */
    bool shared = p->units == p->parts && p->units == t && t > 1;
    int64_t converted = -1;
    for (int64_t u = p->units * me / t; u < p->units * (me + 1) / t; u++) {
        int64_t job = u / p->parts, part = u % p->parts, s = job / q->groups, grp = job % q->groups;
        if (shared) {
            xb = (uint8_t *)p->xbs;
            convert(q, g, p->x + s * xs, grp, xb, p->avx512, bias, g->c4 * me / t,
                    g->c4 * (me + 1) / t, me == t - 1, rows);
#ifdef _OPENMP
#pragma omp barrier
#endif
        } else if (converted != job)
            convert(q, g, p->x + s * xs, grp, xb, p->avx512, bias, 0, g->c4, true, rows),
                converted = job;
        Int8Store st = {.q = q, .g = g, .y = p->y ? p->y + s * ys + grp * g->fg * np : NULL,
                        .acc = p->acc ? p->acc + s * ys + grp * g->fg * np : NULL,
                        .ep = p->ep + grp * g->fg, .np = np};
        int64_t fa = 0, fb = g->fg, pa = 0, pb = g->grid;
        if (p->by_filters)
            fa = p->fblocks * part / p->parts * p->block_f,
            fb = min64(p->fblocks * (part + 1) / p->parts * p->block_f, g->fg);
        else
            pa = p->vectors * part / p->parts * p->lanes,
            pb = min64(p->vectors * (part + 1) / p->parts * p->lanes, g->grid);
        p->blocks(p, &st, xb, p->w4 + grp * g->fg * g->k4, fa, fb, pa, pb);
    }
}

/* worker(p, me, t) on t workers: called directly on one, without a team */
static void run(void (*worker)(const Int8Plan *, int, int), const Int8Plan *p, int t) {
    if (t <= 1) {
        worker(p, 0, 1);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(t)
    worker(p, omp_get_thread_num(), omp_get_num_threads());
#endif
}

/* Whether every byte of x[count] is nonnegative. */
static bool nonnegative(const int8_t *x, int64_t count) {
    uint8_t any = 0;
    for (int64_t i = 0; i < count; i++)
        any |= (uint8_t)x[i];
    return !(any & 0x80);
}

/* 2^-shift, for 0 <= shift <= 62 built from its bits: ldexp's general
 * case cost more than a small layer's whole epilogue (LeNet-5's dense
 * layers, on every call). */
static double pow2_neg(int shift) {
    if (shift < 0 || shift > 62) /* not a requantization's (dlrt_requant_init) */
        return ldexp(1.0, -shift);
    uint64_t bits = (uint64_t)(1023 - shift) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* The call on a vector path: VNNI (avx512) or AVX2. */
static void simd(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                 const DlrtRequant *rq, int8_t *y, int32_t *acc, const void *packed, void *work,
                 int threads, bool avx512) {
    size_t packed_bytes = dlrt_qconv_s8_packed(q);
    if (!packed) {
        dlrt_qconv_s8_pack(q, w, work);
        packed = work;
    }
    char *scratch = (char *)work + packed_bytes; /* past the packing, used or not */
    Int8Plan p = {.q = q, .n = n, .x = x, .w = w, .sums = packed, .y = y, .acc = acc,
                  .avx512 = avx512, .biased = true};
#ifdef DLRT_INT8_X86
    if (avx512)
        p.blocks = int8_vnni_blocks, p.dense = int8_vnni_dense, p.block_f = 4, p.lanes = 16;
    else
        p.blocks = int8_avx2_blocks, p.dense = int8_avx2_dense, p.block_f = 4, p.lanes = 8;
#endif
    int t = threads < 1 ? 1 : threads;
#ifndef _OPENMP
    t = 1; /* one worker */
#endif
    /* the epilogue of every filter (rq NULL: the weights' sums alone) */
    Int8Epilogue *ep = (Int8Epilogue *)(void *)scratch;
    scratch += int8_round64((size_t)q->f * sizeof *ep);
    for (int64_t f = 0; f < q->f; f++) {
        uint32_t b = rq ? (uint32_t)rq[f].bias : 0;
        ep[f] = (Int8Epilogue){.add = (int32_t)(b - 128u * (uint32_t)p.sums[f]),
                               .bias = (int32_t)b, .mult = rq ? rq[f].mult : 0,
                               .shift = rq ? rq[f].shift : 0};
        ep[f].scale = (double)ep[f].mult * pow2_neg(ep[f].shift);
    }
    p.ep = ep;
    p.fast = rq != NULL;
    for (int64_t f = 0; f < q->f && p.fast; f++)
        p.fast = ep[f].shift <= 45 && ep[f].mult >= 0;
    if (int8_is_dense(q)) {
        int64_t fblocks = (q->f + 15) / 16;
        run(dense_worker, &p, t > fblocks ? (int)fblocks : t);
        return;
    }
    Int8Geometry g = int8_geometry(q);
    p.g = &g;
    p.w4 = (const int8_t *)packed + int8_round64((size_t)q->f * sizeof(int32_t));
    /* AVX2 multiplies bytes as they are where they are all nonnegative */
    if (!avx512)
        p.biased = !nonnegative(x, n * q->c * q->h * q->w);
    /* the taps' offsets, then each worker's converted operand */
    int32_t *offs = (int32_t *)(void *)scratch;
    scratch += int8_round64((size_t)g.taps * sizeof *offs);
    tap_offsets(q, &g, offs);
    p.offs = offs, p.xbs = scratch;
    /* jobs: (sample, group); with fewer than the workers each is split
       into parts, by blocks of filters where there are enough, else by
       vectors of positions */
    int64_t jobs = n * q->groups;
    p.parts = jobs >= t ? 1 : (t + jobs - 1) / jobs;
    p.fblocks = (g.fg + p.block_f - 1) / p.block_f, p.vectors = (g.grid + p.lanes - 1) / p.lanes;
    p.by_filters = p.fblocks >= 2 * p.parts || p.fblocks >= p.vectors;
    p.units = jobs * p.parts;
    run(conv_worker, &p, p.units < t ? (int)p.units : t);
}

#endif /* DLRT_INT8_X86 */

/* ---- the entry points ---------------------------------------------------- */

bool dlrt_cpu_has_vnni(void) {
#ifdef DLRT_INT8_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

bool dlrt_cpu_has_avx2(void) {
#ifdef DLRT_INT8_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

/* The path a call takes: 2 VNNI, 1 AVX2, 0 portable. */
static int path(const DlrtQConv *q) {
    if (q->sh > 64 || q->sw > 64) /* the conversion's phases: the portable path's */
        return 0;
    return q->vnni ? 2 : q->avx2 && dlrt_cpu_has_avx2() ? 1 : 0;
}

size_t dlrt_qconv_s8_work(const DlrtQConv *q, int threads) {
    if (!path(q))
        return portable_work(q, threads);
    size_t t = (size_t)(threads > 1 ? threads : 1), bytes = dlrt_qconv_s8_packed(q);
    bytes += int8_round64((size_t)q->f * sizeof(Int8Epilogue));
    if (!int8_is_dense(q)) {
        Int8Geometry g = int8_geometry(q);
        bytes += int8_round64((size_t)g.taps * sizeof(int32_t)) + t * g.worker;
    }
    return bytes;
}

void dlrt_qconv_s8(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                   const DlrtRequant *rq, int8_t *y, int32_t *acc, const void *packed,
                   void *work, int threads) {
#ifdef DLRT_INT8_X86
    int way = path(q);
    if (way) {
        simd(q, n, x, w, rq, y, acc, packed, work, threads, way == 2);
        return;
    }
#endif
    (void)packed;
    portable(q, n, x, w, rq, y, acc, work, threads);
}
