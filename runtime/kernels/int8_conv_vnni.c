/* int8_conv_vnni.c — the AVX-512 VNNI path of the int8 convolution
 * (int8_conv.c says how it computes): the register blocks of vpdpbusd, the
 * vector requantization and the stores of a convolution's results, the
 * dense layer, and the conversion's 64-column interleaving.  Compiled with
 * GCC's target attribute, so libdlrt builds on any x86-64; called only
 * where the CPU has AVX-512 VNNI (dlrt_cpu_has_vnni). */
#include <string.h>

#include "int8_conv.h"

#ifdef DLRT_INT8_X86
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* The register block: filters by vectors of 16 positions, 4 by 6, or 6
 * by at most 4 (a plane of 7x7 fills 4 vectors). */
enum { BLOCK_F = 6, BLOCK_V = 6 };

/* len columns of four rows r[0..3] into dst, 4 bytes a column, xor
 * bias_byte (0x80: biased by 128): 64 columns at a time (byte and word unpacking within
 * 128-bit lanes, then a 4x4 transpose of the lanes), the rest 16 at a time,
 * the last ones masked. */
VNNI void int8_interleave4_avx512(const int8_t *const r[4], int64_t len, uint8_t *dst,
                                  uint8_t bias_byte) {
    int64_t i = 0;
    __m512i bias = _mm512_set1_epi8((char)bias_byte);
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
/* 64 columns at a time: each 128-bit lane's even bytes to its low half and
 * odd bytes to its high half, then the lanes' halves gathered. */
VNNI void int8_split2_avx512(const int8_t *src, int64_t len, int8_t *even, int8_t *odd) {
    const __m512i lanes = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
    const __m512i bytes = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    for (int64_t i = 0; i < len; i += 64) {
        int64_t m = len - i < 64 ? len - i : 64;
        __m512i v = _mm512_maskz_loadu_epi8(m == 64 ? ~(__mmask64)0 : ((__mmask64)1 << m) - 1, src + i);
        v = _mm512_permutexvar_epi64(lanes, _mm512_shuffle_epi8(v, bytes));
        int64_t ne = (m + 1) / 2, no = m / 2; /* even and odd columns among these */
        _mm256_mask_storeu_epi8(even + i / 2, ne == 32 ? ~(__mmask32)0 : ((__mmask32)1 << ne) - 1,
                                _mm512_castsi512_si256(v));
        _mm256_mask_storeu_epi8(odd + i / 2, no == 32 ? ~(__mmask32)0 : ((__mmask32)1 << no) - 1,
                                _mm512_extracti64x4_epi64(v, 1));
    }
}

/* A filter's epilogue in vectors, made once per block of results. */
typedef struct {
    __m512i add;      /* the addend of the sums */
    __m512i mult;     /* the multiplier (64-bit lanes) */
    __m512i rnd, odd; /* 2^(shift-1) - 1 and 1 (0 and 0 for a shift of 0) */
    __m128i count;    /* the shift */
    __m512d scale;    /* mult / 2^shift, where the plan takes the double way */
} Requant;

VNNI static inline Requant requant_of(const Int8Epilogue *e) {
    return (Requant){.add = _mm512_set1_epi32(e->add), .mult = _mm512_set1_epi64(e->mult),
                     .rnd = _mm512_set1_epi64(e->shift ? ((int64_t)1 << (e->shift - 1)) - 1 : 0),
                     .odd = _mm512_set1_epi64(e->shift ? 1 : 0),
                     .count = _mm_cvtsi32_si128(e->shift),
                     .scale = _mm512_set1_pd(e->scale)};
}

/* 16 sums (the operand biased) requantized to 16 int8, as dlrt_requantize:
 * (acc + bias) mult rounded half to even at 2^shift, by adding 2^(shift-1)
 * - 1 and the quotient's lowest bit before the arithmetic shift. */
VNNI static inline __m128i requantize16(__m512i v, const Requant *r, __m512i lo) {
    __m512i t = _mm512_add_epi32(v, r->add), hi = _mm512_set1_epi64(127);
    __m512i half[2] = {_mm512_cvtepi32_epi64(_mm512_castsi512_si256(t)),
                       _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(t, 1))};
    __m128i out[2];
    for (int i = 0; i < 2; i++) {
        __m512i p = _mm512_mul_epi32(half[i], r->mult);
        __m512i b = _mm512_and_si512(_mm512_sra_epi64(p, r->count), r->odd);
        p = _mm512_sra_epi64(_mm512_add_epi64(_mm512_add_epi64(p, r->rnd), b), r->count);
        p = _mm512_min_epi64(_mm512_max_epi64(p, lo), hi);
        out[i] = _mm512_cvtepi64_epi8(p);
    }
    return _mm_unpacklo_epi64(out[0], out[1]);
}

/* The same in double, where the plan found it exact (Int8Plan.fast): the
 * sum times mult / 2^shift, clamped, rounded half to even by the
 * conversion.  The product's one rounding is below 2^-45 near the results
 * that matter (|v| <= 128.5), and a value p / 2^shift that is no tie is at
 * least 2^-shift >= 2^-45 from one, so it rounds as the integers do; a tie
 * is a short binary fraction, exact in double. */
VNNI static inline __m128i requantize16_fast(__m512i v, const Requant *r, __m512d lo) {
    __m512i t = _mm512_add_epi32(v, r->add);
    __m512d hi = _mm512_set1_pd(127.0);
    __m512d d0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(t)),
            d1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(t, 1));
    d0 = _mm512_min_pd(_mm512_max_pd(_mm512_mul_pd(d0, r->scale), lo), hi);
    d1 = _mm512_min_pd(_mm512_max_pd(_mm512_mul_pd(d1, r->scale), lo), hi);
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(d0)),
                                   _mm512_cvtpd_epi32(d1), 1);
    return _mm512_cvtepi32_epi8(q);
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

/* Vector v of filter f (its epilogue r) at the positions of `rows`. */
VNNI static inline void store16(const Int8Store *st, bool fast, int64_t f, const Requant *r,
                                const Rows *rows, __m512i v) {
    if (st->y) {
        __m128i b = fast ? requantize16_fast(v, r, _mm512_set1_pd(st->q->relu ? 0.0 : -128.0))
                         : requantize16(v, r, _mm512_set1_epi64(st->q->relu ? 0 : -128));
        int8_t *y = st->y + f * st->np;
        for (int k = 0; k < rows->n; k++)
            _mm_mask_storeu_epi8(y + rows->at[k], rows->mask[k], b);
    } else {
        __m512i a = _mm512_add_epi32(v, r->add); /* the sums alone */
        for (int k = 0; k < rows->n; k++)
            _mm512_mask_storeu_epi32(st->acc + f * st->np + rows->at[k], rows->mask[k], a);
    }
}

/* The results of a block: sums[i * nv + j] of filter f0 + i at rows[j]. */
VNNI static __attribute__((noinline)) void epilogue(const Int8Store *st, bool fast, int64_t f0,
                                                    const Rows *rows, const __m512i *sums, int nf,
                                                    int nv) {
    for (int i = 0; i < nf; i++) {
        Requant r = requant_of(&st->ep[f0 + i]);
        for (int j = 0; j < nv; j++)
            store16(st, fast, f0 + i, &r, &rows[j], _mm512_loadu_si512((const void *)&sums[i * nv + j]));
    }
}

/* Filters f0..f0+NF-1 of the group at grid positions p0.. (NV vectors):
 * xb the converted operand, w4 the group's packed weights. */
VNNI static inline __attribute__((always_inline)) void
block(const Int8Store *st, const uint8_t *xb, const int8_t *w4, const int32_t *off, int64_t f0,
      int64_t p0, const Rows *rows, bool fast, const int NF, const int NV) {
    const Int8Geometry *g = st->g;
    int64_t group = st->q->sh * st->q->sw * g->hq * g->wq * 4; /* bytes of a 4-channel group */
    __m512i acc[BLOCK_F][BLOCK_V];
#pragma GCC unroll 6
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
#pragma GCC unroll 6
            for (int i = 0; i < NF; i++) {
                int32_t wi;
                memcpy(&wi, w + i * g->k4, 4);
                b[i] = _mm512_set1_epi32(wi);
            }
#pragma GCC unroll 6
            for (int j = 0; j < NV; j++) {
                __m512i a = _mm512_loadu_si512((const void *)(xt + j * 64));
#pragma GCC unroll 6
                for (int i = 0; i < NF; i++)
                    acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], a, b[i]);
            }
        }
    }
    /* the epilogue apart, from memory: inlined here, its registers made
       GCC keep the accumulators on the stack */
    __m512i sums[BLOCK_F * BLOCK_V];
#pragma GCC unroll 6
    for (int i = 0; i < NF; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NV; j++)
            _mm512_storeu_si512((void *)&sums[i * NV + j], acc[i][j]);
    epilogue(st, fast, f0, rows, sums, NF, NV);
}

/* Filters [fa, fb) of the group at grid positions [pa, pb). */
VNNI void int8_vnni_blocks(const Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                           const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb) {
    const int32_t *off = p->offs;
    Rows rows[BLOCK_V];
    for (int64_t p0 = pa; p0 < pb; p0 += 16 * BLOCK_V) {
        int nv = (int)((pb - p0 + 15) / 16 < BLOCK_V ? (pb - p0 + 15) / 16 : BLOCK_V);
        for (int j = 0; j < nv; j++)
            rows_of(st->q, st->g->wq, p0 + 16 * j, &rows[j]);
        int step = nv <= 4 ? 6 : 4; /* filters a block: 24 accumulators at most */
        for (int64_t f0 = fa; f0 < fb; f0 += step) {
            int nf = (int)(fb - f0 < step ? fb - f0 : step);
#define CASE(F, V) case (F) * 8 + (V): block(st, xb, w4, off, f0, p0, rows, p->fast, F, V); break;
#define CASES(F) CASE(F, 1) CASE(F, 2) CASE(F, 3) CASE(F, 4) CASE(F, 5) CASE(F, 6)
#define CASES4(F) CASE(F, 1) CASE(F, 2) CASE(F, 3) CASE(F, 4)
            switch (nf * 8 + nv) {
                CASES(1) CASES(2) CASES(3) CASES(4) CASES4(5) CASES4(6)
            default:
                break;
            }
#undef CASES4
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
VNNI static inline __m128i requantize16_lanes(__m512i v, const Int8Epilogue *e, __m512i lo) {
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
 * registers. */
VNNI void int8_vnni_dense(const Int8Plan *p, int64_t fa, int64_t fb) {
    const DlrtQConv *q = p->q;
    const int8_t *x = p->x, *w = p->w;
    const Int8Epilogue *ep = p->ep;
    int8_t *y = p->y;
    int32_t *acc = p->acc;
    int64_t n = p->n;
    int64_t k = q->c, full = k / 64 * 64;
    __mmask64 tail = (__mmask64)((k - full) ? (~0ull >> (64 - (k - full))) : 0);
    __m512i bias = _mm512_set1_epi8((char)0x80), lo = _mm512_set1_epi64(q->relu ? 0 : -128);
    for (int64_t f0 = fa; f0 < fb; f0 += DENSE_F) {
        int nf = fb - f0 < DENSE_F ? (int)(fb - f0) : DENSE_F;
        __mmask16 out = (__mmask16)((1u << nf) - 1);
        Int8Epilogue e[DENSE_F] = {{0, 0, 0, 0, 0}};
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

#else
typedef int int8_conv_vnni_unused; /* ISO C wants a declaration */
#endif
