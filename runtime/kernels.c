/* kernels.c — the ops' computations, forward and backward, in f32 and f64.
 *
 * Every tensor is dense and row-major, batch first: images are [n, c, h, w],
 * dense activations [n, features], conv weights [f, c/groups, kh, kw], dense
 * weights [out, in] (PyTorch's layouts, so checkpoints need no transposes).
 * The semantics are PyTorch's, including its edge cases: max pooling takes
 * the first maximum of a window in row-major order and lets a NaN win, and
 * padding never wins (-inf stands for it); average pooling's divisor follows
 * ATen's cpu_avg_pool (with count_include_pad it counts padded positions
 * inside the padded input but not those a ceil-mode window hangs beyond it);
 * the optimizers round as torch.optim's single-tensor updates of 1.13 do.
 *
 * The matrix products go through OpenBLAS's cblas_sgemm, since they are
 * nearly all the work of a network and BLAS runs them an order of magnitude
 * faster than plain loops: dense forward and backward directly, and the
 * convolutions as one product per sample and group over an im2col buffer
 * (the caller's workspace, dlrt_conv2d_workspace floats), so that a
 * convolution is [f/g, c/g*kh*kw] x [c/g*kh*kw, oh*ow] (the forward one a
 * band of output rows at a time where the whole matrix would outgrow L2:
 * conv_band_rows).  A pointwise convolution (1x1, stride 1, no padding)
 * multiplies the input directly.
 * The backward input kernel scatters the product back with col2im (for
 * stride 1 and few filters, a product over dy's rows padded to the padded
 * input's width, which col2im adds tap by tap in contiguous runs); the
 * backward weight kernel accumulates one product per sample into dw, which
 * it zeroes first.  Pooling, activations, softmax and the optimizers are
 * memory-bound loops.  BLAS takes int sizes: a single matrix of 2^31
 * elements or more is beyond these kernels.
 *
 * Each kernel exists for float (dlrt_relu_forward) and for double
 * (dlrt_relu_forward_f64): the bodies are written once, in kernels.inc,
 * included below once per type.  f32 is what networks run in; f64 is for
 * gradient checks, where finite differences need the precision.  Losses
 * (cross-entropy, MSE) and accuracy are kernels too, with their own notes
 * in kernels.inc.
 *
 * No kernel keeps state or allocates.  OpenMP would go on the loops marked
 * "parallel:"; the convolutions then need one im2col buffer per thread,
 * which is why dlrt_conv2d_workspace takes the batch. */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include <cblas.h>

#include "dlrt.h"

/* ---- what does not depend on the element type --------------------------- */

/* Whether the convolution reads each input pixel once, in place: then the
 * input of a group is already its im2col matrix. */
static bool conv_is_pointwise(const DlrtConv *cv) {
    return cv->kh == 1 && cv->kw == 1 && cv->sh == 1 && cv->sw == 1 && cv->ph == 0 &&
           cv->pw == 0 && cv->oh == cv->h && cv->ow == cv->w;
}

/* The outputs o in [*lo, *hi) of out whose input o * stride + off lies in
 * [0, size). */
static void valid_range(int64_t size, int64_t out, int64_t stride, int64_t off, int64_t *lo,
                        int64_t *hi) {
    int64_t l = off < 0 ? (-off + stride - 1) / stride : 0;
    int64_t h = size - off <= 0 ? 0 : (size - off + stride - 1) / stride;
    if (h > out)
        h = out;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* One output's window clipped to the input: rows [*y0, *y1), columns
 * [*x0, *x1).  Windows of a ceil-mode output may hang over the bottom or
 * right edge; they are clipped like the padding. */
static void pool_window(const DlrtPool *p, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                        int64_t *x0, int64_t *x1) {
    int64_t ys = oy * p->sh - p->ph, xs = ox * p->sw - p->pw;
    *y0 = ys < 0 ? 0 : ys;
    *x0 = xs < 0 ? 0 : xs;
    *y1 = ys + p->kh < p->h ? ys + p->kh : p->h;
    *x1 = xs + p->kw < p->w ? xs + p->kw : p->w;
}

/* The divisor of one average-pooling window, as ATen's cpu_avg_pool
 * computes it: with count_include_pad, the window clipped to the padded
 * input [-ph, h + ph); otherwise clipped to the input.  0 for an empty
 * window. */
static int64_t avg_divisor(const DlrtPool *p, int64_t oy, int64_t ox) {
    int64_t y0, y1, x0, x1;
    pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
    if (y0 >= y1 || x0 >= x1)
        return 0;
    if (!p->count_include_pad)
        return (y1 - y0) * (x1 - x0);
    int64_t ys = oy * p->sh - p->ph, xs = ox * p->sw - p->pw;
    int64_t ye = ys + p->kh < p->h + p->ph ? ys + p->kh : p->h + p->ph;
    int64_t xe = xs + p->kw < p->w + p->pw ? xs + p->kw : p->w + p->pw;
    return (ye - ys) * (xe - xs);
}

/* ---- threads: OpenMP when the build has it ------------------------------- */

#ifdef _OPENMP
#include <omp.h>
#define PRAGMA(x) _Pragma(#x)
/* PARALLEL_FOR(t, loop): the for statement `loop` split in equal static
 * chunks over t workers: a given t always gives each worker the same
 * iterations, hence the same bits.  With one worker the loop runs inline,
 * outside any OpenMP construct: libgomp makes and frees a team even for a
 * region whose `if` clause is false, 0.35 us a region on a 2-core AMD EPYC
 * (LeNet-5's inference at batch 1 entered seven such regions, a sixth of
 * its time). */
#define PARALLEL_FOR(t, ...)                                                                    \
    do {                                                                                         \
        int parallel_for_t = (t);                                                                \
        if (parallel_for_t > 1) {                                                                \
            PRAGMA(omp parallel for num_threads(parallel_for_t) schedule(static))                \
            __VA_ARGS__                                                                          \
        } else {                                                                                 \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    } while (0)
/* PARALLEL(t, block): the block run by t workers at once, each telling
 * itself apart by worker(), with BARRIER() between its phases; with one
 * worker, inline (as PARALLEL_FOR). */
#define PARALLEL(t, ...)                                                                        \
    do {                                                                                         \
        int parallel_t = (t);                                                                    \
        if (parallel_t > 1) {                                                                    \
            PRAGMA(omp parallel num_threads(parallel_t))                                         \
            __VA_ARGS__                                                                          \
        } else {                                                                                 \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    } while (0)
#define BARRIER() PRAGMA(omp barrier)
static int worker(void) { return omp_get_thread_num(); }
int dlrt_threads(void) { return omp_get_max_threads(); }
#else
#define PARALLEL_FOR(t, ...)                                                                    \
    do {                                                                                         \
        (void)(t); /* one thread: t is 1 */                                                      \
        __VA_ARGS__                                                                              \
    } while (0)
#define PARALLEL(t, ...) PARALLEL_FOR(t, __VA_ARGS__)
#define BARRIER() ((void)0)
static int worker(void) { return 0; }
int dlrt_threads(void) { return 1; }
#endif

/* Products and loops smaller than this (multiply-adds or elements) run on
 * one thread: waking others costs more than they save. */
#define PARALLEL_MIN_WORK (1 << 16)

/* Workers for a loop of `items` iterations and `work` in all, given at most
 * `threads` (the buffers a convolution's workspace holds, say). */
static int workers(int threads, int64_t items, int64_t work) {
    int64_t t = dlrt_threads();
    if (threads < t)
        t = threads;
    if (items < t)
        t = items;
    return work < PARALLEL_MIN_WORK || t < 1 ? 1 : (int)t;
}

int dlrt_workers(int threads, int64_t items, int64_t work) {
    return workers(threads, items, work);
}

int dlrt_worker(void) { return worker(); }

/* Whether a max pooling's 2x2 windows of stride 2 tile its planes exactly
 * (h = 2 oh, w = 2 ow), with rows short enough for runs of MAXPOOL_RUN
 * floats: the case of maxpool_2x2_rows and maxpool_backward_2x2_rows. */
#define MAXPOOL_RUN 512
static bool pool_tiles_2x2(const DlrtPool *p) {
    return p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 && p->pw == 0 &&
           p->h == 2 * p->oh && p->w == 2 * p->ow && p->w <= MAXPOOL_RUN;
}

/* The work of a pooling for `workers`: a comparison or an addition per tap
 * of each window.  Counted as the input's elements instead, GoogLeNet's
 * 3x3 poolings of 832 planes of 7x7 (40,768 elements, 366,912 taps) ran on
 * one thread, at 4 times ONNX Runtime's time. */
static int64_t pool_work(const DlrtPool *p, int64_t n) {
    return n * p->c * p->oh * p->ow * p->kh * p->kw;
}

/* Elements of each of the two buffers that max pooling keeps on the stack
 * (kernels.inc's maxpool_band): the padded input rows of a band of output
 * rows, and their maxima down the windows; and of the one buffer of a
 * plane's maxima down the windows (maxpool_same_plane and
 * maxpool_strided_plane). */
#define MAXPOOL_BAND 8192

/* Whether a max pooling's windows are centred on their outputs at stride 1
 * (kh = 2 ph + 1, kw = 2 pw + 1, so the planes keep their size), with a
 * plane small enough for maxpool_same_plane's buffer. */
static bool maxpool_centred(const DlrtPool *p) {
    return p->sh == 1 && p->sw == 1 && p->kh == 2 * p->ph + 1 && p->kw == 2 * p->pw + 1 &&
           p->oh == p->h && p->ow == p->w && p->h * p->w <= MAXPOOL_BAND;
}

/* Whether a max pooling takes maxpool_strided_plane: no padding, a stride
 * of 2 or more each way, windows reaching at most a stride past the next
 * one's start (kh <= 2 sh, kw <= 2 sw), every window starting inside the
 * plane and the columns where they start inside it too (sw * ow <= w), and
 * those columns of every output row within the buffer. */
static bool maxpool_strided(const DlrtPool *p) {
    return p->ph == 0 && p->pw == 0 && p->sh >= 2 && p->sw >= 2 && p->kh <= 2 * p->sh &&
           p->kw <= 2 * p->sw && p->oh > 0 && p->ow > 0 && (p->oh - 1) * p->sh < p->h &&
           p->sw * p->ow <= p->w && p->oh * p->sw * p->ow <= MAXPOOL_BAND;
}

/* The output rows of a band of maxpool_band: the tile pass's band
 * (p->band) or, without one, as many as its buffers hold, and never more;
 * 0 where not even one fits (rows over about 8192 / kh elements wide), and
 * then the windows are scanned one by one. */
static int64_t maxpool_band_rows(const DlrtPool *p) {
    int64_t wp = (p->ow - 1) * p->sw + p->kw;
    if (p->oh <= 0 || p->ow <= 0 || p->kh * wp > MAXPOOL_BAND)
        return 0;
    int64_t by_pad = (MAXPOOL_BAND / wp - p->kh) / p->sh + 1, by_v = MAXPOOL_BAND / wp;
    int64_t most = by_pad < by_v ? by_pad : by_v;
    return p->band > 0 && p->band < most ? p->band : most;
}

/* Whether the forward max pooling may take whole planes at a time
 * (maxpool_same_plane, maxpool_strided_plane): unless the tile pass asked
 * for bands of fewer rows than a plane has. */
static bool maxpool_whole_planes(const DlrtPool *p) { return p->band <= 0 || p->band >= p->oh; }

/* The size of a convolution's weights. */
static int64_t conv_weights(const DlrtConv *cv) {
    return cv->f * (cv->c / cv->groups) * cv->kh * cv->kw;
}

/* How a convolution of n samples uses its workers (at most `threads`): by
 * sample when there are at least as many samples as workers, or else one
 * sample at a time, each sample's im2col and products split among the
 * workers (a batch of 1 on 2 threads).  Sharing a sample forks and joins
 * the workers for each product and each im2col; a sample of fewer
 * multiply-adds than CONV_INSIDE_MIN_WORK (LeNet-5's, 117,600 and 240,000)
 * takes less time than that costs.  Measured on 2 threads (AMD EPYC, AVX2,
 * the runtime's call alone, 301 calls, two rounds): 1x1 convolutions of
 * 1.3M to 3.2M multiply-adds (GoogLeNet's reductions before its 5x5
 * branches, which the old bound of 2^22 left on one thread at twice ONNX
 * Runtime's time) were 1.3 to 1.75 times as fast shared, those of 400,000
 * 1.0 to 1.3, those of 160,000 to 200,000 no faster. */
#define CONV_INSIDE_MIN_WORK (1 << 18)

typedef struct ConvSplit {
    int samples; /* workers taking whole samples */
    int inside;  /* workers sharing each sample */
} ConvSplit;

/* A worker's block of a dense product's result (kernels.inc's dense_block):
 * rows [r0, r1), columns [c0, c1). */
typedef struct DenseBlock {
    int64_t r0, r1, c0, c1;
} DenseBlock;

static ConvSplit conv_split(const DlrtConv *cv, int threads, int64_t n) {
    int64_t work = n * conv_weights(cv) * cv->oh * cv->ow; /* multiply-adds */
    int t = workers(threads, INT32_MAX, work);
    if (n >= t || work < n * CONV_INSIDE_MIN_WORK)
        return (ConvSplit){workers(threads, n, work), 1};
    return (ConvSplit){1, t};
}

/* The output rows of a band of the forward convolution's im2col matrix
 * (kernels.inc's conv_forward_sample), for t workers taking whole bands: as
 * many as keep a band within CONV_BAND_BYTES, half of a typical L2 cache,
 * so that the product reads the band from L2 right after im2col wrote it,
 * but at least CONV_BAND_COLUMNS columns, below which a product does not
 * pay for packing its weights again.  All of them (oh, one piece) when the
 * whole matrix fits, or when that leaves fewer than 4 bands a worker, which
 * the workers would share unevenly.  Measured on GoogLeNet at batch 1 on 2
 * threads (AMD EPYC, 512 KB L2): its first convolution (147 rows of 12,544
 * columns, 7.4 MB) 2.8 -> 2.1 ms, its second 3x3 (576 rows of 3,136) 4.7
 * -> 4.5 ms; bands of the 3x3 convolutions on 28x28, 14x14 and 7x7 planes
 * (rows of 1,152 to 1,728 by 784 to 49 columns) made them up to 30% slower,
 * which is what the two limits rule out. */
#define CONV_BAND_BYTES (256 << 10)
#define CONV_BAND_COLUMNS 256
static int64_t conv_band_rows(const DlrtConv *cv, size_t element, int t) {
    int64_t row = cv->c / cv->groups * cv->kh * cv->kw * cv->ow * (int64_t)element;
    if (row <= 0 || row * cv->oh <= CONV_BAND_BYTES)
        return cv->oh;
    int64_t rows = CONV_BAND_BYTES / row, least = (CONV_BAND_COLUMNS + cv->ow - 1) / cv->ow;
    rows = rows > least ? rows : least;
    return (cv->oh + rows - 1) / rows < 4 * t ? cv->oh : rows;
}

/* Whether the input gradient takes the product over padded rows
 * (conv_backward_input_sample): stride 1, where each output row, shifted by
 * a tap, lies inside a row of the padded input, and few filters.  The
 * padded product computes wp - ow more columns per row of col, fg
 * multiply-adds each, at about 16 a cycle; it saves col2im's loop per row,
 * about 6 cycles.  Measured at 1 thread, batch 64 (old/new time): LeNet-5's
 * second convolution (16 filters, rows of 10 padded to 14) 1.16; 16 filters
 * of 3x3 on 10 to 30 columns 1.08-1.34; 32 filters of 5x5 on 10, 14 and 28
 * columns 0.96, 1.04, 0.99; GoogLeNet's 3x3 and 5x5 layers 0.8-0.97. */
static bool conv_padded_input_gradient(const DlrtConv *cv) {
    int64_t wp = cv->w + 2 * cv->pw, hp = cv->h + 2 * cv->ph;
    return cv->sh == 1 && cv->sw == 1 && !conv_is_pointwise(cv) &&
           cv->ow + cv->dw * (cv->kw - 1) == wp && cv->oh + cv->dh * (cv->kh - 1) == hp &&
           cv->f / cv->groups * (wp - cv->ow) <= 96;
}

/* The scratch floats of the padded input gradient: the product (k rows of
 * oh * wp), dy with its rows padded to wp, and, with padding, the padded
 * input gradient before it is cropped. */
static int64_t conv_padded_scratch(const DlrtConv *cv) {
    int64_t wp = cv->w + 2 * cv->pw, hp = cv->h + 2 * cv->ph, cg = cv->c / cv->groups;
    int64_t span = cv->oh * wp, k = cg * cv->kh * cv->kw;
    return (k + cv->f / cv->groups) * span + (cv->ph || cv->pw ? cg * hp * wp : 0);
}

/* A convolution worker's slice of the workspace: an im2col buffer (or the
 * padded input gradient's scratch, if larger), then a copy of dw for the
 * backward weight kernel to sum its samples into. */
static int64_t conv_slice(const DlrtConv *cv) {
    int64_t cols = cv->c / cv->groups * cv->kh * cv->kw * cv->oh * cv->ow;
    if (conv_padded_input_gradient(cv) && conv_padded_scratch(cv) > cols)
        cols = conv_padded_scratch(cv);
    return cols + conv_weights(cv);
}

int64_t dlrt_conv2d_workspace(const DlrtConv *cv, int threads) {
    return conv_slice(cv) * (threads < 1 ? 1 : threads);
}

/* Whether every label is a valid class index. */
static bool labels_in_range(const int32_t *labels, int64_t n, int64_t classes) {
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return false;
    return true;
}

/* On a function whose loop sums values chosen by comparisons (c ? v : 0):
 * GCC vectorizes such a loop only where floating-point operations are not
 * taken to trap (-fno-trapping-math), which changes no value computed,
 * only which exception flags could be raised.  Clang vectorizes it as it
 * is. */
#if defined(__GNUC__) && !defined(__clang__)
#define SELECT_VECTORIZED __attribute__((optimize("no-trapping-math")))
#else
#define SELECT_VECTORIZED
#endif

/* ---- the kernels, once per element type ---------------------------------- */

#define REAL float
#define K(f) f
#define GEMM cblas_sgemm
#define GEMV cblas_sgemv
#include "kernels.inc"
#undef REAL
#undef K
#undef GEMM
#undef GEMV

#define REAL double
#define K(f) f##_f64
#define GEMM cblas_dgemm
#define GEMV cblas_dgemv
#include "kernels.inc"
#undef REAL
#undef K
#undef GEMM
#undef GEMV
