/* int8_conv.h — what the int8 convolution's files share (inside libdlrt,
 * not installed): int8_conv.c (the entry points, the geometry, the packing,
 * the conversion of the operand, the portable path and the split among
 * workers) and its vector paths, int8_conv_vnni.c (AVX-512 VNNI) and
 * int8_conv_avx2.c (AVX2).  int8_conv.c says how the paths compute. */
#ifndef DLRT_INT8_CONV_H
#define DLRT_INT8_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "../dlrt.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define DLRT_INT8_X86 1 /* the vector paths are compiled */
#endif

static inline size_t int8_round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* A dense layer: a 1x1 convolution of a 1x1 plane, without groups. */
static inline bool int8_is_dense(const DlrtQConv *q) {
    return q->h == 1 && q->w == 1 && q->kh == 1 && q->kw == 1 && q->oh == 1 && q->ow == 1 &&
           q->groups == 1;
}

/* The most entries a path's register block reads past a grid position: 6
 * vectors of 16 (VNNI), more than AVX2's. */
enum { INT8_READ_AHEAD = 96 };

/* How a convolution's operand is converted and its weights packed. */
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
    size_t worker;     /* a worker's scratch: the converted operand, then rows of
                          the operand split into column phases (and one of 0) */
} Int8Geometry;

Int8Geometry int8_geometry(const DlrtQConv *q);

/* What the epilogue needs of a filter. */
typedef struct {
    int64_t mult;  /* the requantization's multiplier and shift */
    int32_t shift;
    int32_t add;   /* added to sums of the operand biased by 128: the bias
                      less 128 times the weights' sum (int32, wrapping) */
    int32_t bias;  /* added to sums of the operand as it is */
    double scale;  /* mult / 2^shift (Int8Plan.fast) */
} Int8Epilogue;

/* One sum (with its addend already added) requantized, as dlrt_requantize. */
static inline int8_t int8_requantize(int32_t v, const Int8Epilogue *e, bool relu) {
    int64_t p = (int64_t)v * e->mult, q = p;
    if (e->shift > 0) {
        q = p >> e->shift;
        int64_t rem = p - q * ((int64_t)1 << e->shift), half = (int64_t)1 << (e->shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
    }
    int64_t lo = relu ? 0 : -128;
    return (int8_t)(q < lo ? lo : q > 127 ? 127 : q);
}

/* The part of a block's results to store. */
typedef struct {
    const DlrtQConv *q;
    const Int8Geometry *g;
    int8_t *y;                /* the group's first filter's results (int8), or */
    int32_t *acc;             /* its sums */
    const Int8Epilogue *ep;   /* the group's filters' */
    int64_t np;               /* a filter's results: oh * ow */
} Int8Store;

/* One call's plan, which each worker reads. */
typedef struct Int8Plan {
    const DlrtQConv *q;
    const Int8Geometry *g;
    int64_t n;
    const int8_t *x, *w, *w4;   /* the operand, the weights, the weights packed */
    const int32_t *sums;        /* the filters' sums */
    int8_t *y;
    int32_t *acc;
    const Int8Epilogue *ep;     /* per filter */
    const int32_t *offs;        /* the taps' offsets */
    char *xbs;                  /* the workers' converted operands */
    int64_t units, parts;       /* (sample, group) jobs times parts of each */
    int64_t fblocks, vectors;   /* a group's blocks of filters, vectors of positions */
    int64_t block_f, lanes;     /* the path's filters a block, positions a vector */
    bool by_filters;            /* a job's parts split its filters (else its positions) */
    bool biased;                /* the operand is converted biased by 128 (else as
                                   it is: nonnegative, for AVX2's vpmaddubsw) */
    bool avx512;                /* the conversion may use AVX-512 */
    bool fast;                  /* every filter's shift is at most 45: the
                                   requantization in double is exact */
    /* the path's blocks: filters [fa, fb) of a group at grid positions [pa, pb) */
    void (*blocks)(const struct Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                   const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb);
    /* the path's dense layer: filters [fa, fb) of every sample */
    void (*dense)(const struct Int8Plan *p, int64_t fa, int64_t fb);
} Int8Plan;

/* ---- int8_conv_vnni.c ---- */
void int8_vnni_blocks(const Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                      const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb);
void int8_vnni_dense(const Int8Plan *p, int64_t fa, int64_t fb);
/* len columns of the rows r[0..3] into dst, 4 bytes a column, xor bias */
void int8_interleave4_avx512(const int8_t *const r[4], int64_t len, uint8_t *dst, uint8_t bias);
/* src[len]'s even columns into even, its odd ones into odd */
void int8_split2_avx512(const int8_t *src, int64_t len, int8_t *even, int8_t *odd);

/* ---- int8_conv_avx2.c ---- */
void int8_avx2_blocks(const Int8Plan *p, const Int8Store *st, const uint8_t *xb,
                      const int8_t *w4, int64_t fa, int64_t fb, int64_t pa, int64_t pb);
void int8_avx2_dense(const Int8Plan *p, int64_t fa, int64_t fb);

#endif
