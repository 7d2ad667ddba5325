/* kernels.c — the GPU kernels of each op, built with kb.h, and the launches
 * that run them.
 *
 * Three shapes of kernel cover every op:
 *   - a map: one thread per output element (activations, their gradients,
 *     optimizer updates, pooling and its gradient, LRN, copies);
 *   - a row reduction: one block of ROW_THREADS threads per row (losses)
 *     or per part of a channel (bias gradients, batch-norm statistics and
 *     gradients: Parts), summing through shared memory in a fixed order,
 *     the parts then added in order by a small kernel, so that results do
 *     not depend on timing: no atomics anywhere;
 *   - a tiled matrix product (gemm_kernel): the dense layers and, as an
 *     implicit GEMM that gathers its operands straight from the tensors,
 *     the convolutions and their two gradients.  Tiles of 64x64 outputs go
 *     through shared memory 16 steps of the sum at a time, the next 16
 *     loaded while the current ones are multiplied: by 256 threads keeping
 *     a 4x4 block of outputs each (FMA), or by 8 warps of TF32 mma's on
 *     the tensor cores (--gpu-math=tf32).  A product with few tiles and a
 *     long sum (weight gradients) splits the sum across blocks into
 *     scratch memory and adds the parts in a second kernel, in order.
 *
 * Semantics follow the CPU kernels (runtime/kernels.inc) op for op; exp and
 * log use the GPU's approximate units (a few ulp), sums run in f32. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nvptx.h"

#define MAP_THREADS 256
#define ROW_THREADS 256
#define TILE 64        /* outputs per tile side */
#define TILE_K 16      /* steps of the sum per shared-memory tile */
#define GEMM_THREADS 256
#define GEMM_LOADS (TILE * TILE_K / GEMM_THREADS) /* of each operand, per thread and tile */

/* ---- a kernel being built and its launch ------------------------------------ */

typedef struct Build {
    NvKernels *nk;
    Kb *kb;
    const DlcOp *op;
    NvLaunch *l;
    LLVMValueRef p[NV_MAX_PTRS]; /* the pointer parameters, in launch order */
    LLVMValueRef n;              /* the batch, i32 */
    LLVMValueRef sc[4];          /* the scalar parameters */
} Build;

static int64_t numel(const DlcValue *v) { return dlc_type_numel(&v->type); }
static int64_t per_n(const DlcValue *v) { return v->type.batched ? numel(v) : 0; }
static int64_t fixed(const DlcValue *v) { return v->type.batched ? 0 : numel(v); }

static int64_t attr_i(const DlcOp *op, const char *name) {
    return op->attrs[dlc_op_attr_index(op->kind, name)].i;
}
static double attr_f(const DlcOp *op, const char *name) {
    return op->attrs[dlc_op_attr_index(op->kind, name)].f;
}
static bool attr_b(const DlcOp *op, const char *name) {
    return dlc_attr_true(op->kind, op->attrs, name);
}
static const int64_t *attr_pair(const DlcOp *op, const char *name) {
    return op->attrs[dlc_op_attr_index(op->kind, name)].pair;
}

static LLVMTypeRef scalar_type(Build *b, int sc) {
    if (sc == NV_SC_N)
        return b->kb->i32;
    if (sc == NV_SC_SEED)
        return b->kb->i64;
    return b->op->in[sc - NV_SCALAR]->type.dtype == DLC_I32 ? b->kb->i32 : b->kb->f32;
}

/* Starts a kernel named TAG_suffix with the given pointer slots and scalar
 * slots (the batch is always the first scalar), and its launch. */
static void start(Build *b, NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                  const int *ptrs, int nptrs, const int *scalars, int nscalars, int block) {
    *b = (Build){.nk = nk, .kb = &nk->kb, .op = op};
    NvLaunch l = {.op = op, .nptrs = nptrs, .block = block, .gy = 1, .gz = 1, .gx_div = 1};
    l.kernel = dlc_arena_printf(nk->arena, "%s%s%s", tag, suffix[0] ? "_" : "", suffix);
    memcpy(l.ptrs, ptrs, sizeof *ptrs * (size_t)nptrs);
    l.scalars[l.nscalars++] = NV_SC_N;
    for (int i = 0; i < nscalars; i++)
        l.scalars[l.nscalars++] = scalars[i];
    DLC_PUSH(nk->arena, nk->launches, nk->nlaunches, nk->caplaunches, l);
    b->l = &nk->launches[nk->nlaunches - 1];
    LLVMTypeRef types[4];
    for (int i = 0; i < b->l->nscalars; i++)
        types[i] = scalar_type(b, b->l->scalars[i]);
    kb_begin(b->kb, b->l->kernel, nptrs, b->l->nscalars, types, block);
    for (int i = 0; i < nptrs; i++)
        b->p[i] = kb_param(b->kb, i);
    for (int i = 0; i < b->l->nscalars; i++)
        b->sc[i] = kb_param(b->kb, nptrs + i);
    b->n = b->sc[0];
}

/* per_n * n + fixed, in the kernel */
static LLVMValueRef count(Build *b, int64_t pn, int64_t fx) {
    return kb_add(b->kb, kb_muli(b->kb, b->n, pn), kb_int(b->kb, fx));
}

/* A map over per_n * n + fixed items: returns the item's index, inside an
 * if that end_map closes. */
static LLVMValueRef begin_map(Build *b, int64_t pn, int64_t fx) {
    Kb *kb = b->kb;
    b->l->gx_per_n = pn;
    b->l->gx_fixed = fx;
    b->l->gx_div = MAP_THREADS;
    LLVMValueRef i = kb_add(kb, kb_mul(kb, kb_ctaid(kb, 'x'), kb_int(kb, MAP_THREADS)), kb_tid(kb));
    kb_if(kb, kb_lt(kb, i, count(b, pn, fx)));
    return i;
}

static void end_map(Build *b) {
    kb_endif(b->kb);
    kb_end(b->kb);
}

/* A row reduction over per_n * n + fixed rows (one block each): returns the row. */
static LLVMValueRef begin_rows(Build *b, int64_t pn, int64_t fx) {
    b->l->gx_per_n = pn;
    b->l->gx_fixed = fx;
    b->l->gx_div = 1;
    return kb_ctaid(b->kb, 'x');
}

static LLVMValueRef load_i32(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(kb->b, kb->i32, p, &i, 1, "");
    return LLVMBuildLoad2(kb->b, kb->i32, at, "");
}

static LLVMValueRef relu_if(Kb *kb, bool relu, LLVMValueRef v) {
    return relu ? kb_select(kb, kb_flt(kb, v, kb_float(kb, 0)), kb_float(kb, 0), v) : v;
}

/* The tensor operands then the results, as pointer slots. */
static int tensor_slots(const DlcOp *op, int *slots) {
    int k = 0;
    for (int i = 0; i < op->nin; i++)
        if (op->in[i]->type.rank > 0 || op->in[i]->kind != DLC_VAL_INPUT)
            slots[k++] = i;
    for (int r = 0; r < op->nout; r++)
        slots[k++] = NV_RESULT + r;
    return k;
}

/* ---- elementwise ops ---------------------------------------------------------- */

static void elementwise(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = tensor_slots(op, slots);
    start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    LLVMValueRef i = begin_map(&b, per_n(y), fixed(y));
    LLVMValueRef a = kb_load(kb, b.p[0], i), zero = kb_float(kb, 0), one = kb_float(kb, 1);
    LLVMValueRef a1 = op->nin > 1 ? kb_load(kb, b.p[1], i) : NULL, v = NULL;
    switch (op->kind) {
    case DLC_OP_RELU: v = kb_select(kb, kb_flt(kb, a, zero), zero, a); break;
    case DLC_OP_SIGMOID: v = kb_fdiv(kb, one, kb_fadd(kb, one, kb_exp(kb, kb_fneg(kb, a)))); break;
    case DLC_OP_TANH: {
        /* sign(a) (1 - e) / (1 + e) with e = exp(-2|a|): no overflow */
        LLVMValueRef neg = kb_flt(kb, a, zero), abs = kb_select(kb, neg, kb_fneg(kb, a), a);
        LLVMValueRef e = kb_exp(kb, kb_fmul(kb, abs, kb_float(kb, -2)));
        LLVMValueRef t = kb_fdiv(kb, kb_fsub(kb, one, e), kb_fadd(kb, one, e));
        v = kb_select(kb, neg, kb_fneg(kb, t), t);
        break;
    }
    case DLC_OP_LEAKY_RELU:
        v = kb_select(kb, kb_fgt(kb, a, zero), a, kb_fmul(kb, kb_float(kb, attr_f(op, "slope")), a));
        break;
    case DLC_OP_ADD:
        /* the terms in their order, (a + b) + c, as the adds apart */
        v = kb_fadd(kb, a, a1);
        for (int t = 2; t < ns - 1; t++)
            v = kb_fadd(kb, v, kb_load(kb, b.p[t], i));
        v = relu_if(kb, dlc_op_fused_relu(op), v);
        break;
    case DLC_OP_RELU_GRAD: v = kb_select(kb, kb_fgt(kb, a1, zero), a, zero); break;
    case DLC_OP_SIGMOID_GRAD: v = kb_fmul(kb, kb_fmul(kb, a, kb_fsub(kb, one, a1)), a1); break;
    case DLC_OP_TANH_GRAD: v = kb_fmul(kb, a, kb_fsub(kb, one, kb_fmul(kb, a1, a1))); break;
    case DLC_OP_LEAKY_RELU_GRAD:
        v = kb_select(kb, kb_fgt(kb, a1, zero), a, kb_fmul(kb, kb_float(kb, attr_f(op, "slope")), a));
        break;
    case DLC_OP_DROPOUT_GRAD: v = kb_fmul(kb, a, a1); break;
    default: v = a; break; /* copies: dropout at inference, flatten, reshape */
    }
    kb_store(kb, b.p[ns - 1], i, v);
    end_map(&b);
}

/* splitmix64 of seed + (i + 1) * golden: the counter-based generator of
 * runtime/rng.c (dlrt_rng_uniform_at), the same mask on both devices. */
static void dropout_train(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, NV_RESULT, NV_RESULT + 1}, sc[1] = {NV_SC_SEED};
    start(&b, nk, op, tag, "", slots, 3, sc, 1, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    LLVMValueRef i = begin_map(&b, numel(op->in[0]), 0);
    LLVMValueRef z = LLVMBuildAdd(B, b.sc[1],
        LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildZExt(B, i, kb->i64, ""), LLVMConstInt(kb->i64, 1, 0), ""),
                     LLVMConstInt(kb->i64, 0x9E3779B97F4A7C15ull, 0), ""), "");
    z = LLVMBuildMul(B, LLVMBuildXor(B, z, LLVMBuildLShr(B, z, LLVMConstInt(kb->i64, 30, 0), ""), ""),
                     LLVMConstInt(kb->i64, 0xBF58476D1CE4E5B9ull, 0), "");
    z = LLVMBuildMul(B, LLVMBuildXor(B, z, LLVMBuildLShr(B, z, LLVMConstInt(kb->i64, 27, 0), ""), ""),
                     LLVMConstInt(kb->i64, 0x94D049BB133111EBull, 0), "");
    z = LLVMBuildXor(B, z, LLVMBuildLShr(B, z, LLVMConstInt(kb->i64, 31, 0), ""), "");
    LLVMValueRef bits = LLVMBuildTrunc(B, LLVMBuildLShr(B, z, LLVMConstInt(kb->i64, 40, 0), ""), kb->i32, "");
    LLVMValueRef u = kb_fmul(kb, LLVMBuildUIToFP(B, bits, kb->f32, ""), kb_float(kb, 1.0 / 16777216.0));
    double p = (float)attr_f(op, "p"); /* as the CPU code's literal rounds it */
    LLVMValueRef mask = kb_select(kb, kb_flt(kb, u, kb_float(kb, (float)p)), kb_float(kb, 0),
                                  kb_float(kb, (float)(1.0 / (1.0 - p))));
    kb_store(kb, b.p[2], i, mask);
    kb_store(kb, b.p[1], i, kb_fmul(kb, kb_load(kb, b.p[0], i), mask));
    end_map(&b);
}

/* torch.optim.SGD and Adam, as dlrt_sgd_update and dlrt_adam_update. */
static void update(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = tensor_slots(op, slots);
    bool adam = op->kind == DLC_OP_ADAM_UPDATE;
    int sc[2] = {NV_SCALAR + 1, NV_SCALAR + 2};
    start(&b, nk, op, tag, "", slots, ns, sc, adam ? 2 : 1, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMValueRef i = begin_map(&b, 0, numel(op->in[0]));
    LLVMValueRef lr = b.sc[1], g = kb_load(kb, b.p[0], i), p = kb_load(kb, b.p[1], i);
    double wd = attr_f(op, "weight_decay");
    LLVMValueRef d = wd != 0 ? kb_fma(kb, kb_float(kb, (float)wd), p, g) : g;
    if (!adam) {
        double momentum = attr_f(op, "momentum");
        if (op->nparams == 2 && momentum != 0) {
            LLVMValueRef buf = kb_fadd(kb, kb_fmul(kb, kb_load(kb, b.p[2], i), kb_float(kb, (float)momentum)), d);
            kb_store(kb, b.p[2], i, buf);
            d = attr_b(op, "nesterov") ? kb_fma(kb, kb_float(kb, (float)momentum), buf, d) : buf;
        }
        kb_store(kb, b.p[1], i, kb_fma(kb, kb_fneg(kb, lr), d, p));
    } else {
        /* the bias corrections from the step, in f32 here (f64 on the CPU) */
        double beta1 = attr_f(op, "beta1"), beta2 = attr_f(op, "beta2"), eps = attr_f(op, "eps");
        LLVMValueRef t = kb_itof(kb, kb_max(kb, b.sc[2], kb_int(kb, 1)));
        LLVMValueRef bc1 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta1)))));
        LLVMValueRef bc2 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta2)))));
        LLVMValueRef step_size = kb_fdiv(kb, lr, bc1), bc2_sqrt = kb_sqrt(kb, bc2);
        LLVMValueRef m = kb_fma(kb, kb_float(kb, (float)(1 - beta1)), d,
                                kb_fmul(kb, kb_load(kb, b.p[2], i), kb_float(kb, (float)beta1)));
        LLVMValueRef v = kb_fma(kb, kb_fmul(kb, kb_float(kb, (float)(1 - beta2)), d), d,
                                kb_fmul(kb, kb_load(kb, b.p[3], i), kb_float(kb, (float)beta2)));
        kb_store(kb, b.p[2], i, m);
        kb_store(kb, b.p[3], i, v);
        LLVMValueRef denom = kb_fadd(kb, kb_fdiv(kb, kb_sqrt(kb, v), bc2_sqrt), kb_float(kb, (float)eps));
        kb_store(kb, b.p[1], i, kb_fadd(kb, p, kb_fdiv(kb, kb_fmul(kb, kb_fneg(kb, step_size), m), denom)));
    }
    end_map(&b);
}

/* ---- layout ------------------------------------------------------------------- */

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

static void around_axis(const DlcType *t, int axis, int64_t *before, int64_t *after) {
    *before = *after = 1;
    for (int i = 0; i < t->rank; i++) {
        if (i < axis)
            *before *= t->dims[i];
        if (i > axis)
            *after *= t->dims[i];
    }
}

/* rows of `len` floats from src (rows `src_row` apart, starting at
 * src_off) to dst (rows dst_row apart, from dst_off): concat and slice */
static void copy_rows(NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                      int src, int64_t rows, int64_t len, int64_t src_row, int64_t src_off,
                      int64_t dst_row, int64_t dst_off) {
    Build b;
    int slots[2] = {src, NV_RESULT};
    start(&b, nk, op, tag, suffix, slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMValueRef i = begin_map(&b, rows * len, 0);
    LLVMValueRef r = kb_divi(kb, i, len), j = kb_remi(kb, i, len);
    kb_store(kb, b.p[1], kb_add(kb, kb_muli(kb, r, dst_row), kb_addi(kb, j, dst_off)),
             kb_load(kb, b.p[0], kb_add(kb, kb_muli(kb, r, src_row), kb_addi(kb, j, src_off))));
    end_map(&b);
}

static void concat(NvKernels *nk, const DlcOp *op, const char *tag) {
    const DlcValue *y = op->out[0];
    int axis = norm_axis(attr_i(op, "axis"), y->type.rank);
    int64_t before, after, offset = 0;
    around_axis(&y->type, axis, &before, &after);
    int64_t row_y = y->type.dims[axis] * after;
    for (int i = 0; i < op->nin; i++) {
        int64_t row = op->in[i]->type.dims[axis] * after;
        char suffix[16];
        snprintf(suffix, sizeof suffix, "part%d", i);
        copy_rows(nk, op, tag, suffix, i, before, row, row, 0, row_y, offset);
        offset += row;
    }
}

static void slice(NvKernels *nk, const DlcOp *op, const char *tag) {
    const DlcValue *x = op->in[0], *y = op->out[0];
    int axis = norm_axis(attr_i(op, "axis"), x->type.rank);
    int64_t before, after;
    around_axis(&x->type, axis, &before, &after);
    int64_t row_x = x->type.dims[axis] * after, row_y = y->type.dims[axis] * after;
    copy_rows(nk, op, tag, "", 0, before, row_y, row_x, attr_i(op, "begin") * after, row_y, 0);
}

/* ---- pooling ------------------------------------------------------------------ */

typedef struct Pool {
    int64_t c, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
    bool include_pad;
} Pool;

static Pool pool_of(const DlcOp *op, const DlcType *x, const DlcType *y) {
    const int64_t *k = attr_pair(op, "kernel"), *s = attr_pair(op, "stride"), *p = attr_pair(op, "pad");
    return (Pool){x->dims[0], x->dims[1], x->dims[2], y->dims[1], y->dims[2], k[0], k[1],
                  s[0], s[1], p[0], p[1], attr_b(op, "count_include_pad")};
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

static void pool_forward(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    Pool p = pool_of(op, &op->in[0]->type, &op->out[0]->type);
    LLVMValueRef i = begin_map(&b, numel(op->out[0]), 0);
    LLVMValueRef plane = kb_divi(kb, i, p.oh * p.ow), r = kb_remi(kb, i, p.oh * p.ow);
    LLVMValueRef oy = kb_divi(kb, r, p.ow), ox = kb_remi(kb, r, p.ow);
    LLVMValueRef xp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, plane, p.h * p.w)}, 1, "");
    if (op->kind == DLC_OP_MAXPOOL) {
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
    end_map(&b);
}

/* ceil(v / stride) for v > 0, else 0: the first window reaching v */
static LLVMValueRef first_window(Kb *kb, LLVMValueRef v, int64_t stride) {
    LLVMValueRef up = kb_divi(kb, kb_addi(kb, v, stride - 1), stride);
    return kb_select(kb, kb_lt(kb, kb_int(kb, 0), v), up, kb_int(kb, 0));
}

/* One thread per input element: the sum over the windows that hold it. */
static void pool_backward(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    bool max = op->kind == DLC_OP_MAXPOOL_GRAD;
    int slots[3] = {0, 1, NV_RESULT};
    if (!max)
        slots[1] = NV_RESULT;
    start(&b, nk, op, tag, "", slots, max ? 3 : 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *dx = op->out[0], *dy = op->in[0];
    Pool p = pool_of(op, &dx->type, &dy->type);
    LLVMValueRef i = begin_map(&b, numel(dx), 0);
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
    if (max && attr_b(op, "relu_grad")) /* relu_grad(dx, x) fused: zero where x <= 0 */
        v = kb_select(kb, kb_fgt(kb, kb_load(kb, xp, r), kb_float(kb, 0)), v, kb_float(kb, 0));
    kb_store(kb, b.p[max ? 2 : 1], i, v);
    end_map(&b);
}

static void globalavgpool(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    bool fwd = op->kind == DLC_OP_GLOBALAVGPOOL;
    const DlcValue *big = fwd ? op->in[0] : op->out[0];
    int64_t c = big->type.dims[0], hw = numel(big) / c;
    if (fwd) {
        LLVMValueRef i = begin_map(&b, c, 0);
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef k = kb_for(kb, kb_int(kb, 0), kb_int(kb, hw), kb_int(kb, 1));
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_load(kb, b.p[0], kb_add(kb, kb_muli(kb, i, hw), kb_get(kb, k)))));
        kb_endfor(kb);
        kb_store(kb, b.p[1], i, kb_fdiv(kb, kb_get(kb, sum), kb_float(kb, (double)hw)));
    } else {
        LLVMValueRef i = begin_map(&b, c * hw, 0);
        kb_store(kb, b.p[1], i, kb_fdiv(kb, kb_load(kb, b.p[0], kb_divi(kb, i, hw)), kb_float(kb, (double)hw)));
    }
    end_map(&b);
}

/* ---- normalization ------------------------------------------------------------ */

/* s_c = k + alpha/size * the sum of x_j^2 over c's window, at x (channel 0) */
static LLVMValueRef lrn_scale(Kb *kb, const DlcOp *op, LLVMValueRef x, LLVMValueRef c, int64_t channels,
                              int64_t hw) {
    int64_t size = attr_i(op, "size");
    LLVMValueRef lo = kb_max(kb, kb_sub(kb, c, kb_int(kb, size / 2)), kb_int(kb, 0));
    LLVMValueRef hi = kb_min(kb, kb_addi(kb, c, (size - 1) / 2 + 1), kb_int(kb, channels));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef j = kb_for(kb, lo, hi, kb_int(kb, 1));
    LLVMValueRef v = kb_load(kb, x, kb_muli(kb, kb_get(kb, j), hw));
    kb_set(kb, sum, kb_fma(kb, v, v, kb_get(kb, sum)));
    kb_endfor(kb);
    return kb_fma(kb, kb_float(kb, attr_f(op, "alpha") / (double)size), kb_get(kb, sum),
                  kb_float(kb, attr_f(op, "k")));
}

static void lrn(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    bool fwd = op->kind == DLC_OP_LRN;
    int slots[4] = {0, 1, 2, NV_RESULT};
    if (fwd)
        slots[1] = NV_RESULT;
    start(&b, nk, op, tag, "", slots, fwd ? 2 : 4, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    int64_t channels = y->type.dims[0], hw = numel(y) / channels, size = attr_i(op, "size");
    double beta = attr_f(op, "beta");
    LLVMValueRef i = begin_map(&b, numel(y), 0);
    LLVMValueRef sample = kb_divi(kb, i, channels * hw), r = kb_remi(kb, i, channels * hw);
    LLVMValueRef c = kb_divi(kb, r, hw), pixel = kb_add(kb, kb_muli(kb, sample, channels * hw), kb_remi(kb, r, hw));
    LLVMValueRef xp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[fwd ? 0 : 1], &pixel, 1, "");
    LLVMValueRef s = lrn_scale(kb, op, xp, c, channels, hw);
    if (fwd) {
        kb_store(kb, b.p[1], i, kb_fmul(kb, kb_load(kb, b.p[0], i), kb_pow(kb, s, -beta)));
    } else {
        LLVMValueRef dyp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], &pixel, 1, "");
        LLVMValueRef yp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[2], &pixel, 1, "");
        LLVMValueRef lo = kb_max(kb, kb_sub(kb, c, kb_int(kb, (size - 1) / 2)), kb_int(kb, 0));
        LLVMValueRef hi = kb_min(kb, kb_addi(kb, c, size / 2 + 1), kb_int(kb, channels));
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef j = kb_for(kb, lo, hi, kb_int(kb, 1));
        LLVMValueRef at = kb_muli(kb, kb_get(kb, j), hw);
        LLVMValueRef sj = lrn_scale(kb, op, xp, kb_get(kb, j), channels, hw);
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum),
                                kb_fdiv(kb, kb_fmul(kb, kb_load(kb, dyp, at), kb_load(kb, yp, at)), sj)));
        kb_endfor(kb);
        double coef = 2.0 * attr_f(op, "alpha") * beta / (double)size;
        LLVMValueRef dx = kb_fsub(kb, kb_fmul(kb, kb_load(kb, b.p[0], i), kb_pow(kb, s, -beta)),
                                  kb_fmul(kb, kb_fmul(kb, kb_float(kb, coef), kb_load(kb, b.p[1], i)),
                                          kb_get(kb, sum)));
        kb_store(kb, b.p[3], i, dx);
    }
    end_map(&b);
}

/* softmax and its gradient: one thread per (outer, inner) row of the axis */
static void softmax(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    bool fwd = op->kind == DLC_OP_SOFTMAX;
    int slots[3] = {0, 1, NV_RESULT};
    if (fwd)
        slots[1] = NV_RESULT;
    start(&b, nk, op, tag, "", slots, fwd ? 2 : 3, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *x = op->in[0];
    int axis_i = norm_axis(attr_i(op, "axis"), x->type.rank);
    int64_t before, after, axis = x->type.dims[axis_i];
    around_axis(&x->type, axis_i, &before, &after);
    LLVMValueRef i = begin_map(&b, before * after, 0);
    LLVMValueRef base = kb_add(kb, kb_muli(kb, kb_divi(kb, i, after), axis * after), kb_remi(kb, i, after));
    LLVMValueRef zero = kb_int(kb, 0), end = kb_int(kb, axis), one = kb_int(kb, 1);
#define AT(a) kb_add(kb, base, kb_muli(kb, (a), after))
    if (fwd) {
        LLVMValueRef max = kb_var(kb, kb->f32, kb_float(kb, -INFINITY));
        LLVMValueRef a = kb_for(kb, zero, end, one);
        kb_set(kb, max, kb_fmax(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_get(kb, max)));
        kb_endfor(kb);
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        a = kb_for(kb, zero, end, one);
        LLVMValueRef e = kb_exp(kb, kb_fsub(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_get(kb, max)));
        kb_store(kb, b.p[1], AT(kb_get(kb, a)), e);
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), e));
        kb_endfor(kb);
        a = kb_for(kb, zero, end, one);
        kb_store(kb, b.p[1], AT(kb_get(kb, a)), kb_fdiv(kb, kb_load(kb, b.p[1], AT(kb_get(kb, a))), kb_get(kb, sum)));
        kb_endfor(kb);
    } else {
        LLVMValueRef dot = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef a = kb_for(kb, zero, end, one);
        kb_set(kb, dot, kb_fma(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_load(kb, b.p[1], AT(kb_get(kb, a))), kb_get(kb, dot)));
        kb_endfor(kb);
        a = kb_for(kb, zero, end, one);
        LLVMValueRef at = AT(kb_get(kb, a));
        kb_store(kb, b.p[2], at, kb_fmul(kb, kb_load(kb, b.p[1], at), kb_fsub(kb, kb_load(kb, b.p[0], at), kb_get(kb, dot))));
        kb_endfor(kb);
    }
#undef AT
    end_map(&b);
}

/* ---- row reductions ------------------------------------------------------------- */

/* For each row's items i in [0, count), the block's threads take i = tid,
 * tid + ROW_THREADS, ...; at(i) is the element of channel c. */
typedef struct Channel {
    int64_t c, hw;   /* channels, values per channel of a sample */
    LLVMValueRef ch; /* this block's channel */
} Channel;

static LLVMValueRef channel_at(Kb *kb, const Channel *ch, LLVMValueRef i) {
    LLVMValueRef s = kb_divi(kb, i, ch->hw), r = kb_remi(kb, i, ch->hw);
    return kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, ch->c), ch->ch), ch->hw), r);
}

/* A channel's values split among `parts` blocks (grid (channels, parts)):
 * a channel of a large batch is too much work for one block, and a layer
 * has too few channels to fill the GPU.  Block (ch, part) takes the
 * channel's items [lo, hi) (item i is channel_at(i)); each part's result
 * goes to scratch memory, and a small kernel adds the parts in order, so
 * sums do not depend on timing. */
typedef struct Parts {
    Channel ch;
    int64_t parts;
    LLVMValueRef part, lo, hi, cnt; /* cnt: the channel's items, n hw */
} Parts;

/* Parts enough for 4 blocks per multiprocessor, keeping at least 4096
 * items per part at a batch of 32. */
static int64_t channel_parts(const NvKernels *nk, int64_t c, int64_t hw) {
    int64_t parts = 1;
    while (c * parts < 4 * (int64_t)nk->multiprocessors && hw * 32 / (parts * 2) >= 4096 && parts < 64)
        parts *= 2;
    return parts;
}

static void begin_parts(Build *b, Parts *p, int64_t c, int64_t hw) {
    Kb *kb = b->kb;
    p->ch = (Channel){c, hw, begin_rows(b, 0, c)};
    p->parts = channel_parts(b->nk, c, hw);
    b->l->gy = p->parts;
    p->part = kb_ctaid(kb, 'y');
    p->cnt = count(b, hw, 0);
    LLVMValueRef chunk = kb_divi(kb, kb_addi(kb, p->cnt, p->parts - 1), p->parts);
    p->lo = kb_mul(kb, p->part, chunk);
    p->hi = kb_min(kb, p->cnt, kb_add(kb, p->lo, chunk));
}

/* Where value k of this block's part goes in scratch memory, with `width`
 * values per part: parts of a channel side by side, channel after channel
 * (sum_parts reads them back). */
static LLVMValueRef part_at(Kb *kb, const Parts *p, int width, int k) {
    return kb_addi(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, p->ch.ch, p->parts), p->part), width), k);
}

/* for each of this thread's items of the part: returns the loop counter */
static LLVMValueRef parts_for(Kb *kb, const Parts *p) {
    return kb_for(kb, kb_add(kb, p->lo, kb_tid(kb)), p->hi, kb_int(kb, ROW_THREADS));
}

/* The sum of the parts' values k (of `width` per part) of channel ch, in order. */
static LLVMValueRef sum_parts(Kb *kb, LLVMValueRef ws, LLVMValueRef ch, int64_t parts, int width, int k) {
    LLVMValueRef sum = kb_float(kb, 0);
    for (int64_t s = 0; s < parts; s++)
        sum = kb_fadd(kb, sum, kb_load(kb, ws, kb_addi(kb, kb_muli(kb, ch, parts * width), s * width + k)));
    return sum;
}

/* bias_grad, batchnorm_grad_weight: the sum per channel of dy (times xhat),
 * in parts, then the parts' sum */
static void channel_sum(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    bool bn = op->kind == DLC_OP_BATCHNORM_GRAD_WEIGHT;
    const DlcValue *dy = op->in[0];
    int64_t c = op->out[0]->type.dims[0];
    /* (dy, scratch) or (dy, x, mean, invstd, scratch) */
    int slots[5] = {0, 1, 2, 3, NV_WORKSPACE}, ws = bn ? 4 : 1;
    slots[ws] = NV_WORKSPACE;
    start(&b, nk, op, tag, "part", slots, ws + 1, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, numel(dy) / c);
    b.l->workspace = c * p.parts;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef mean = bn ? kb_load(kb, b.p[2], p.ch.ch) : NULL, invstd = bn ? kb_load(kb, b.p[3], p.ch.ch) : NULL;
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    LLVMValueRef at = channel_at(kb, &p.ch, kb_get(kb, i)), g = kb_load(kb, b.p[0], at);
    if (bn)
        g = kb_fmul(kb, g, kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], at), mean), invstd));
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), g));
    kb_endfor(kb);
    LLVMValueRef total = kb_block_sum(kb, scratch, kb_get(kb, sum), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[ws], part_at(kb, &p, 1, 0), total);
    kb_endif(kb);
    kb_end(kb);

    int sum_slots[2] = {NV_RESULT, NV_WORKSPACE};
    start(&b, nk, op, tag, "sum", sum_slots, 2, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = begin_map(&b, 0, c);
    kb_store(kb, b.p[0], ch, sum_parts(kb, b.p[1], ch, p.parts, 1, 0));
    end_map(&b);
}

/* y, a map: batchnorm (inference, from the running statistics), the
 * batchnorm folded into a conv2d (batchnorm=true: a second kernel of the
 * conv's over its own result, in place, after the product, which applies
 * its bias and no ReLU, gemm_of), and from the batch's statistics
 * batchnorm_normalize and batchnorm_train's last kernel. */
static void batchnorm_map(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int k = dlc_op_folded_batchnorm(op);
    bool train = op->kind == DLC_OP_BATCHNORM_TRAIN;
    int slots[6] = {0, 1, 2, 3, 4, NV_RESULT};
    if (k >= 0)
        memcpy(slots, (int[6]){NV_RESULT, k, k + 1, k + 2, k + 3, NV_RESULT}, sizeof slots);
    else if (train) /* batchnorm_normalize's (x, mean, invstd, @w, @b) among its inputs and results */
        memcpy(slots, (int[6]){0, NV_RESULT + 1, NV_RESULT + 2, 1, 2, NV_RESULT}, sizeof slots);
    start(&b, nk, op, tag, k >= 0 ? "batchnorm" : train ? "normalize" : "", slots, 6, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *x = k >= 0 ? op->out[0] : op->in[0];
    int64_t c = x->type.dims[0], hw = numel(x) / c;
    LLVMValueRef i = begin_map(&b, numel(x), 0);
    LLVMValueRef j = kb_remi(kb, kb_divi(kb, i, hw), c), xv = kb_load(kb, b.p[0], i), y;
    if (op->kind != DLC_OP_BATCHNORM_NORMALIZE && !train) { /* (x, @w, @b, @running_mean, @running_var) */
        double eps = attr_f(op, k >= 0 ? "bn_eps" : "eps");
        LLVMValueRef scale = kb_fdiv(kb, kb_load(kb, b.p[1], j),
                                     kb_sqrt(kb, kb_fadd(kb, kb_load(kb, b.p[4], j), kb_float(kb, eps))));
        y = kb_fma(kb, kb_fsub(kb, xv, kb_load(kb, b.p[3], j)), scale, kb_load(kb, b.p[2], j));
    } else { /* (x, mean, invstd, @w, @b) */
        LLVMValueRef scale = kb_fmul(kb, kb_load(kb, b.p[2], j), kb_load(kb, b.p[3], j));
        y = kb_fma(kb, kb_fsub(kb, xv, kb_load(kb, b.p[1], j)), scale, kb_load(kb, b.p[4], j));
    }
    kb_store(kb, b.p[5], i, relu_if(kb, dlc_op_fused_relu(op), y));
    end_map(&b);
}

/* batchnorm_train: each part's count, mean and sum of squared deviations
 * (two passes over the part, the second from the cache); the parts merged
 * in order (Chan, Golub and LeVeque's pairwise update) into the batch's
 * statistics and the running ones; then y, a map. */
static void batchnorm_train(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    const DlcValue *x = op->in[0];
    int64_t c = x->type.dims[0], hw = numel(x) / c;
    int part_slots[2] = {0, NV_WORKSPACE};
    start(&b, nk, op, tag, "part", part_slots, 2, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, hw);
    b.l->workspace = 3 * c * p.parts;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef items = kb_sub(kb, p.hi, p.lo), fitems = kb_itof(kb, kb_max(kb, items, kb_int(kb, 1)));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_load(kb, b.p[0], channel_at(kb, &p.ch, kb_get(kb, i)))));
    kb_endfor(kb);
    LLVMValueRef mean = kb_fdiv(kb, kb_block_sum(kb, scratch, kb_get(kb, sum), ROW_THREADS), fitems);
    LLVMValueRef sq = kb_var(kb, kb->f32, kb_float(kb, 0));
    i = parts_for(kb, &p);
    LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], channel_at(kb, &p.ch, kb_get(kb, i))), mean);
    kb_set(kb, sq, kb_fma(kb, d, d, kb_get(kb, sq)));
    kb_endfor(kb);
    LLVMValueRef m2 = kb_block_sum(kb, scratch, kb_get(kb, sq), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 0), kb_itof(kb, items));
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 1), mean);
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 2), m2);
    kb_endif(kb);
    kb_end(kb);

    /* (@running_mean, @running_var, mean, invstd, scratch) */
    int stat_slots[5] = {3, 4, NV_RESULT + 1, NV_RESULT + 2, NV_WORKSPACE};
    start(&b, nk, op, tag, "stats", stat_slots, 5, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = begin_map(&b, 0, c);
    LLVMValueRef n = kb_float(kb, 0), mu = kb_float(kb, 0), ss = kb_float(kb, 0);
    for (int64_t s = 0; s < p.parts; s++) {
        LLVMValueRef base = kb_addi(kb, kb_muli(kb, ch, 3 * p.parts), 3 * s);
        LLVMValueRef nb = kb_load(kb, b.p[4], base), mb = kb_load(kb, b.p[4], kb_addi(kb, base, 1));
        LLVMValueRef m2b = kb_load(kb, b.p[4], kb_addi(kb, base, 2));
        LLVMValueRef total = kb_fadd(kb, n, nb), delta = kb_fsub(kb, mb, mu);
        LLVMValueRef w = kb_fdiv(kb, nb, kb_fmax(kb, total, kb_float(kb, 1)));
        LLVMValueRef take = kb_fgt(kb, nb, kb_float(kb, 0));
        mu = kb_select(kb, take, kb_fma(kb, delta, w, mu), mu);
        ss = kb_select(kb, take, kb_fadd(kb, kb_fadd(kb, ss, m2b), kb_fmul(kb, kb_fmul(kb, delta, delta), kb_fmul(kb, n, w))), ss);
        n = total;
    }
    LLVMValueRef cnt = count(&b, hw, 0);
    LLVMValueRef var = kb_fdiv(kb, ss, kb_itof(kb, cnt));
    LLVMValueRef invstd = kb_fdiv(kb, kb_float(kb, 1), kb_sqrt(kb, kb_fadd(kb, var, kb_float(kb, attr_f(op, "eps")))));
    double m = attr_f(op, "momentum");
    LLVMValueRef unbiased = kb_select(kb, kb_lt(kb, kb_int(kb, 1), cnt),
                                      kb_fdiv(kb, ss, kb_itof(kb, kb_addi(kb, cnt, -1))), var);
    kb_store(kb, b.p[2], ch, mu);
    kb_store(kb, b.p[3], ch, invstd);
    kb_store(kb, b.p[0], ch, kb_fma(kb, kb_float(kb, 1 - m), kb_load(kb, b.p[0], ch), kb_fmul(kb, kb_float(kb, m), mu)));
    kb_store(kb, b.p[1], ch, kb_fma(kb, kb_float(kb, 1 - m), kb_load(kb, b.p[1], ch), kb_fmul(kb, kb_float(kb, m), unbiased)));
    end_map(&b);

    batchnorm_map(nk, op, tag);
}

/* (dy, x, mean, invstd, @w) -> dx = w invstd (dy - mean(dy) - xhat mean(dy xhat)):
 * the two sums in parts, the parts' sums per channel, then dx, a map. */
static void batchnorm_grad_input(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    const DlcValue *x = op->in[1];
    int64_t c = x->type.dims[0], hw = numel(x) / c;
    int part_slots[5] = {0, 1, 2, 3, NV_WORKSPACE};
    start(&b, nk, op, tag, "part", part_slots, 5, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, hw);
    int64_t sums_at = 2 * c * p.parts; /* after the parts: the channels' two sums */
    b.l->workspace = sums_at + 2 * c;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef mean = kb_load(kb, b.p[2], p.ch.ch), invstd = kb_load(kb, b.p[3], p.ch.ch);
    LLVMValueRef sdy = kb_var(kb, kb->f32, kb_float(kb, 0)), sdyx = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    LLVMValueRef at = channel_at(kb, &p.ch, kb_get(kb, i)), dy = kb_load(kb, b.p[0], at);
    LLVMValueRef xhat = kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], at), mean), invstd);
    kb_set(kb, sdy, kb_fadd(kb, kb_get(kb, sdy), dy));
    kb_set(kb, sdyx, kb_fma(kb, dy, xhat, kb_get(kb, sdyx)));
    kb_endfor(kb);
    LLVMValueRef tdy = kb_block_sum(kb, scratch, kb_get(kb, sdy), ROW_THREADS);
    LLVMValueRef tdyx = kb_block_sum(kb, scratch, kb_get(kb, sdyx), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[4], part_at(kb, &p, 2, 0), tdy);
    kb_store(kb, b.p[4], part_at(kb, &p, 2, 1), tdyx);
    kb_endif(kb);
    kb_end(kb);

    int sum_slots[1] = {NV_WORKSPACE};
    start(&b, nk, op, tag, "sum", sum_slots, 1, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = begin_map(&b, 0, c);
    for (int k = 0; k < 2; k++)
        kb_store(kb, b.p[0], kb_addi(kb, kb_muli(kb, ch, 2), sums_at + k), sum_parts(kb, b.p[0], ch, p.parts, 2, k));
    end_map(&b);

    int map_slots[7] = {0, 1, 2, 3, 4, NV_WORKSPACE, NV_RESULT};
    start(&b, nk, op, tag, "", map_slots, 7, NULL, 0, MAP_THREADS);
    kb = b.kb;
    i = begin_map(&b, numel(x), 0);
    ch = kb_remi(kb, kb_divi(kb, i, hw), c);
    LLVMValueRef fcnt = kb_itof(kb, count(&b, hw, 0));
    LLVMValueRef sums = kb_addi(kb, kb_muli(kb, ch, 2), sums_at);
    LLVMValueRef mdy = kb_fdiv(kb, kb_load(kb, b.p[5], sums), fcnt);
    LLVMValueRef mdyx = kb_fdiv(kb, kb_load(kb, b.p[5], kb_addi(kb, sums, 1)), fcnt);
    invstd = kb_load(kb, b.p[3], ch);
    xhat = kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], i), kb_load(kb, b.p[2], ch)), invstd);
    LLVMValueRef k = kb_fmul(kb, kb_load(kb, b.p[4], ch), invstd);
    LLVMValueRef dx = kb_fmul(kb, k, kb_fsub(kb, kb_fsub(kb, kb_load(kb, b.p[0], i), mdy), kb_fmul(kb, xhat, mdyx)));
    kb_store(kb, b.p[6], i, dx);
    end_map(&b);
}

/* ---- losses --------------------------------------------------------------------- */

/* a row's max and sum of exp(x - max), from logits row pointer */
static void row_lse(Kb *kb, LLVMValueRef row, int64_t classes, LLVMValueRef *max, LLVMValueRef *sum) {
    LLVMValueRef m = kb_var(kb, kb->f32, kb_load(kb, row, kb_int(kb, 0)));
    LLVMValueRef j = kb_for(kb, kb_int(kb, 1), kb_int(kb, classes), kb_int(kb, 1));
    kb_set(kb, m, kb_fmax(kb, kb_load(kb, row, kb_get(kb, j)), kb_get(kb, m)));
    kb_endfor(kb);
    LLVMValueRef s = kb_var(kb, kb->f32, kb_float(kb, 0));
    j = kb_for(kb, kb_int(kb, 0), kb_int(kb, classes), kb_int(kb, 1));
    kb_set(kb, s, kb_fadd(kb, kb_get(kb, s), kb_exp(kb, kb_fsub(kb, kb_load(kb, row, kb_get(kb, j)), kb_get(kb, m)))));
    kb_endfor(kb);
    *max = kb_get(kb, m);
    *sum = kb_get(kb, s);
}

static LLVMValueRef nan_f(Kb *kb) { return kb_float(kb, NAN); }

static void cross_entropy(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    bool grad = op->kind == DLC_OP_CROSS_ENTROPY_GRAD;
    start(&b, nk, op, tag, "", slots, 3, NULL, 0, grad ? MAP_THREADS : ROW_THREADS);
    Kb *kb = b.kb;
    int64_t classes = numel(op->in[0]);
    if (grad) { /* one thread per sample: (softmax - onehot) / n */
        LLVMValueRef i = begin_map(&b, 1, 0);
        LLVMValueRef row = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, i, classes)}, 1, "");
        LLVMValueRef out = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[2], (LLVMValueRef[]){kb_muli(kb, i, classes)}, 1, "");
        LLVMValueRef label = load_i32(kb, b.p[1], i), max, sum;
        row_lse(kb, row, classes, &max, &sum);
        LLVMValueRef scale = kb_fdiv(kb, kb_float(kb, 1), kb_itof(kb, b.n));
        LLVMValueRef j = kb_for(kb, kb_int(kb, 0), kb_int(kb, classes), kb_int(kb, 1));
        LLVMValueRef jj = kb_get(kb, j);
        LLVMValueRef p = kb_fdiv(kb, kb_exp(kb, kb_fsub(kb, kb_load(kb, row, jj), max)), sum);
        p = kb_fsub(kb, p, kb_select(kb, kb_eq(kb, jj, label), kb_float(kb, 1), kb_float(kb, 0)));
        kb_store(kb, out, jj, kb_fmul(kb, p, scale));
        kb_endfor(kb);
        end_map(&b);
        return;
    }
    /* the loss: one block, a term per sample, their mean */
    begin_rows(&b, 0, 1);
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef total = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = kb_for(kb, kb_tid(kb), b.n, kb_int(kb, ROW_THREADS));
    LLVMValueRef ii = kb_get(kb, i);
    LLVMValueRef row = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, ii, classes)}, 1, "");
    LLVMValueRef label = load_i32(kb, b.p[1], ii), max, sum;
    row_lse(kb, row, classes, &max, &sum);
    LLVMValueRef ok = kb_in_range(kb, label, classes);
    LLVMValueRef xl = kb_load_if(kb, ok, row, kb_select(kb, ok, label, kb_int(kb, 0)));
    LLVMValueRef term = kb_fadd(kb, kb_log(kb, sum), kb_fsub(kb, max, xl));
    kb_set(kb, total, kb_fadd(kb, kb_get(kb, total), kb_select(kb, ok, term, nan_f(kb))));
    kb_endfor(kb);
    LLVMValueRef all = kb_block_sum(kb, scratch, kb_get(kb, total), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[2], kb_int(kb, 0), kb_fdiv(kb, all, kb_itof(kb, b.n)));
    kb_endif(kb);
    kb_end(kb);
}

static void mse(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    bool grad = op->kind == DLC_OP_MSE_GRAD;
    start(&b, nk, op, tag, "", slots, 3, NULL, 0, grad ? MAP_THREADS : ROW_THREADS);
    Kb *kb = b.kb;
    int64_t size = numel(op->in[0]);
    LLVMValueRef cnt = count(&b, size, 0);
    if (grad) {
        LLVMValueRef i = begin_map(&b, size, 0);
        LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], i), kb_load(kb, b.p[1], i));
        kb_store(kb, b.p[2], i, kb_fdiv(kb, kb_fmul(kb, d, kb_float(kb, 2)), kb_itof(kb, cnt)));
        end_map(&b);
        return;
    }
    begin_rows(&b, 0, 1);
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef total = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = kb_for(kb, kb_tid(kb), cnt, kb_int(kb, ROW_THREADS));
    LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], kb_get(kb, i)), kb_load(kb, b.p[1], kb_get(kb, i)));
    kb_set(kb, total, kb_fma(kb, d, d, kb_get(kb, total)));
    kb_endfor(kb);
    LLVMValueRef all = kb_block_sum(kb, scratch, kb_get(kb, total), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[2], kb_int(kb, 0), kb_fdiv(kb, all, kb_itof(kb, cnt)));
    kb_endif(kb);
    kb_end(kb);
}

/* ---- matrix products -------------------------------------------------------------- */

/* C[g][m][j] = sum over k of A(g, m, k) B(g, k, j) for m < M, j < N
 * (N = n_per_n * n + n_fixed), k < K (likewise), in G independent groups;
 * op-specific gathers (gemm_a, gemm_b) and epilogue (gemm_store). */
typedef struct Gemm {
    const DlcOp *op;
    int kind;                   /* DLC_OP_*: which gathers */
    int64_t m, n_pn, n_fx, k_pn, k_fx, groups, splits;
    bool a_kfast, b_kfast;      /* which index the loading threads walk consecutively */
    /* the convolution's geometry (conv ops) */
    int64_t c, h, w, f, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t units, in;          /* dense ops */
    bool relu, bias;
} Gemm;

static Gemm gemm_of(const DlcOp *op) {
    Gemm g = {.op = op, .kind = op->kind, .groups = 1, .splits = 1};
    const DlcValue *x = op->in[0], *y = op->out[0];
    if (op->kind == DLC_OP_DENSE || op->kind == DLC_OP_DENSE_GRAD_INPUT ||
        op->kind == DLC_OP_DENSE_GRAD_WEIGHT) {
        if (op->kind == DLC_OP_DENSE) {
            g.in = numel(x), g.units = numel(y);
            g.m = g.units, g.n_pn = 1, g.k_fx = g.in;   /* y^T = W x^T */
            g.a_kfast = true, g.b_kfast = true;
            g.relu = dlc_op_fused_relu(op), g.bias = op->nparams == 2;
        } else if (op->kind == DLC_OP_DENSE_GRAD_INPUT) { /* (dy, @W) -> dx */
            g.units = numel(x), g.in = numel(y);
            g.m = g.in, g.n_pn = 1, g.k_fx = g.units;   /* dx^T = W^T dy^T */
            g.a_kfast = false, g.b_kfast = true;
        } else { /* (dy, x) -> dW */
            g.units = numel(x), g.in = numel(op->in[1]);
            g.m = g.units, g.n_fx = g.in, g.k_pn = 1;   /* dW = dy^T x */
            g.a_kfast = false, g.b_kfast = false;
        }
        return g;
    }
    /* convolutions: geometry from the input and output images */
    const DlcType *img, *out;
    dlc_conv_images(op, &img, &out);
    const int64_t *k = attr_pair(op, "kernel"), *s = attr_pair(op, "stride"),
                  *p = attr_pair(op, "pad"), *d = attr_pair(op, "dilation");
    g.c = img->dims[0], g.h = img->dims[1], g.w = img->dims[2];
    g.f = out->dims[0], g.oh = out->dims[1], g.ow = out->dims[2];
    g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
    g.groups = attr_i(op, "groups");
    int64_t cg = g.c / g.groups, fg = g.f / g.groups, kk = g.kh * g.kw;
    if (op->kind == DLC_OP_CONV2D) {
        g.m = fg, g.n_pn = g.oh * g.ow, g.k_fx = cg * kk;
        g.a_kfast = true, g.b_kfast = false;
        /* a folded batchnorm (and then the ReLU) is batchnorm_map's, after */
        g.relu = dlc_op_fused_relu(op) && dlc_op_folded_batchnorm(op) < 0;
        g.bias = dlc_op_bias(op) != NULL;
    } else if (op->kind == DLC_OP_CONV2D_GRAD_INPUT) {
        g.m = cg, g.n_pn = g.h * g.w, g.k_fx = fg * kk;
        g.a_kfast = false, g.b_kfast = false;
    } else {
        g.m = fg, g.n_fx = cg * kk, g.k_pn = g.oh * g.ow;
        g.a_kfast = true, g.b_kfast = true;
    }
    return g;
}

/* A(g, m, k), or 0 outside the matrix (valid says whether m, k are in range) */
static LLVMValueRef gemm_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                           LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    LLVMValueRef at;
    int64_t kk = g->kh * g->kw;
    switch (g->kind) {
    case DLC_OP_DENSE: at = kb_add(kb, kb_muli(kb, m, g->in), k); break;            /* W[m, k] */
    case DLC_OP_DENSE_GRAD_INPUT: at = kb_add(kb, kb_muli(kb, k, g->in), m); break; /* W[k, m] */
    case DLC_OP_DENSE_GRAD_WEIGHT: at = kb_add(kb, kb_muli(kb, k, g->units), m); break; /* dy[k, m] */
    case DLC_OP_CONV2D: { /* W[g fg + m, k] */
        int64_t fg = g->f / g->groups, kc = g->c / g->groups * kk;
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), m), kc), k);
        break;
    }
    case DLC_OP_CONV2D_GRAD_INPUT: { /* W[g fg + f, m, r] with k = (f, r) */
        int64_t fg = g->f / g->groups, cg = g->c / g->groups;
        LLVMValueRef f = kb_divi(kb, k, kk), r = kb_remi(kb, k, kk);
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), f), cg), m), kk), r);
        break;
    }
    default: { /* conv2d_grad_weight: dy[s, g fg + m, q] with k = (s, q) */
        int64_t fg = g->f / g->groups, q = g->oh * g->ow;
        LLVMValueRef s = kb_divi(kb, k, q), r = kb_remi(kb, k, q);
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->f), kb_add(kb, kb_muli(kb, grp, fg), m)), q), r);
        break;
    }
    }
    /* the weight (operand 1), except in the weight gradients: dy (operand 0) */
    bool weight_grad = g->kind == DLC_OP_DENSE_GRAD_WEIGHT || g->kind == DLC_OP_CONV2D_GRAD_WEIGHT;
    return kb_load_if(kb, valid, p[weight_grad ? 0 : 1], at);
}

/* The input image's element (s, c, y, x) of a convolution, 0 in the padding. */
static LLVMValueRef image_at(Kb *kb, const Gemm *g, LLVMValueRef img, LLVMValueRef s,
                             LLVMValueRef c, LLVMValueRef iy, LLVMValueRef ix, LLVMValueRef valid) {
    LLVMValueRef inside = kb_and(kb, valid, kb_and(kb, kb_in_range(kb, iy, g->h), kb_in_range(kb, ix, g->w)));
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->c), c), g->h), iy), g->w), ix);
    return kb_load_if(kb, inside, img, at);
}

/* Element (c, r) of output position (s, q) of the unrolled input of a
 * convolution (im2col, never built): the input pixel under kernel tap r of
 * channel c of group grp, 0 in the padding. */
static LLVMValueRef im2col(Kb *kb, const Gemm *g, LLVMValueRef img, LLVMValueRef grp,
                           LLVMValueRef position, LLVMValueRef column, LLVMValueRef valid) {
    int64_t q = g->oh * g->ow, kk = g->kh * g->kw, cg = g->c / g->groups;
    LLVMValueRef s = kb_divi(kb, position, q), pq = kb_remi(kb, position, q);
    LLVMValueRef oy = kb_divi(kb, pq, g->ow), ox = kb_remi(kb, pq, g->ow);
    LLVMValueRef c = kb_divi(kb, column, kk), r = kb_remi(kb, column, kk);
    LLVMValueRef ky = kb_divi(kb, r, g->kw), kx = kb_remi(kb, r, g->kw);
    LLVMValueRef iy = kb_add(kb, kb_addi(kb, kb_muli(kb, oy, g->sh), -g->ph), kb_muli(kb, ky, g->dh));
    LLVMValueRef ix = kb_add(kb, kb_addi(kb, kb_muli(kb, ox, g->sw), -g->pw), kb_muli(kb, kx, g->dw));
    return image_at(kb, g, img, s, kb_add(kb, kb_muli(kb, grp, cg), c), iy, ix, valid);
}

static LLVMValueRef gemm_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                           LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    int64_t kk = g->kh * g->kw;
    switch (g->kind) {
    case DLC_OP_DENSE: return kb_load_if(kb, valid, p[0], kb_add(kb, kb_muli(kb, j, g->in), k));       /* x[j, k] */
    case DLC_OP_DENSE_GRAD_INPUT: return kb_load_if(kb, valid, p[0], kb_add(kb, kb_muli(kb, j, g->units), k)); /* dy[j, k] */
    case DLC_OP_DENSE_GRAD_WEIGHT: return kb_load_if(kb, valid, p[1], kb_add(kb, kb_muli(kb, k, g->in), j));  /* x[k, j] */
    case DLC_OP_CONV2D: return im2col(kb, g, p[0], grp, j, k, valid); /* x at (s, q) = j, (c, r) = k */
    case DLC_OP_CONV2D_GRAD_INPUT: { /* dy at (s, oy, ox) for input pixel j = (s, y, x), k = (f, r) */
        int64_t hw = g->h * g->w, fg = g->f / g->groups;
        LLVMValueRef s = kb_divi(kb, j, hw), pq = kb_remi(kb, j, hw);
        LLVMValueRef y = kb_divi(kb, pq, g->w), x = kb_remi(kb, pq, g->w);
        LLVMValueRef f = kb_divi(kb, k, kk), r = kb_remi(kb, k, kk);
        LLVMValueRef ky = kb_divi(kb, r, g->kw), kx = kb_remi(kb, r, g->kw);
        LLVMValueRef ty = kb_sub(kb, kb_addi(kb, y, g->ph), kb_muli(kb, ky, g->dh));
        LLVMValueRef tx = kb_sub(kb, kb_addi(kb, x, g->pw), kb_muli(kb, kx, g->dw));
        /* ty must be a non-negative multiple of the stride; the remainder is
           taken of ty shifted to be non-negative */
        LLVMValueRef oy = kb_divi(kb, ty, g->sh), ox = kb_divi(kb, tx, g->sw);
        LLVMValueRef ok = kb_and(kb, kb_le(kb, kb_int(kb, 0), ty), kb_le(kb, kb_int(kb, 0), tx));
        ok = kb_and(kb, ok, kb_and(kb, kb_eq(kb, kb_remi(kb, ty, g->sh), kb_int(kb, 0)),
                                   kb_eq(kb, kb_remi(kb, tx, g->sw), kb_int(kb, 0))));
        ok = kb_and(kb, ok, kb_and(kb, kb_in_range(kb, oy, g->oh), kb_in_range(kb, ox, g->ow)));
        LLVMValueRef fi = kb_add(kb, kb_muli(kb, grp, fg), f);
        LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->f), fi), g->oh), oy), g->ow), ox);
        return kb_load_if(kb, kb_and(kb, valid, ok), p[0], at);
    }
    default: return im2col(kb, g, p[1], grp, k, j, valid); /* conv2d_grad_weight: x at (s, q) = k, (c, r) = j */
    }
}

/* The final value of C(g, m, j): bias, ReLU, and where it goes. */
static void gemm_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                       LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    LLVMValueRef at;
    switch (g->kind) {
    case DLC_OP_DENSE:
        if (g->bias)
            v = kb_fadd(kb, v, kb_load(kb, p[2], m));
        at = kb_add(kb, kb_muli(kb, j, g->units), m);
        break;
    case DLC_OP_DENSE_GRAD_INPUT: at = kb_add(kb, kb_muli(kb, j, g->in), m); break;
    case DLC_OP_DENSE_GRAD_WEIGHT: at = kb_add(kb, kb_muli(kb, m, g->in), j); break;
    case DLC_OP_CONV2D: {
        int64_t q = g->oh * g->ow, fg = g->f / g->groups;
        LLVMValueRef f = kb_add(kb, kb_muli(kb, grp, fg), m);
        if (g->bias)
            v = kb_fadd(kb, v, kb_load(kb, p[2], f));
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_divi(kb, j, q), g->f), f), q), kb_remi(kb, j, q));
        break;
    }
    case DLC_OP_CONV2D_GRAD_INPUT: {
        int64_t hw = g->h * g->w, cg = g->c / g->groups;
        LLVMValueRef c = kb_add(kb, kb_muli(kb, grp, cg), m);
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_divi(kb, j, hw), g->c), c), hw), kb_remi(kb, j, hw));
        break;
    }
    default: { /* dW[g fg + m, j] */
        int64_t fg = g->f / g->groups, n = g->n_fx;
        at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), m), n), j);
        break;
    }
    }
    kb_store(kb, p[out], at, relu_if(kb, g->relu, v));
}

static int gemm_inputs(const Gemm *g) {
    return g->kind == DLC_OP_DENSE || g->kind == DLC_OP_CONV2D ? (g->bias ? 3 : 2) : 2;
}

/* A thread's 16 results of its block's TILE x TILE tile: value i sits at
 * (row[i], col[i]) of the tile.  Which 16 depends on how they are computed. */
typedef struct Accumulators {
    LLVMValueRef v[16];           /* f32 variables */
    LLVMValueRef row[16], col[16];
    /* the thread's place, for reading the shared tiles: FMA: (ty, tx) of
       16 x 16; tensor cores: its warp's first row and column of the tile,
       and its lane's group (gid) and place in the group (tig) */
    LLVMValueRef ty, tx, wrow, wcol, gid, tig;
} Accumulators;

/* The layouts.  FMA: 256 threads as 16 x 16; thread (ty, tx) has rows
 * ty + 16 i and columns tx + 16 j, i, j < 4, so that a warp's shared-memory
 * reads are broadcasts or consecutive.  Tensor cores: 8 warps as 2 (rows)
 * x 4 (columns), each a 32 x 16 part as 2 x 2 tiles of mma's 16 x 8, in
 * the PTX ISA's accumulator layout (kb.h). */
static void gemm_acc_init(Kb *kb, Accumulators *acc, bool mma) {
    *acc = (Accumulators){0};
    for (int i = 0; i < 16; i++)
        acc->v[i] = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef t = kb_tid(kb);
    if (!mma) {
        acc->tx = kb_remi(kb, t, 16), acc->ty = kb_divi(kb, t, 16);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc->row[4 * i + j] = kb_addi(kb, acc->ty, 16 * i), acc->col[4 * i + j] = kb_addi(kb, acc->tx, 16 * j);
        return;
    }
    LLVMValueRef warp = kb_divi(kb, t, 32), lane = kb_remi(kb, t, 32);
    acc->wrow = kb_muli(kb, kb_remi(kb, warp, 2), 32), acc->wcol = kb_muli(kb, kb_divi(kb, warp, 2), 16);
    acc->gid = kb_divi(kb, lane, 4), acc->tig = kb_remi(kb, lane, 4);
    LLVMValueRef tig2 = kb_muli(kb, acc->tig, 2);
    for (int mi = 0; mi < 2; mi++)
        for (int ni = 0; ni < 2; ni++)
            for (int c = 0; c < 4; c++) {
                int i = 8 * mi + 4 * ni + c;
                acc->row[i] = kb_add(kb, acc->wrow, kb_addi(kb, acc->gid, 16 * mi + 8 * (c / 2)));
                acc->col[i] = kb_add(kb, acc->wcol, kb_addi(kb, tig2, 8 * ni + c % 2));
            }
}

/* acc += the shared tiles' product, with FMA: As[k][m], Bs[k][j], rows of TILE. */
static void gemm_tile_fma(Kb *kb, LLVMValueRef As, LLVMValueRef Bs, Accumulators *acc) {
    LLVMValueRef tx = acc->tx, ty = acc->ty;
    for (int kk = 0; kk < TILE_K; kk++) {
        LLVMValueRef a[4], bv[4];
        for (int i = 0; i < 4; i++) {
            a[i] = kb_sload(kb, As, kb_add(kb, kb_int(kb, kk * TILE + 16 * i), ty));
            bv[i] = kb_sload(kb, Bs, kb_add(kb, kb_int(kb, kk * TILE + 16 * i), tx));
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                kb_set(kb, acc->v[4 * i + j], kb_fma(kb, a[i], bv[j], kb_get(kb, acc->v[4 * i + j])));
    }
}

/* acc += the shared tiles' product (TF32 values, rows of ld floats) on the
 * tensor cores: per 8 steps of the sum, each warp's 2 x 2 mma's. */
static void gemm_tile_mma(Kb *kb, LLVMValueRef As, LLVMValueRef Bs, int ld, Accumulators *acc) {
    LLVMValueRef wrow = acc->wrow, wcol = acc->wcol, gid = acc->gid, tig = acc->tig;
    for (int k8 = 0; k8 < TILE_K; k8 += 8) {
        /* element (k, x) of a tile is at (k8 + tig + k) * ld + x */
        LLVMValueRef row0 = kb_muli(kb, kb_addi(kb, tig, k8), ld), row4 = kb_muli(kb, kb_addi(kb, tig, k8 + 4), ld);
        LLVMValueRef a[2][4], bf[2][2];
        for (int mi = 0; mi < 2; mi++) {
            LLVMValueRef m = kb_add(kb, wrow, kb_addi(kb, gid, 16 * mi));
            a[mi][0] = kb_sload(kb, As, kb_add(kb, row0, m));
            a[mi][1] = kb_sload(kb, As, kb_add(kb, row0, kb_addi(kb, m, 8)));
            a[mi][2] = kb_sload(kb, As, kb_add(kb, row4, m));
            a[mi][3] = kb_sload(kb, As, kb_add(kb, row4, kb_addi(kb, m, 8)));
        }
        for (int ni = 0; ni < 2; ni++) {
            LLVMValueRef j = kb_add(kb, wcol, kb_addi(kb, gid, 8 * ni));
            bf[ni][0] = kb_sload(kb, Bs, kb_add(kb, row0, j));
            bf[ni][1] = kb_sload(kb, Bs, kb_add(kb, row4, j));
        }
        for (int mi = 0; mi < 2; mi++)
            for (int ni = 0; ni < 2; ni++) {
                LLVMValueRef c[4];
                for (int e = 0; e < 4; e++)
                    c[e] = kb_get(kb, acc->v[8 * mi + 4 * ni + e]);
                kb_mma_tf32(kb, a[mi], bf[ni], c);
                for (int e = 0; e < 4; e++)
                    kb_set(kb, acc->v[8 * mi + 4 * ni + e], c[e]);
            }
    }
}

/* Where thread t's r-th load of a tile goes: (kk, x) of the TILE_K x TILE
 * tile; kfast: consecutive threads take consecutive kk (the operand is
 * contiguous along the sum), else consecutive x. */
static void gemm_tile_spot(LLVMValueRef t, int r, bool kfast, Kb *kb, LLVMValueRef *kk, LLVMValueRef *x) {
    LLVMValueRef e = kb_addi(kb, t, r * GEMM_THREADS);
    *kk = kfast ? kb_remi(kb, e, TILE_K) : kb_divi(kb, e, TILE);
    *x = kfast ? kb_divi(kb, e, TILE_K) : kb_remi(kb, e, TILE);
}

/* This thread's GEMM_LOADS elements of A and then of B for the tile of
 * steps [k0, k0 + TILE_K) of the sum, into the variables v (rounded to
 * TF32 for the tensor cores). */
static void gemm_load_tile(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp, LLVMValueRef m0,
                           LLVMValueRef j0, LLVMValueRef N, LLVMValueRef k0, LLVMValueRef k_end,
                           bool tf32, LLVMValueRef *v) {
    LLVMValueRef t = kb_tid(kb);
    for (int r = 0; r < GEMM_LOADS; r++) {
        LLVMValueRef kk, mm, jj;
        gemm_tile_spot(t, r, g->a_kfast, kb, &kk, &mm);
        LLVMValueRef m = kb_add(kb, m0, mm), k = kb_add(kb, k0, kk);
        LLVMValueRef va = kb_and(kb, kb_lt(kb, m, kb_int(kb, g->m)), kb_lt(kb, k, k_end));
        LLVMValueRef av = gemm_a(kb, g, p, grp, m, k, va);
        kb_set(kb, v[r], tf32 ? kb_tf32(kb, av) : av);
        gemm_tile_spot(t, r, g->b_kfast, kb, &kk, &jj);
        LLVMValueRef j = kb_add(kb, j0, jj);
        k = kb_add(kb, k0, kk);
        LLVMValueRef vb = kb_and(kb, kb_lt(kb, j, N), kb_lt(kb, k, k_end));
        LLVMValueRef bv = gemm_b(kb, g, p, grp, k, j, vb);
        kb_set(kb, v[GEMM_LOADS + r], tf32 ? kb_tf32(kb, bv) : bv);
    }
}

/* The tiled product: grid (column tiles, row tiles, groups * splits). */
static void gemm_kernel(NvKernels *nk, const DlcOp *op, const char *tag, const Gemm *g) {
    Build b;
    int ni = gemm_inputs(g);
    int slots[6] = {0, 1, 2};
    slots[ni] = g->splits > 1 ? NV_WORKSPACE : NV_RESULT;
    start(&b, nk, op, tag, g->splits > 1 ? "part" : "", slots, ni + 1, NULL, 0, GEMM_THREADS);
    Kb *kb = b.kb;
    /* tensor cores: two blocks per multiprocessor (128 registers a thread,
       which the mma kernels fit without spilling), so that one block's loads
       and barriers overlap the other's arithmetic: ResNet-18's step 2%
       faster on an H100.  The FMA kernels would spill, and gain nothing. */
    if (nk->tf32)
        kb_min_blocks(kb, 2);
    NvLaunch *l = b.l;
    l->gx_per_n = g->n_pn, l->gx_fixed = g->n_fx, l->gx_div = TILE;
    l->gy = (g->m + TILE - 1) / TILE, l->gz = g->groups * g->splits;
    if (g->splits > 1)
        l->workspace = g->splits * g->groups * g->m * g->n_fx;
    LLVMValueRef N = count(&b, g->n_pn, g->n_fx), K = count(&b, g->k_pn, g->k_fx);
    LLVMValueRef z = kb_ctaid(kb, 'z');
    LLVMValueRef grp = kb_divi(kb, z, g->splits), split = kb_remi(kb, z, g->splits);
    /* this split's range of k, in whole tiles */
    LLVMValueRef chunk = kb_muli(kb, kb_divi(kb, kb_addi(kb, kb_divi(kb, kb_addi(kb, K, g->splits - 1), g->splits), TILE_K - 1), TILE_K), TILE_K);
    LLVMValueRef k_begin = kb_mul(kb, split, chunk), k_end = kb_min(kb, K, kb_add(kb, k_begin, chunk));
    LLVMValueRef m0 = kb_muli(kb, kb_ctaid(kb, 'y'), TILE), j0 = kb_muli(kb, kb_ctaid(kb, 'x'), TILE);
    LLVMValueRef t = kb_tid(kb);
    /* tensor cores read the tiles in 8x8 fragments: rows padded by 8 floats
       put a warp's 32 reads in 32 banks */
    int ld = nk->tf32 ? TILE + 8 : TILE;
    LLVMValueRef As = kb_shared(kb, TILE_K * ld), Bs = kb_shared(kb, TILE_K * ld);
    Accumulators acc;
    gemm_acc_init(kb, &acc, nk->tf32);
    /* Software pipelining: the tile of k0 + TILE_K is loaded into registers
       while the tile of k0 is multiplied from shared memory, so that the
       loads' latency hides behind the arithmetic (a load past k_end is
       none, and gives 0). */
    LLVMValueRef next[2 * GEMM_LOADS];
    for (int r = 0; r < 2 * GEMM_LOADS; r++)
        next[r] = kb_var(kb, kb->f32, kb_float(kb, 0));
    gemm_load_tile(kb, g, b.p, grp, m0, j0, N, k_begin, k_end, nk->tf32, next);
    LLVMValueRef k0v = kb_for(kb, k_begin, k_end, kb_int(kb, TILE_K));
    LLVMValueRef k0 = kb_get(kb, k0v);
    for (int r = 0; r < GEMM_LOADS; r++) {
        LLVMValueRef kk, mm, jj;
        gemm_tile_spot(t, r, g->a_kfast, kb, &kk, &mm);
        kb_sstore(kb, As, kb_add(kb, kb_muli(kb, kk, ld), mm), kb_get(kb, next[r]));
        gemm_tile_spot(t, r, g->b_kfast, kb, &kk, &jj);
        kb_sstore(kb, Bs, kb_add(kb, kb_muli(kb, kk, ld), jj), kb_get(kb, next[GEMM_LOADS + r]));
    }
    kb_barrier(kb);
    gemm_load_tile(kb, g, b.p, grp, m0, j0, N, kb_addi(kb, k0, TILE_K), k_end, nk->tf32, next);
    if (nk->tf32)
        gemm_tile_mma(kb, As, Bs, ld, &acc);
    else
        gemm_tile_fma(kb, As, Bs, &acc);
    kb_barrier(kb);
    kb_endfor(kb);
    for (int i = 0; i < 16; i++) {
        LLVMValueRef m = kb_add(kb, m0, acc.row[i]), jn = kb_add(kb, j0, acc.col[i]);
        kb_if(kb, kb_and(kb, kb_lt(kb, m, kb_int(kb, g->m)), kb_lt(kb, jn, N)));
        if (g->splits > 1) /* the part: ws[z][m][j] */
            kb_store(kb, b.p[ni], kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, z, g->m), m), g->n_fx), jn),
                     kb_get(kb, acc.v[i]));
        else
            gemm_store(kb, g, b.p, ni, grp, m, jn, kb_get(kb, acc.v[i]));
        kb_endif(kb);
    }
    kb_end(kb);
}

/* The parts of a split product, added in order, through the epilogue. */
static void gemm_sum_parts(NvKernels *nk, const DlcOp *op, const char *tag, const Gemm *g) {
    Build b;
    int ni = gemm_inputs(g);
    int slots[6] = {0, 1, 2};
    slots[ni] = NV_RESULT;
    slots[ni + 1] = NV_WORKSPACE;
    start(&b, nk, op, tag, "sum", slots, ni + 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    int64_t mn = g->m * g->n_fx;
    LLVMValueRef i = begin_map(&b, 0, g->groups * mn);
    LLVMValueRef grp = kb_divi(kb, i, mn), r = kb_remi(kb, i, mn);
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    for (int s = 0; s < g->splits; s++)
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum),
                                kb_load(kb, b.p[ni + 1], kb_add(kb, kb_muli(kb, kb_addi(kb, kb_muli(kb, grp, g->splits), s), mn), r))));
    gemm_store(kb, g, b.p, ni, grp, kb_divi(kb, r, g->n_fx), kb_remi(kb, r, g->n_fx), kb_get(kb, sum));
    end_map(&b);
}

static void gemm(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = gemm_of(op);
    if (g.n_pn == 0 && g.k_pn > 0) {
        /* a weight gradient: few output tiles and a sum over the batch;
           split the sum until the tiles fill the machine twice, keeping at
           least 256 steps per part at a batch of 32 */
        int64_t tiles = (g.m + TILE - 1) / TILE * ((g.n_fx + TILE - 1) / TILE) * g.groups;
        int64_t k32 = g.k_pn * 32, want = 2 * (int64_t)nk->multiprocessors;
        while (tiles * g.splits < want && k32 / (g.splits * 2) >= 256 && g.splits < 64)
            g.splits *= 2;
    }
    gemm_kernel(nk, op, tag, &g);
    if (g.splits > 1)
        gemm_sum_parts(nk, op, tag, &g);
    if (dlc_op_folded_batchnorm(op) >= 0)
        batchnorm_map(nk, op, tag);
}

/* ---- the dispatch ----------------------------------------------------------------- */

bool nv_op_kernels(NvKernels *nk, const DlcOp *op, const char *tag) {
    if (op->nin + op->nout > NV_MAX_PTRS) {
        /* a kernel's pointer arguments: an add or concat of many operands */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with %d operands has no GPU kernel (at most %d)",
                  dlc_op_info(op->kind)->name, op->nin, NV_MAX_PTRS - op->nout);
        return false;
    }
    if (op->kind != DLC_OP_MAXPOOL_GRAD && dlc_op_relu_grad_mask(op) >= 0) {
        /* the fuse pass merges relu_grad into maxpool_grad only for a GPU target */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with a fused relu_grad has no GPU kernel yet",
                  dlc_op_info(op->kind)->name);
        return false;
    }
    switch (op->kind) {
    case DLC_OP_RELU: case DLC_OP_SIGMOID: case DLC_OP_TANH: case DLC_OP_LEAKY_RELU:
    case DLC_OP_ADD: case DLC_OP_RELU_GRAD: case DLC_OP_SIGMOID_GRAD: case DLC_OP_TANH_GRAD:
    case DLC_OP_LEAKY_RELU_GRAD: case DLC_OP_DROPOUT_GRAD:
    case DLC_OP_DROPOUT: case DLC_OP_FLATTEN: case DLC_OP_RESHAPE:
        elementwise(nk, op, tag);
        return true;
    case DLC_OP_DROPOUT_TRAIN: dropout_train(nk, op, tag); return true;
    case DLC_OP_SGD_UPDATE: case DLC_OP_ADAM_UPDATE: update(nk, op, tag); return true;
    case DLC_OP_CONCAT: concat(nk, op, tag); return true;
    case DLC_OP_SLICE: slice(nk, op, tag); return true;
    case DLC_OP_MAXPOOL: case DLC_OP_AVGPOOL: pool_forward(nk, op, tag); return true;
    case DLC_OP_MAXPOOL_GRAD: case DLC_OP_AVGPOOL_GRAD: pool_backward(nk, op, tag); return true;
    case DLC_OP_GLOBALAVGPOOL: case DLC_OP_GLOBALAVGPOOL_GRAD: globalavgpool(nk, op, tag); return true;
    case DLC_OP_LRN: case DLC_OP_LRN_GRAD: lrn(nk, op, tag); return true;
    case DLC_OP_SOFTMAX: case DLC_OP_SOFTMAX_GRAD: softmax(nk, op, tag); return true;
    case DLC_OP_BIAS_GRAD: case DLC_OP_BATCHNORM_GRAD_WEIGHT: channel_sum(nk, op, tag); return true;
    case DLC_OP_BATCHNORM_TRAIN: batchnorm_train(nk, op, tag); return true;
    case DLC_OP_BATCHNORM: case DLC_OP_BATCHNORM_NORMALIZE: batchnorm_map(nk, op, tag); return true;
    case DLC_OP_BATCHNORM_GRAD_INPUT: batchnorm_grad_input(nk, op, tag); return true;
    case DLC_OP_CROSS_ENTROPY: case DLC_OP_CROSS_ENTROPY_GRAD: cross_entropy(nk, op, tag); return true;
    case DLC_OP_MSE: case DLC_OP_MSE_GRAD: mse(nk, op, tag); return true;
    case DLC_OP_CONV2D: case DLC_OP_CONV2D_GRAD_INPUT: case DLC_OP_CONV2D_GRAD_WEIGHT:
    case DLC_OP_DENSE: case DLC_OP_DENSE_GRAD_INPUT: case DLC_OP_DENSE_GRAD_WEIGHT: {
        DlcOpKind act = dlc_op_fused_activation(op);
        if (act != DLC_OP_COUNT && act != DLC_OP_RELU) {
            /* the fuse pass merges only a ReLU for a GPU target */
            dlc_error(nk->ctx, op->loc, "nvptx: %s with a fused %s has no GPU kernel yet",
                      dlc_op_info(op->kind)->name, dlc_op_info(act)->name);
            return false;
        }
        gemm(nk, op, tag);
        return true;
    }
    case DLC_OP_PARAM_GRAD:
        return true; /* the gradient stays where the plan put it */
    default:
        dlc_error(nk->ctx, op->loc, "nvptx: %s has no GPU kernel yet", dlc_op_info(op->kind)->name);
        return false;
    }
}
