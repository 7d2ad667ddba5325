/* kernels.c — the ops' computations, forward and backward, in f32.
 *
 * Every tensor is dense and row-major, batch first: images are [n, c, h, w],
 * dense activations [n, features], conv weights [f, c/groups, kh, kw], dense
 * weights [out, in] (PyTorch's layouts, so checkpoints need no transposes).
 * The semantics are PyTorch's, including its edge cases: max pooling takes
 * the first maximum of a window in row-major order and lets a NaN win, and
 * padding never wins (it is not read); average pooling's divisor follows
 * ATen's cpu_avg_pool (with count_include_pad it counts padded positions
 * inside the padded input but not those a ceil-mode window hangs beyond it);
 * the optimizers round as torch.optim's single-tensor updates of 1.13 do.
 *
 * The matrix products go through OpenBLAS's cblas_sgemm, since they are
 * nearly all the work of a network and BLAS runs them an order of magnitude
 * faster than plain loops: dense forward and backward directly, and the
 * convolutions as one product per sample and group over an im2col buffer
 * (the caller's workspace, dlrt_conv2d_workspace floats), so that a
 * convolution is [f/g, c/g*kh*kw] x [c/g*kh*kw, oh*ow].  A pointwise
 * convolution (1x1, stride 1, no padding) multiplies the input directly.
 * The backward input kernel scatters the product back with col2im; the
 * backward weight kernel accumulates one product per sample into dw, which
 * it zeroes first.  Pooling, activations, softmax and the optimizers are
 * memory-bound loops.  BLAS takes int sizes: a single matrix of 2^31
 * elements or more is beyond these kernels.
 *
 * No kernel keeps state or allocates.  OpenMP would go on the loops marked
 * "parallel:"; the convolutions then need one im2col buffer per thread,
 * which is why dlrt_conv2d_workspace takes the batch. */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "dlrt.h"

/* ------------------------------------------------------------------------ */
/* Matrix products                                                          */
/* ------------------------------------------------------------------------ */

/* c[m,n] = op(a)[m,k] op(b)[k,n], plus c when accumulate; all row-major.
 * Empty products are handled here, since BLAS rejects (and prints about)
 * leading dimensions of 0. */
static void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t lda, const float *b, int64_t ldb, bool accumulate,
                 float *c, int64_t ldc) {
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; i++)
                memset(c + i * ldc, 0, (size_t)n * sizeof *c);
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)lda,
                b, (int)ldb, accumulate ? 1.0f : 0.0f, c, (int)ldc);
}

/* ------------------------------------------------------------------------ */
/* Convolution                                                              */
/* ------------------------------------------------------------------------ */

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

/* col[(ci*kh + ki)*kw + kj, oy*ow + ox] = x[ci, oy*sh - ph + ki*dh,
 * ox*sw - pw + kj*dw], 0 in the padding, for the c/groups channels of one
 * group of one sample. */
static void im2col(const DlrtConv *cv, const float *x, float *col) {
    int64_t cg = cv->c / cv->groups, plane = cv->oh * cv->ow;
    for (int64_t ci = 0; ci < cg; ci++) {
        for (int64_t ki = 0; ki < cv->kh; ki++) {
            int64_t offy = ki * cv->dh - cv->ph, ylo, yhi;
            valid_range(cv->h, cv->oh, cv->sh, offy, &ylo, &yhi);
            for (int64_t kj = 0; kj < cv->kw; kj++) {
                int64_t offx = kj * cv->dw - cv->pw, xlo, xhi;
                valid_range(cv->w, cv->ow, cv->sw, offx, &xlo, &xhi);
                float *row = col + ((ci * cv->kh + ki) * cv->kw + kj) * plane;
                for (int64_t oy = 0; oy < cv->oh; oy++) {
                    float *r = row + oy * cv->ow;
                    if (oy < ylo || oy >= yhi) {
                        memset(r, 0, (size_t)cv->ow * sizeof *r);
                        continue;
                    }
                    const float *xr = x + (ci * cv->h + oy * cv->sh + offy) * cv->w;
                    for (int64_t ox = 0; ox < xlo; ox++)
                        r[ox] = 0.0f;
                    for (int64_t ox = xlo; ox < xhi; ox++)
                        r[ox] = xr[ox * cv->sw + offx];
                    for (int64_t ox = xhi; ox < cv->ow; ox++)
                        r[ox] = 0.0f;
                }
            }
        }
    }
}

/* The adjoint of im2col: adds each col entry into the x position it was
 * read from (x must be zeroed first; padding entries are dropped). */
static void col2im(const DlrtConv *cv, const float *col, float *x) {
    int64_t cg = cv->c / cv->groups, plane = cv->oh * cv->ow;
    for (int64_t ci = 0; ci < cg; ci++) {
        for (int64_t ki = 0; ki < cv->kh; ki++) {
            int64_t offy = ki * cv->dh - cv->ph, ylo, yhi;
            valid_range(cv->h, cv->oh, cv->sh, offy, &ylo, &yhi);
            for (int64_t kj = 0; kj < cv->kw; kj++) {
                int64_t offx = kj * cv->dw - cv->pw, xlo, xhi;
                valid_range(cv->w, cv->ow, cv->sw, offx, &xlo, &xhi);
                const float *row = col + ((ci * cv->kh + ki) * cv->kw + kj) * plane;
                for (int64_t oy = ylo; oy < yhi; oy++) {
                    const float *r = row + oy * cv->ow;
                    float *xr = x + (ci * cv->h + oy * cv->sh + offy) * cv->w;
                    for (int64_t ox = xlo; ox < xhi; ox++)
                        xr[ox * cv->sw + offx] += r[ox];
                }
            }
        }
    }
}

int64_t dlrt_conv2d_workspace(const DlrtConv *cv, int64_t n) {
    (void)n; /* one buffer, reused by every sample (one per thread with OpenMP) */
    return cv->c / cv->groups * cv->kh * cv->kw * cv->oh * cv->ow;
}

void dlrt_conv2d_forward(const DlrtConv *cv, int64_t n, const float *x, const float *w,
                         const float *b, float *y, float *work) {
    int64_t cg = cv->c / cv->groups, fg = cv->f / cv->groups;
    int64_t k = cg * cv->kh * cv->kw, plane = cv->oh * cv->ow;
    bool pointwise = conv_is_pointwise(cv);
    /* parallel: over samples, each with its own slice of work */
    for (int64_t s = 0; s < n; s++) {
        for (int64_t g = 0; g < cv->groups; g++) {
            const float *xg = x + (s * cv->c + g * cg) * cv->h * cv->w;
            float *yg = y + (s * cv->f + g * fg) * plane;
            const float *col = xg;
            if (!pointwise) {
                im2col(cv, xg, work);
                col = work;
            }
            if (b)
                for (int64_t i = 0; i < fg; i++)
                    for (int64_t j = 0; j < plane; j++)
                        yg[i * plane + j] = b[g * fg + i];
            gemm(false, false, fg, plane, k, w + g * fg * k, k, col, plane, b != NULL, yg,
                 plane);
        }
    }
}

void dlrt_conv2d_backward_input(const DlrtConv *cv, int64_t n, const float *dy,
                                const float *w, float *dx, float *work) {
    int64_t cg = cv->c / cv->groups, fg = cv->f / cv->groups;
    int64_t k = cg * cv->kh * cv->kw, plane = cv->oh * cv->ow;
    bool pointwise = conv_is_pointwise(cv);
    /* parallel: over samples, each with its own slice of work */
    for (int64_t s = 0; s < n; s++) {
        for (int64_t g = 0; g < cv->groups; g++) {
            float *dxg = dx + (s * cv->c + g * cg) * cv->h * cv->w;
            const float *dyg = dy + (s * cv->f + g * fg) * plane;
            const float *wg = w + g * fg * k;
            if (pointwise) {
                gemm(true, false, k, plane, fg, wg, k, dyg, plane, false, dxg, plane);
                continue;
            }
            gemm(true, false, k, plane, fg, wg, k, dyg, plane, false, work, plane);
            memset(dxg, 0, (size_t)(cg * cv->h * cv->w) * sizeof *dxg);
            col2im(cv, work, dxg);
        }
    }
}

void dlrt_conv2d_backward_weight(const DlrtConv *cv, int64_t n, const float *dy,
                                 const float *x, float *dw, float *work) {
    int64_t cg = cv->c / cv->groups, fg = cv->f / cv->groups;
    int64_t k = cg * cv->kh * cv->kw, plane = cv->oh * cv->ow;
    bool pointwise = conv_is_pointwise(cv);
    memset(dw, 0, (size_t)(cv->f * k) * sizeof *dw);
    /* parallel: over groups (each writes its own block of dw); over samples
     * only with a per-thread dw to reduce */
    for (int64_t s = 0; s < n; s++) {
        for (int64_t g = 0; g < cv->groups; g++) {
            const float *xg = x + (s * cv->c + g * cg) * cv->h * cv->w;
            const float *dyg = dy + (s * cv->f + g * fg) * plane;
            const float *col = xg;
            if (!pointwise) {
                im2col(cv, xg, work);
                col = work;
            }
            gemm(false, true, fg, k, plane, dyg, plane, col, plane, true, dw + g * fg * k, k);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Dense                                                                    */
/* ------------------------------------------------------------------------ */

void dlrt_dense_forward(int64_t n, int64_t in, int64_t out, const float *x, const float *w,
                        const float *b, float *y) {
    if (b)
        for (int64_t i = 0; i < n; i++)
            memcpy(y + i * out, b, (size_t)out * sizeof *y);
    gemm(false, true, n, out, in, x, in, w, in, b != NULL, y, out);
}

void dlrt_dense_backward_input(int64_t n, int64_t in, int64_t out, const float *dy,
                               const float *w, float *dx) {
    gemm(false, false, n, in, out, dy, out, w, in, false, dx, in);
}

void dlrt_dense_backward_weight(int64_t n, int64_t in, int64_t out, const float *dy,
                                const float *x, float *dw) {
    gemm(true, false, out, in, n, dy, out, x, in, false, dw, in);
}

void dlrt_bias_backward(int64_t n, int64_t c, int64_t spatial, const float *dy, float *db) {
    /* in double: a bias sums the whole batch, thousands of terms */
    for (int64_t j = 0; j < c; j++) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float *row = dy + (i * c + j) * spatial;
            for (int64_t s = 0; s < spatial; s++)
                sum += row[s];
        }
        db[j] = (float)sum;
    }
}

/* ------------------------------------------------------------------------ */
/* Elementwise                                                              */
/* ------------------------------------------------------------------------ */

void dlrt_relu_forward(int64_t count, const float *x, float *y) {
    /* NaN stays NaN, as with torch.relu */
    for (int64_t i = 0; i < count; i++)
        y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void dlrt_relu_backward(int64_t count, const float *dy, const float *y, float *dx) {
    for (int64_t i = 0; i < count; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void dlrt_sigmoid_forward(int64_t count, const float *x, float *y) {
    /* expf(-x) overflows to inf for x < -88, giving the right limit 0 */
    for (int64_t i = 0; i < count; i++)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void dlrt_sigmoid_backward(int64_t count, const float *dy, const float *y, float *dx) {
    for (int64_t i = 0; i < count; i++)
        dx[i] = dy[i] * (1.0f - y[i]) * y[i];
}

void dlrt_tanh_forward(int64_t count, const float *x, float *y) {
    for (int64_t i = 0; i < count; i++)
        y[i] = tanhf(x[i]);
}

void dlrt_tanh_backward(int64_t count, const float *dy, const float *y, float *dx) {
    for (int64_t i = 0; i < count; i++)
        dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void dlrt_add(int64_t count, const float *a, const float *b, float *y) {
    /* each y[i] is written after a[i] and b[i] are read: safe in place */
    for (int64_t i = 0; i < count; i++)
        y[i] = a[i] + b[i];
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                  */
/* ------------------------------------------------------------------------ */

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

/* The index in the plane of the window's maximum: the first in row-major
 * order, or the last NaN (ATen's rule); -1 for an empty window. */
static int64_t window_argmax(const DlrtPool *p, const float *plane, int64_t oy, int64_t ox) {
    int64_t y0, y1, x0, x1;
    pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
    if (y0 >= y1 || x0 >= x1)
        return -1;
    int64_t best = y0 * p->w + x0;
    float max = -INFINITY;
    for (int64_t iy = y0; iy < y1; iy++) {
        for (int64_t ix = x0; ix < x1; ix++) {
            float v = plane[iy * p->w + ix];
            if (v > max || isnan(v)) {
                max = v;
                best = iy * p->w + ix;
            }
        }
    }
    return best;
}

void dlrt_maxpool_forward(const DlrtPool *p, int64_t n, const float *x, float *y) {
    /* parallel: over planes */
    for (int64_t pl = 0; pl < n * p->c; pl++) {
        const float *xp = x + pl * p->h * p->w;
        float *yp = y + pl * p->oh * p->ow;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t i = window_argmax(p, xp, oy, ox);
                yp[oy * p->ow + ox] = i < 0 ? -INFINITY : xp[i];
            }
        }
    }
}

void dlrt_maxpool_backward(const DlrtPool *p, int64_t n, const float *dy, const float *x,
                           float *dx) {
    /* parallel: over planes */
    for (int64_t pl = 0; pl < n * p->c; pl++) {
        const float *xp = x + pl * p->h * p->w;
        const float *dyp = dy + pl * p->oh * p->ow;
        float *dxp = dx + pl * p->h * p->w;
        memset(dxp, 0, (size_t)(p->h * p->w) * sizeof *dxp);
        for (int64_t oy = 0; oy < p->oh; oy++) {
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t i = window_argmax(p, xp, oy, ox);
                if (i >= 0)
                    dxp[i] += dyp[oy * p->ow + ox];
            }
        }
    }
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

void dlrt_avgpool_forward(const DlrtPool *p, int64_t n, const float *x, float *y) {
    /* parallel: over planes */
    for (int64_t pl = 0; pl < n * p->c; pl++) {
        const float *xp = x + pl * p->h * p->w;
        float *yp = y + pl * p->oh * p->ow;
        for (int64_t oy = 0; oy < p->oh; oy++) {
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t div = avg_divisor(p, oy, ox), y0, y1, x0, x1;
                pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
                float sum = 0.0f;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        sum += xp[iy * p->w + ix];
                yp[oy * p->ow + ox] = div > 0 ? sum / (float)div : 0.0f;
            }
        }
    }
}

void dlrt_avgpool_backward(const DlrtPool *p, int64_t n, const float *dy, float *dx) {
    /* parallel: over planes */
    for (int64_t pl = 0; pl < n * p->c; pl++) {
        const float *dyp = dy + pl * p->oh * p->ow;
        float *dxp = dx + pl * p->h * p->w;
        memset(dxp, 0, (size_t)(p->h * p->w) * sizeof *dxp);
        for (int64_t oy = 0; oy < p->oh; oy++) {
            for (int64_t ox = 0; ox < p->ow; ox++) {
                int64_t div = avg_divisor(p, oy, ox), y0, y1, x0, x1;
                if (div == 0)
                    continue;
                pool_window(p, oy, ox, &y0, &y1, &x0, &x1);
                float g = dyp[oy * p->ow + ox] / (float)div;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        dxp[iy * p->w + ix] += g;
            }
        }
    }
}

void dlrt_globalavgpool_forward(int64_t n, int64_t c, int64_t hw, const float *x, float *y) {
    for (int64_t pl = 0; pl < n * c; pl++) {
        double sum = 0.0;
        for (int64_t i = 0; i < hw; i++)
            sum += x[pl * hw + i];
        y[pl] = (float)(sum / (double)hw);
    }
}

void dlrt_globalavgpool_backward(int64_t n, int64_t c, int64_t hw, const float *dy,
                                 float *dx) {
    for (int64_t pl = 0; pl < n * c; pl++) {
        float g = dy[pl] / (float)hw;
        for (int64_t i = 0; i < hw; i++)
            dx[pl * hw + i] = g;
    }
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                  */
/* ------------------------------------------------------------------------ */

void dlrt_softmax_forward(int64_t outer, int64_t axis, int64_t inner, const float *x,
                          float *y) {
    /* parallel: over outer */
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const float *xs = x + o * axis * inner + i;
            float *ys = y + o * axis * inner + i;
            /* the largest value subtracted: no exp overflows, and the sum
             * holds exp(0) = 1 */
            float max = -INFINITY;
            for (int64_t a = 0; a < axis; a++)
                if (xs[a * inner] > max)
                    max = xs[a * inner];
            double sum = 0.0;
            for (int64_t a = 0; a < axis; a++) {
                float e = expf(xs[a * inner] - max);
                ys[a * inner] = e;
                sum += e;
            }
            for (int64_t a = 0; a < axis; a++)
                ys[a * inner] = (float)((double)ys[a * inner] / sum);
        }
    }
}

void dlrt_softmax_backward(int64_t outer, int64_t axis, int64_t inner, const float *dy,
                           const float *y, float *dx) {
    /* parallel: over outer */
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * axis * inner + i;
            double dot = 0.0;
            for (int64_t a = 0; a < axis; a++)
                dot += (double)dy[base + a * inner] * y[base + a * inner];
            for (int64_t a = 0; a < axis; a++)
                dx[base + a * inner] =
                    (float)(y[base + a * inner] * ((double)dy[base + a * inner] - dot));
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                   */
/* ------------------------------------------------------------------------ */

void dlrt_copy_rows(int64_t outer, int64_t len, const float *src, int64_t src_stride,
                    int64_t src_offset, float *dst, int64_t dst_stride, int64_t dst_offset) {
    if (len <= 0)
        return;
    for (int64_t r = 0; r < outer; r++)
        memcpy(dst + r * dst_stride + dst_offset, src + r * src_stride + src_offset,
               (size_t)len * sizeof *dst);
}

/* ------------------------------------------------------------------------ */
/* Optimizers                                                               */
/* ------------------------------------------------------------------------ */

/* The optimizers repeat torch.optim's tensor operations one by one, with
 * its scalars rounded to float as ATen rounds them.  ATen's add with alpha
 * (a + alpha * b) is a fused multiply-add in its vector kernels, and its
 * addcmul contracts to one, hence fmaf there: the results then agree with
 * torch in float32 bit for bit (tests/runtime/kernels_torch.test).
 *
 * torch.optim.SGD with dampening 0.  The IR zeroes momentum buffers, and
 * momentum * 0 + g is g exactly: PyTorch's first step, which copies g into
 * the buffer. */
void dlrt_sgd_update(int64_t count, const float *g, float lr, float momentum, bool nesterov,
                     float weight_decay, float *p, float *momentum_buffer) {
    bool use_momentum = momentum_buffer != NULL && momentum != 0.0f;
    for (int64_t i = 0; i < count; i++) {
        float d = g[i];
        if (weight_decay != 0.0f)
            d = fmaf(weight_decay, p[i], d);
        if (use_momentum) {
            /* two roundings, as torch's mul_ then add_: a separate
             * statement, so that no compiler contracts it to an FMA */
            float decayed = momentum_buffer[i] * momentum;
            float buf = decayed + d;
            momentum_buffer[i] = buf;
            d = nesterov ? fmaf(momentum, buf, d) : buf;
        }
        p[i] = fmaf(-lr, d, p[i]);
    }
}

/* torch.optim.Adam (1.13, single-tensor, amsgrad off): the bias
 * corrections and step size in double, as Python computes them, then
 * denom = sqrt(v) / sqrt(bias_correction2) + eps and
 * p += -(lr / bias_correction1) * m / denom per element in float. */
void dlrt_adam_update(int64_t count, const float *g, float lr, int32_t step, float beta1,
                      float beta2, float eps, float weight_decay, float *p, float *exp_avg,
                      float *exp_avg_sq) {
    /* a step below 1 would divide by zero; the IR counts from 1 */
    double t = step < 1 ? 1.0 : (double)step;
    double bias_correction1 = 1.0 - pow((double)beta1, t);
    double bias_correction2 = 1.0 - pow((double)beta2, t);
    float step_size = (float)((double)lr / bias_correction1);
    float bc2_sqrt = (float)sqrt(bias_correction2);
    float one_minus_b1 = (float)(1.0 - (double)beta1);
    float one_minus_b2 = (float)(1.0 - (double)beta2);
    for (int64_t i = 0; i < count; i++) {
        float d = g[i];
        if (weight_decay != 0.0f)
            d = fmaf(weight_decay, p[i], d);
        float m = fmaf(one_minus_b1, d, exp_avg[i] * beta1);
        float v = fmaf(one_minus_b2 * d, d, exp_avg_sq[i] * beta2);
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        float denom = sqrtf(v) / bc2_sqrt + eps;
        p[i] = p[i] + -step_size * m / denom;
    }
}
