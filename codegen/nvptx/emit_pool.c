/* emit_pool.c — the GPU kernels of pooling: maxpool (of f32, and of int8
 * for int8 inference), avgpool and globalavgpool, and their gradients maxpool_grad (from the input, whose
 * window maxima it finds again: autodiff keeps no argmax for the GPU),
 * avgpool_grad and globalavgpool_grad.
 *
 * Each is one map.  The gradients take a thread per input element, which
 * sums over the windows that hold it: no two threads write one element,
 * so there are no atomics and the sums do not depend on timing. */
#include <math.h>

#include "emit.h"

/* A pooling's geometry. */
typedef struct Pool {
    int64_t c, h, w, oh, ow; /* channels, the input's and the output's planes */
    int64_t kh, kw, sh, sw, ph, pw; /* the window, its stride and the padding */
    bool include_pad;        /* avgpool's count_include_pad */
} Pool;

static Pool pool_of(const DlcOp *op, const DlcType *x, const DlcType *y) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE), *p = dlc_attr_pair(op, DLC_A_PAD);
    return (Pool){x->dims[0], x->dims[1], x->dims[2], y->dims[1], y->dims[2], k[0], k[1],
                  s[0], s[1], p[0], p[1], dlc_attr_true(op->kind, op->attrs, DLC_A_COUNT_INCLUDE_PAD)};
}

/* The clipped window of output (oy, ox): rows [y0, y1), columns [x0, x1). */
static void window(Kb *kb, const Pool *p, LLVMValueRef oy, LLVMValueRef ox, LLVMValueRef *y0,
                   LLVMValueRef *y1, LLVMValueRef *x0, LLVMValueRef *x1, LLVMValueRef *ys,
                   LLVMValueRef *xs) {
    *ys = kb_sub(kb, kb_muli(kb, oy, p->sh), kb_int(kb, p->ph));
    *xs = kb_sub(kb, kb_muli(kb, ox, p->sw), kb_int(kb, p->pw));
    *y0 = kb_max(kb, *ys, kb_int(kb, 0));
    *x0 = kb_max(kb, *xs, kb_int(kb, 0));
    *y1 = kb_min(kb, kb_addi(kb, *ys, p->kh), kb_int(kb, p->h));
    *x1 = kb_min(kb, kb_addi(kb, *xs, p->kw), kb_int(kb, p->w));
}

/* The window's argmax in the plane (first maximum, or the last NaN), -1 if empty. */
static LLVMValueRef window_argmax(Kb *kb, const Pool *p, LLVMValueRef plane_x, LLVMValueRef oy,
                                  LLVMValueRef ox) {
    LLVMValueRef y0, y1, x0, x1, ys, xs;
    window(kb, p, oy, ox, &y0, &y1, &x0, &x1, &ys, &xs);
    LLVMValueRef best = kb_var(kb, kb->i32, kb_int(kb, -1));
    LLVMValueRef max = kb_var(kb, kb->f32, kb_float(kb, -INFINITY));
    LLVMValueRef iy = kb_for(kb, y0, y1, kb_int(kb, 1));
    LLVMValueRef ix = kb_for(kb, x0, x1, kb_int(kb, 1));
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_get(kb, iy), p->w), kb_get(kb, ix));
    LLVMValueRef v = kb_load(kb, plane_x, at);
    LLVMValueRef first = kb_lt(kb, kb_get(kb, best), kb_int(kb, 0));
    kb_if(kb, kb_or(kb, first, kb_or(kb, kb_fgt(kb, v, kb_get(kb, max)), kb_isnan(kb, v))));
    kb_set(kb, max, v);
    kb_set(kb, best, at);
    kb_endif(kb);
    kb_endfor(kb);
    kb_endfor(kb);
    return kb_get(kb, best);
}

static LLVMValueRef avg_divisor(Kb *kb, const Pool *p, LLVMValueRef oy, LLVMValueRef ox) {
    LLVMValueRef y0, y1, x0, x1, ys, xs;
    window(kb, p, oy, ox, &y0, &y1, &x0, &x1, &ys, &xs);
    LLVMValueRef empty = kb_or(kb, kb_le(kb, y1, y0), kb_le(kb, x1, x0));
    LLVMValueRef div;
    if (!p->include_pad)
        div = kb_mul(kb, kb_sub(kb, y1, y0), kb_sub(kb, x1, x0));
    else {
        LLVMValueRef ye = kb_min(kb, kb_addi(kb, ys, p->kh), kb_int(kb, p->h + p->ph));
        LLVMValueRef xe = kb_min(kb, kb_addi(kb, xs, p->kw), kb_int(kb, p->w + p->pw));
        div = kb_mul(kb, kb_sub(kb, ye, ys), kb_sub(kb, xe, xs));
    }
    return kb_select(kb, empty, kb_int(kb, 0), div);
}

/* One thread per output element: the max (max) or mean of its window. */
static void pool_forward(NvKernels *nk, const DlcOp *op, const char *tag, bool max) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    Pool p = pool_of(op, &op->in[0]->type, &op->out[0]->type);
    LLVMValueRef i = nv_begin_map(&b, nv_numel(op->out[0]), 0);
    LLVMValueRef plane = kb_divi(kb, i, p.oh * p.ow), r = kb_remi(kb, i, p.oh * p.ow);
    LLVMValueRef oy = kb_divi(kb, r, p.ow), ox = kb_remi(kb, r, p.ow);
    LLVMValueRef xp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, plane, p.h * p.w)}, 1, "");
    if (max) {
        LLVMValueRef at = window_argmax(kb, &p, xp, oy, ox);
        LLVMValueRef ok = kb_le(kb, kb_int(kb, 0), at);
        LLVMValueRef v = kb_load_if(kb, ok, xp, kb_max(kb, at, kb_int(kb, 0)));
        kb_store(kb, b.p[1], i, kb_select(kb, ok, v, kb_float(kb, -INFINITY)));
    } else {
        LLVMValueRef y0, y1, x0, x1, ys, xs;
        window(kb, &p, oy, ox, &y0, &y1, &x0, &x1, &ys, &xs);
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef iy = kb_for(kb, y0, y1, kb_int(kb, 1));
        LLVMValueRef ix = kb_for(kb, x0, x1, kb_int(kb, 1));
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum),
                                kb_load(kb, xp, kb_add(kb, kb_muli(kb, kb_get(kb, iy), p.w), kb_get(kb, ix)))));
        kb_endfor(kb);
        kb_endfor(kb);
        LLVMValueRef div = avg_divisor(kb, &p, oy, ox);
        LLVMValueRef zero = kb_eq(kb, div, kb_int(kb, 0));
        kb_store(kb, b.p[1], i, kb_select(kb, zero, kb_float(kb, 0),
                                          kb_fdiv(kb, kb_get(kb, sum), kb_itof(kb, kb_max(kb, div, kb_int(kb, 1))))));
    }
    nv_end_map(&b);
}

/* ceil(v / stride) for v > 0, else 0: the first window reaching v */
static LLVMValueRef first_window(Kb *kb, LLVMValueRef v, int64_t stride) {
    LLVMValueRef up = kb_divi(kb, kb_addi(kb, v, stride - 1), stride);
    return kb_select(kb, kb_lt(kb, kb_int(kb, 0), v), up, kb_int(kb, 0));
}

/* One thread per input element: the sum over the windows that hold it,
 * of max pooling's (dy, x) where the element is the window's maximum
 * (max), else of average pooling's (dy). */
static void pool_backward(NvKernels *nk, const DlcOp *op, const char *tag, bool max) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    if (!max)
        slots[1] = NV_RESULT;
    nv_start(&b, nk, op, tag, "", slots, max ? 3 : 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *dx = op->out[0], *dy = op->in[0];
    Pool p = pool_of(op, &dx->type, &dy->type);
    LLVMValueRef i = nv_begin_map(&b, nv_numel(dx), 0);
    LLVMValueRef plane = kb_divi(kb, i, p.h * p.w), r = kb_remi(kb, i, p.h * p.w);
    LLVMValueRef iy = kb_divi(kb, r, p.w), ix = kb_remi(kb, r, p.w);
    LLVMValueRef xp = max ? LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[1], (LLVMValueRef[]){kb_muli(kb, plane, p.h * p.w)}, 1, "") : NULL;
    LLVMValueRef dyp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, plane, p.oh * p.ow)}, 1, "");
    /* the outputs whose windows hold (iy, ix): oy sh <= iy + ph < oy sh + kh */
    LLVMValueRef ty = kb_addi(kb, iy, p.ph), tx = kb_addi(kb, ix, p.pw);
    LLVMValueRef oy0 = first_window(kb, kb_addi(kb, ty, 1 - p.kh), p.sh);
    LLVMValueRef ox0 = first_window(kb, kb_addi(kb, tx, 1 - p.kw), p.sw);
    LLVMValueRef oy1 = kb_min(kb, kb_addi(kb, kb_divi(kb, ty, p.sh), 1), kb_int(kb, p.oh));
    LLVMValueRef ox1 = kb_min(kb, kb_addi(kb, kb_divi(kb, tx, p.sw), 1), kb_int(kb, p.ow));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef oy = kb_for(kb, oy0, oy1, kb_int(kb, 1));
    LLVMValueRef ox = kb_for(kb, ox0, ox1, kb_int(kb, 1));
    LLVMValueRef y = kb_get(kb, oy), x = kb_get(kb, ox);
    LLVMValueRef g = kb_load(kb, dyp, kb_add(kb, kb_muli(kb, y, p.ow), x));
    if (max) {
        kb_if(kb, kb_eq(kb, window_argmax(kb, &p, xp, y, x), r));
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), g));
        kb_endif(kb);
    } else {
        /* this input lies in the window if the window (clipped) holds it */
        LLVMValueRef y0, y1, x0, x1, ys, xs;
        window(kb, &p, y, x, &y0, &y1, &x0, &x1, &ys, &xs);
        LLVMValueRef inside = kb_and(kb, kb_and(kb, kb_le(kb, y0, iy), kb_lt(kb, iy, y1)),
                                     kb_and(kb, kb_le(kb, x0, ix), kb_lt(kb, ix, x1)));
        LLVMValueRef div = avg_divisor(kb, &p, y, x);
        kb_if(kb, kb_and(kb, inside, kb_lt(kb, kb_int(kb, 0), div)));
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_fdiv(kb, g, kb_itof(kb, div))));
        kb_endif(kb);
    }
    kb_endfor(kb);
    kb_endfor(kb);
    LLVMValueRef v = kb_get(kb, sum);
    if (max && dlc_attr_true(op->kind, op->attrs, DLC_A_RELU_GRAD)) /* relu_grad(dx, x) fused: zero where x <= 0 */
        v = kb_select(kb, kb_fgt(kb, kb_load(kb, xp, r), kb_float(kb, 0)), v, kb_float(kb, 0));
    kb_store(kb, b.p[max ? 2 : 1], i, v);
    nv_end_map(&b);
}

/* The forward (fwd) a thread per channel's mean, the gradient a thread
 * per input element. */
static void globalavgpool(NvKernels *nk, const DlcOp *op, const char *tag, bool fwd) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *big = fwd ? op->in[0] : op->out[0];
    int64_t c = big->type.dims[0], hw = nv_numel(big) / c;
    if (fwd) {
        LLVMValueRef i = nv_begin_map(&b, c, 0);
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef k = kb_for(kb, kb_int(kb, 0), kb_int(kb, hw), kb_int(kb, 1));
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_load(kb, b.p[0], kb_add(kb, kb_muli(kb, i, hw), kb_get(kb, k)))));
        kb_endfor(kb);
        kb_store(kb, b.p[1], i, kb_fdiv(kb, kb_get(kb, sum), kb_float(kb, (double)hw)));
    } else {
        LLVMValueRef i = nv_begin_map(&b, c * hw, 0);
        kb_store(kb, b.p[1], i, kb_fdiv(kb, kb_load(kb, b.p[0], kb_divi(kb, i, hw)), kb_float(kb, (double)hw)));
    }
    nv_end_map(&b);
}

/* int8 max pooling (int8 inference keeps its operand's scale): the
 * largest byte of the clipped window, -128 for an empty one, as
 * dlrt_maxpool_s8. */
static void maxpool_s8(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMTypeRef i8 = LLVMInt8TypeInContext(kb->c);
    Pool p = pool_of(op, &op->in[0]->type, &op->out[0]->type);
    LLVMValueRef i = nv_begin_map(&b, nv_numel(op->out[0]), 0);
    LLVMValueRef plane = kb_divi(kb, i, p.oh * p.ow), r = kb_remi(kb, i, p.oh * p.ow);
    LLVMValueRef oy = kb_divi(kb, r, p.ow), ox = kb_remi(kb, r, p.ow);
    LLVMValueRef base = kb_muli(kb, plane, p.h * p.w);
    LLVMValueRef y0, y1, x0, x1, ys, xs;
    window(kb, &p, oy, ox, &y0, &y1, &x0, &x1, &ys, &xs);
    LLVMValueRef max = kb_var(kb, kb->i32, kb_int(kb, -128));
    LLVMValueRef iy = kb_for(kb, y0, y1, kb_int(kb, 1));
    LLVMValueRef ix = kb_for(kb, x0, x1, kb_int(kb, 1));
    LLVMValueRef at = kb_add(kb, base, kb_add(kb, kb_muli(kb, kb_get(kb, iy), p.w), kb_get(kb, ix)));
    LLVMValueRef v = LLVMBuildLoad2(kb->b, i8, LLVMBuildInBoundsGEP2(kb->b, i8, b.p[0], &at, 1, ""), "");
    kb_set(kb, max, kb_max(kb, kb_get(kb, max), LLVMBuildSExt(kb->b, v, kb->i32, "")));
    kb_endfor(kb);
    kb_endfor(kb);
    LLVMValueRef out = LLVMBuildInBoundsGEP2(kb->b, i8, b.p[1], &i, 1, "");
    LLVMBuildStore(kb->b, LLVMBuildTrunc(kb->b, kb_get(kb, max), i8, ""), out);
    nv_end_map(&b);
}

void nv_emit_maxpool(NvKernels *nk, const DlcOp *op, const char *tag) {
    if (op->in[0]->type.dtype == DLC_I8)
        maxpool_s8(nk, op, tag);
    else
        pool_forward(nk, op, tag, true);
}

void nv_emit_avgpool(NvKernels *nk, const DlcOp *op, const char *tag) {
    pool_forward(nk, op, tag, false);
}

void nv_emit_maxpool_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    pool_backward(nk, op, tag, true);
}

void nv_emit_avgpool_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    pool_backward(nk, op, tag, false);
}

void nv_emit_globalavgpool(NvKernels *nk, const DlcOp *op, const char *tag) {
    globalavgpool(nk, op, tag, true);
}

void nv_emit_globalavgpool_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    globalavgpool(nk, op, tag, false);
}
