/* emit_elementwise.c — the GPU kernels of the elementwise ops: relu,
 * sigmoid, tanh, leaky_relu, elu, add, their gradients, dropout (a copy at
 * inference, a random mask in training, and its gradient), and the copies
 * flatten and reshape.
 *
 * Each is one map, a thread per element of the result: elementwise()
 * builds it and calls the op's scalar function for the value from the
 * operands' elements, computed as the CPU kernels (runtime/kernels/)
 * compute it; exp uses the GPU's approximate unit. */
#include "emit.h"

/* The value of an elementwise op's result at element i, from a (the first
 * operand's element) and a1 (the second's, for ops of two operands). */
typedef LLVMValueRef ScalarFn(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1);

/* One thread per element of the result: its operands' elements through f. */
static void elementwise(NvKernels *nk, const DlcOp *op, const char *tag, ScalarFn *f) {
    Build b;
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    nv_start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    LLVMValueRef i = nv_begin_map(&b, nv_per_n(y), nv_fixed(y));
    LLVMValueRef a = kb_load(kb, b.p[0], i);
    LLVMValueRef a1 = op->nin > 1 ? kb_load(kb, b.p[1], i) : NULL;
    kb_store(kb, b.p[ns - 1], i, f(&b, i, a, a1));
    nv_end_map(&b);
}

/* ---- activations -------------------------------------------------------------- */

static LLVMValueRef relu_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)i, (void)a1;
    Kb *kb = b->kb;
    LLVMValueRef zero = kb_float(kb, 0);
    return kb_select(kb, kb_flt(kb, a, zero), zero, a);
}

static LLVMValueRef sigmoid_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)i, (void)a1;
    return nv_sigmoid(b->kb, a);
}

static LLVMValueRef tanh_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)i, (void)a1;
    return nv_tanh(b->kb, a);
}

static LLVMValueRef leaky_relu_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)i, (void)a1;
    Kb *kb = b->kb;
    LLVMValueRef slope = kb_float(kb, dlc_attr_float(b->op, DLC_A_SLOPE));
    return kb_select(kb, kb_fgt(kb, a, kb_float(kb, 0)), a, kb_fmul(kb, slope, a));
}

/* alpha (exp(a) - 1) where a is not positive: with the approximate exp,
 * within f32's tolerance of the CPU's expm1 away from 0, and of a few ulp
 * of alpha near it */
static LLVMValueRef elu_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)i, (void)a1;
    Kb *kb = b->kb;
    LLVMValueRef alpha = kb_float(kb, dlc_attr_float(b->op, DLC_A_ALPHA));
    LLVMValueRef em1 = kb_fsub(kb, kb_exp(kb, a), kb_float(kb, 1));
    return kb_select(kb, kb_fgt(kb, a, kb_float(kb, 0)), a, kb_fmul(kb, alpha, em1));
}

void nv_emit_relu(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, relu_of);
}

void nv_emit_sigmoid(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, sigmoid_of);
}

void nv_emit_tanh(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, tanh_of);
}

void nv_emit_leaky_relu(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, leaky_relu_of);
}

void nv_emit_elu(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, elu_of);
}

/* ---- add ---------------------------------------------------------------------- */

/* the terms in their order, (a + b) + c, as the adds apart; the pointer
 * slots are the terms then the result */
static LLVMValueRef add_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    Kb *kb = b->kb;
    LLVMValueRef v = kb_fadd(kb, a, a1);
    for (int t = 2; t < b->l->nptrs - 1; t++)
        v = kb_fadd(kb, v, kb_load(kb, b->p[t], i));
    return nv_relu_if(kb, dlc_op_fused_relu(b->op), v);
}

void nv_emit_add(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, add_of);
}

/* ---- gradients: (dy, y), or (dy, x) for leaky_relu ------------------------------ */

static LLVMValueRef relu_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef y) {
    (void)i;
    Kb *kb = b->kb;
    LLVMValueRef zero = kb_float(kb, 0);
    return kb_select(kb, kb_fgt(kb, y, zero), dy, zero);
}

static LLVMValueRef sigmoid_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef y) {
    (void)i;
    Kb *kb = b->kb;
    return kb_fmul(kb, kb_fmul(kb, dy, kb_fsub(kb, kb_float(kb, 1), y)), y);
}

static LLVMValueRef tanh_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef y) {
    (void)i;
    Kb *kb = b->kb;
    return kb_fmul(kb, dy, kb_fsub(kb, kb_float(kb, 1), kb_fmul(kb, y, y)));
}

static LLVMValueRef leaky_relu_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef x) {
    (void)i;
    Kb *kb = b->kb;
    LLVMValueRef slope = kb_float(kb, dlc_attr_float(b->op, DLC_A_SLOPE));
    return kb_select(kb, kb_fgt(kb, x, kb_float(kb, 0)), dy, kb_fmul(kb, slope, dy));
}

/* dy where y > 0, dy (y + alpha) elsewhere: alpha exp(x) from the result */
static LLVMValueRef elu_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef y) {
    (void)i;
    Kb *kb = b->kb;
    LLVMValueRef alpha = kb_float(kb, dlc_attr_float(b->op, DLC_A_ALPHA));
    return kb_select(kb, kb_fgt(kb, y, kb_float(kb, 0)), dy,
                     kb_fmul(kb, dy, kb_fadd(kb, y, alpha)));
}

void nv_emit_relu_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, relu_grad_of);
}

void nv_emit_sigmoid_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, sigmoid_grad_of);
}

void nv_emit_tanh_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, tanh_grad_of);
}

void nv_emit_leaky_relu_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, leaky_relu_grad_of);
}

/* ---- dropout and copies --------------------------------------------------------- */

/* the first operand as it is */
static LLVMValueRef copy_of(Build *b, LLVMValueRef i, LLVMValueRef a, LLVMValueRef a1) {
    (void)b, (void)i, (void)a1;
    return a;
}

/* (dy, mask): dy * mask */
static LLVMValueRef dropout_grad_of(Build *b, LLVMValueRef i, LLVMValueRef dy, LLVMValueRef mask) {
    (void)i;
    return kb_fmul(b->kb, dy, mask);
}

/* at inference, the identity */
void nv_emit_dropout(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, copy_of);
}

void nv_emit_dropout_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, dropout_grad_of);
}

/* an int8 tensor's (int8 inference) are bytes: emit_quant.c copies them */
void nv_emit_flatten(NvKernels *nk, const DlcOp *op, const char *tag) {
    if (op->in[0]->type.dtype == DLC_I8)
        nv_copy_s8(nk, op, tag);
    else
        elementwise(nk, op, tag, copy_of);
}

void nv_emit_reshape(NvKernels *nk, const DlcOp *op, const char *tag) {
    if (op->in[0]->type.dtype == DLC_I8)
        nv_copy_s8(nk, op, tag);
    else
        elementwise(nk, op, tag, copy_of);
}

/* (x) -> (y, mask): the mask from splitmix64 of seed + (i + 1) * golden,
 * the counter-based generator of runtime/rng.c (dlrt_rng_uniform_at), so
 * that both devices draw the same mask. */
void nv_emit_dropout_train(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, NV_RESULT, NV_RESULT + 1}, sc[1] = {NV_SC_SEED};
    nv_start(&b, nk, op, tag, "", slots, 3, sc, 1, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    LLVMValueRef i = nv_begin_map(&b, nv_numel(op->in[0]), 0);
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
    double p = (float)dlc_attr_float(op, DLC_A_P); /* as the CPU code's literal rounds it */
    LLVMValueRef mask = kb_select(kb, kb_flt(kb, u, kb_float(kb, (float)p)), kb_float(kb, 0),
                                  kb_float(kb, (float)(1.0 / (1.0 - p))));
    kb_store(kb, b.p[2], i, mask);
    kb_store(kb, b.p[1], i, kb_fmul(kb, kb_load(kb, b.p[0], i), mask));
    nv_end_map(&b);
}

void nv_emit_elu_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    elementwise(nk, op, tag, elu_grad_of);
}
