/* kernels.c — the ops' computations, forward and backward, in f32 and f64:
 * what generated code calls for each op (dlrt.h, dlrt_kernels.h).
 *
 * Every tensor is dense and row-major, batch first: images are [n, c, h, w],
 * dense activations [n, features], conv weights [f, c/groups, kh, kw], dense
 * weights [out, in] (PyTorch's layouts, so checkpoints need no transposes).
 * The semantics are PyTorch's, edge cases included (pool.inc, update.inc
 * and loss.inc say which).  No kernel keeps state or allocates: scratch
 * memory is the caller's (dlrt_conv2d_workspace).
 *
 * The kernels are written once, for an element type REAL, in one file per
 * op family beside this one:
 *   gemm.inc         matrix products through BLAS, shared among workers
 *   activation.inc   relu, sigmoid, tanh, leaky_relu; the activations and
 *                    ReLU gradients that other kernels fuse
 *   conv.inc         2-d convolution, forward and gradients (im2col + BLAS)
 *   dense.inc        dense layers, forward and gradients; bias gradients
 *   recurrent.inc    RNN, LSTM and GRU layers, forward and the backward
 *                    recurrence (backpropagation through time)
 *   elementwise.inc  add, sum (add chains), dropout
 *   pool.inc         max, average and global average pooling
 *   norm.inc         softmax, local response and batch normalization
 *   copy.inc         rows copied between buffers (concat, slice)
 *   update.inc       the SGD and Adam updates, gradient clipping
 *   loss.inc         cross-entropy, MSE, accuracy
 *   embedding.inc    token ids to their rows of a weight, and its gradient
 * families.inc includes them in that order, and this file includes it once
 * per element type: for float (dlrt_relu_forward) and for double
 * (dlrt_relu_forward_f64), with REAL the type, K(f) the name of f for it,
 * GEMM and GEMV its BLAS products, and <tgmath.h>, so exp, tanh, fma and
 * sqrt are those of REAL: the float instantiation computes exactly what
 * the f32 kernels always did.  f32 is what networks run in; f64 is for
 * gradient checks, where finite differences need the precision.  One
 * translation unit holds them all, so that the helpers the families share
 * (gemm, activate, workers) stay static and are inlined where they are
 * called.
 *
 * The loops are split among threads with OpenMP (PARALLEL_FOR and PARALLEL,
 * below), each worker on fixed iterations, so that a thread count always
 * gives the same bits; a build without OpenMP runs them on one thread.
 * Each of a convolution's workers needs its own im2col buffer, which is why
 * dlrt_conv2d_workspace takes the thread count. */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include <cblas.h>

#include "dlrt.h"

#include "parallel.h"

#ifdef _OPENMP
int dlrt_threads(void) { return omp_get_max_threads(); }
#else
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

/* On a function whose callers pass constants that pick its loops (the
 * recurrent cells' fast and keep): inlined at every call, so that each copy
 * keeps only its own loops, with no test inside, and those vectorize.
 * GCC's heuristics would keep one copy of a large function, called. */
#if defined(__GNUC__)
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ALWAYS_INLINE inline
#endif

/* ---- the kernels, once per element type ---------------------------------- */

#define REAL float
#define K(f) f
#define GEMM cblas_sgemm
#define GEMV cblas_sgemv
#include "families.inc"
#undef REAL
#undef K
#undef GEMM
#undef GEMV

#define REAL double
#define K(f) f##_f64
#define GEMM cblas_dgemm
#define GEMV cblas_dgemv
#include "families.inc"
#undef REAL
#undef K
#undef GEMM
#undef GEMV
