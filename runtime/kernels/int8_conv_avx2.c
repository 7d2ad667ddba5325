/* int8_conv_avx2.c — the AVX2 path of the int8 convolution (int8_conv.c
 * says how it computes), for CPUs without AVX-512 VNNI: the operand
 * converted and the weights packed as for VNNI, in vectors of 8 positions.
 *
 * AVX2 has no vpdpbusd.  vpmaddubsw multiplies unsigned bytes by signed
 * ones and adds each pair of products into an int16, saturating: with the
 * operand biased by 128 (up to 255) a pair reaches 2 * 255 * 127 and
 * saturates.  So where the call's operand is nonnegative (every value after
 * a ReLU, 0..127) it is converted as it is, a pair is at most 2 * 127 * 127
 * = 32258, and vpmaddubsw then vpmaddwd by ones sum each 4 products into an
 * int32 exactly.  Otherwise the biased bytes and the weights are widened to
 * 16 bits and vpmaddwd sums pairs into int32 (half the products an
 * instruction).  Dense layers widen both to 16 bits.  The results are
 * requantized in double where that is exact, else lane by lane in C
 * (int8_requantize). */
#include <string.h>

#include "int8_conv.h"

#ifdef DLRT_INT8_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* The register blocks: 4 filters by 2 vectors of 8 positions (bytes), or
 * by 1 vector in two halves of 4 positions (16 bits). */
enum { BLOCK_F = 4, BLOCK_V = 2 };

/* Where each lane of a vector of 8 grid positions goes in a filter's
 * plane; -1 for a column past the row's end or a row past the last. */
typedef struct {
    int64_t at[8];
} Lanes;

static void lanes_of(const DlrtQConv *q, int64_t wq, int64_t p0, Lanes *l) {
    int64_t oy = p0 / wq, ox = p0 - oy * wq;
    for (int i = 0; i < 8; i++) {
        l->at[i] = oy < q->oh && ox < q->ow ? oy * q->ow + ox : -1;
        if (++ox == wq)
            ox = 0, oy++;
    }
}

/* The 8 sums v of filter f, of the operand biased or not, stored at the
 * lanes' places: requantized (in double where the plan found it exact, as
 * int8_conv_vnni.c's requantize16_fast says), or the sums alone. */
AVX2 static inline void store8(const Int8Store *st, bool biased, bool fast, int64_t f,
                               const Lanes *l, __m256i v) {
    const Int8Epilogue *e = &st->ep[f];
    int32_t s[8];
    v = _mm256_add_epi32(v, _mm256_set1_epi32(biased ? e->add : e->bias));
    if (st->y && fast) {
        __m256d scale = _mm256_set1_pd(e->scale);
        __m256d lo = _mm256_set1_pd(st->q->relu ? 0.0 : -128.0), hi = _mm256_set1_pd(127.0);
        __m256d d0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v)),
                d1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
        d0 = _mm256_min_pd(_mm256_max_pd(_mm256_mul_pd(d0, scale), lo), hi);
        d1 = _mm256_min_pd(_mm256_max_pd(_mm256_mul_pd(d1, scale), lo), hi);
        _mm_storeu_si128((__m128i *)(void *)s, _mm256_cvtpd_epi32(d0));
        _mm_storeu_si128((__m128i *)(void *)(s + 4), _mm256_cvtpd_epi32(d1));
        for (int i = 0; i < 8; i++)
            if (l->at[i] >= 0)
                st->y[f * st->np + l->at[i]] = (int8_t)s[i];
        return;
    }
    _mm256_storeu_si256((__m256i *)(void *)s, v);
    for (int i = 0; i < 8; i++) {
        if (l->at[i] < 0)
            continue;
        if (st->y)
            st->y[f * st->np + l->at[i]] = int8_requantize(s[i], e, st->q->relu);
        else
            st->acc[f * st->np + l->at[i]] = s[i];
    }
}

/* Filters f0..f0+NF-1 at grid positions p0.. (NV vectors of 8). */
AVX2 static inline __attribute__((always_inline)) void
block_bytes(const Int8Plan *p, const Int8Store *st, const uint8_t *xb, const int8_t *w4,
            int64_t f0, int64_t p0, const Lanes *lanes, const int NF, const int NV) {
    const Int8Geometry *g = st->g;
    int64_t group = st->q->sh * st->q->sw * g->hq * g->wq * 4; /* bytes of a channel group */
    __m256i acc[BLOCK_F][BLOCK_V], ones = _mm256_set1_epi16(1);
    for (int i = 0; i < NF; i++)
        for (int j = 0; j < NV; j++)
            acc[i][j] = _mm256_setzero_si256();
    const int8_t *w = w4 + f0 * g->k4;
    for (int64_t c = 0; c < g->c4; c++) {
        const uint8_t *xc = xb + c * group + p0 * 4;
        for (int64_t t = 0; t < g->taps; t++, w += 4) {
            const uint8_t *xt = xc + (int64_t)p->offs[t] * 4;
            __m256i b[BLOCK_F];
            for (int i = 0; i < NF; i++) {
                int32_t wi;
                memcpy(&wi, w + i * g->k4, 4);
                b[i] = _mm256_set1_epi32(wi);
            }
            for (int j = 0; j < NV; j++) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(xt + j * 32));
                for (int i = 0; i < NF; i++)
                    acc[i][j] = _mm256_add_epi32(
                        acc[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b[i]), ones));
            }
        }
    }
    for (int i = 0; i < NF; i++)
        for (int j = 0; j < NV; j++)
            store8(st, false, p->fast, f0 + i, &lanes[j], acc[i][j]);
}

/* Filters f0..f0+NF-1 at grid positions p0..p0+7, the biased bytes and the
 * weights widened to 16 bits: a half of 4 positions' 4 bytes against a
 * filter's 4 weights gives each position's two pair sums, added at the end. */
AVX2 static inline __attribute__((always_inline)) void
block_wide(const Int8Plan *p, const Int8Store *st, const uint8_t *xb, const int8_t *w4,
           int64_t f0, int64_t p0, const Lanes *lanes, const int NF) {
    const Int8Geometry *g = st->g;
    int64_t group = st->q->sh * st->q->sw * g->hq * g->wq * 4;
    __m256i lo[BLOCK_F], hi[BLOCK_F];
    for (int i = 0; i < NF; i++)
        lo[i] = hi[i] = _mm256_setzero_si256();
    const int8_t *w = w4 + f0 * g->k4;
    for (int64_t c = 0; c < g->c4; c++) {
        const uint8_t *xc = xb + c * group + p0 * 4;
        for (int64_t t = 0; t < g->taps; t++, w += 4) {
            const uint8_t *xt = xc + (int64_t)p->offs[t] * 4;
            __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)xt);
            __m256i a0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(a)),
                    a1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(a, 1));
            for (int i = 0; i < NF; i++) {
                int32_t wi;
                memcpy(&wi, w + i * g->k4, 4);
                __m256i b = _mm256_cvtepi8_epi16(_mm_set1_epi32(wi));
                lo[i] = _mm256_add_epi32(lo[i], _mm256_madd_epi16(a0, b));
                hi[i] = _mm256_add_epi32(hi[i], _mm256_madd_epi16(a1, b));
            }
        }
    }
    /* [p0, p1, p4, p5 | p2, p3, p6, p7] put in order */
    for (int i = 0; i < NF; i++)
        store8(st, true, p->fast, f0 + i, &lanes[0],
               _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[i], hi[i]), 0xd8));
}

void int8_avx2_blocks(const Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                      const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb)
    __attribute__((target("avx2")));

void int8_avx2_blocks(const Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                      const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb) {
    int64_t step = p->biased ? 8 : 8 * BLOCK_V;
    Lanes lanes[BLOCK_V];
    for (int64_t p0 = pa; p0 < pb; p0 += step) {
        int nv = p->biased ? 1 : (int)((pb - p0 + 7) / 8 < BLOCK_V ? (pb - p0 + 7) / 8 : BLOCK_V);
        for (int j = 0; j < nv; j++)
            lanes_of(st->q, st->g->wq, p0 + 8 * j, &lanes[j]);
        for (int64_t f0 = fa; f0 < fb; f0 += BLOCK_F) {
            int nf = (int)(fb - f0 < BLOCK_F ? fb - f0 : BLOCK_F);
            if (p->biased) {
                switch (nf) {
                case 1: block_wide(p, st, xb, w4, f0, p0, lanes, 1); break;
                case 2: block_wide(p, st, xb, w4, f0, p0, lanes, 2); break;
                case 3: block_wide(p, st, xb, w4, f0, p0, lanes, 3); break;
                default: block_wide(p, st, xb, w4, f0, p0, lanes, 4); break;
                }
                continue;
            }
#define CASE(F, V) case (F) * 4 + (V): block_bytes(p, st, xb, w4, f0, p0, lanes, F, V); break;
            switch (nf * 4 + nv) {
                CASE(1, 1) CASE(1, 2) CASE(2, 1) CASE(2, 2) CASE(3, 1) CASE(3, 2) CASE(4, 1)
                CASE(4, 2)
            default:
                break;
            }
#undef CASE
        }
    }
}

/* The sum of v's 8 lanes. */
AVX2 static inline int32_t sum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

void int8_avx2_dense(const Int8Plan *p, int64_t fa, int64_t fb) __attribute__((target("avx2")));

/* Dense: each sample's row dotted with 4 filters' rows at a time, both
 * widened to 16 bits (the operand as it is: no bias), the tails in C. */
void int8_avx2_dense(const Int8Plan *p, int64_t fa, int64_t fb) {
    const DlrtQConv *q = p->q;
    int64_t k = q->c, full = k / 16 * 16;
    for (int64_t f0 = fa; f0 < fb; f0 += 4) {
        int nf = fb - f0 < 4 ? (int)(fb - f0) : 4;
        for (int64_t s = 0; s < p->n; s++) {
            const int8_t *xs = p->x + s * k;
            __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                            _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int64_t i = 0; i < full; i += 16) {
                __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(xs + i)));
                for (int j = 0; j < nf; j++)
                    a[j] = _mm256_add_epi32(
                        a[j], _mm256_madd_epi16(v, _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                                       (const __m128i *)(const void *)(p->w + (f0 + j) * k + i)))));
            }
            for (int j = 0; j < nf; j++) {
                int64_t f = f0 + j;
                int32_t sum = sum8(a[j]);
                for (int64_t i = full; i < k; i++)
                    sum += (int32_t)xs[i] * (int32_t)p->w[f * k + i];
                const Int8Epilogue *e = &p->ep[f];
                int32_t v = (int32_t)((uint32_t)sum + (uint32_t)e->bias);
                if (p->y)
                    p->y[s * q->f + f] = int8_requantize(v, e, q->relu);
                else
                    p->acc[s * q->f + f] = v;
            }
        }
    }
}

#else
typedef int int8_conv_avx2_unused; /* ISO C wants a declaration */
#endif
