/* emit.c — the helpers every op's kernels start from (emit.h): a kernel
 * and its launch, its grid as a map or as row reductions, and the small
 * pieces several op families use. */
#include <string.h>

#include "emit.h"

static LLVMTypeRef scalar_type(Build *b, int sc) {
    if (sc == NV_SC_N || sc == NV_SC_LOOP)
        return b->kb->i32;
    if (sc == NV_SC_SEED)
        return b->kb->i64;
    return b->op->in[sc - NV_SCALAR]->type.dtype == DLC_I32 ? b->kb->i32 : b->kb->f32;
}

void nv_start(Build *b, NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
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
        types[i] = nv_step_scalar(b->l->scalars[i]) ? b->kb->gptr : scalar_type(b, b->l->scalars[i]);
    kb_begin(b->kb, b->l->kernel, nptrs, b->l->nscalars, types, block);
    for (int i = 0; i < nptrs; i++)
        b->p[i] = kb_param(b->kb, i);
    for (int i = 0; i < b->l->nscalars; i++) {
        b->sc[i] = kb_param(b->kb, nptrs + i);
        if (nv_step_scalar(b->l->scalars[i])) { /* its slot of the step values */
            LLVMTypeRef t = scalar_type(b, b->l->scalars[i]);
            b->sc[i] = LLVMBuildLoad2(b->kb->b, t, b->sc[i], "");
            LLVMSetAlignment(b->sc[i], t == b->kb->i64 ? 8 : 4);
        }
    }
    b->n = b->sc[0];
}

LLVMValueRef nv_count(Build *b, int64_t pn, int64_t fx) {
    return kb_add(b->kb, kb_muli(b->kb, b->n, pn), kb_int(b->kb, fx));
}

LLVMValueRef nv_begin_map(Build *b, int64_t pn, int64_t fx) {
    Kb *kb = b->kb;
    b->l->gx_per_n = pn;
    b->l->gx_fixed = fx;
    b->l->gx_div = MAP_THREADS;
    LLVMValueRef i = kb_add(kb, kb_mul(kb, kb_ctaid(kb, 'x'), kb_int(kb, MAP_THREADS)), kb_tid(kb));
    kb_if(kb, kb_lt(kb, i, nv_count(b, pn, fx)));
    return i;
}

void nv_end_map(Build *b) {
    kb_endif(b->kb);
    kb_end(b->kb);
}

LLVMValueRef nv_begin_rows(Build *b, int64_t pn, int64_t fx) {
    b->l->gx_per_n = pn;
    b->l->gx_fixed = fx;
    b->l->gx_div = 1;
    return kb_ctaid(b->kb, 'x');
}

int nv_tensor_slots(const DlcOp *op, int *slots) {
    int k = 0;
    for (int i = 0; i < op->nin; i++)
        if (op->in[i]->type.rank > 0 || op->in[i]->kind != DLC_VAL_INPUT)
            slots[k++] = i;
    for (int r = 0; r < op->nout; r++)
        slots[k++] = NV_RESULT + r;
    return k;
}

LLVMValueRef nv_relu_if(Kb *kb, bool relu, LLVMValueRef v) {
    return relu ? kb_select(kb, kb_flt(kb, v, kb_float(kb, 0)), kb_float(kb, 0), v) : v;
}

int nv_norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

void nv_around_axis(const DlcType *t, int axis, int64_t *before, int64_t *after) {
    *before = *after = 1;
    for (int i = 0; i < t->rank; i++) {
        if (i < axis)
            *before *= t->dims[i];
        if (i > axis)
            *after *= t->dims[i];
    }
}

void nv_set_workspace(Build *b, int ptr, int64_t per_n, int64_t fixed) {
    b->l->ws_per_n[ptr] = per_n;
    b->l->ws_fixed[ptr] = fixed;
}

int nv_loop_begin(NvKernels *nk) { return nk->nlaunches; }

void nv_loop_end(NvKernels *nk, int first, int64_t steps) {
    nk->launches[first].loop_steps = steps;
    nk->launches[first].loop_len = nk->nlaunches - first;
}

LLVMValueRef nv_load_i32(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(kb->b, kb->i32, p, &i, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(kb->b, kb->i32, at, "");
    LLVMSetAlignment(v, 4);
    return v;
}

LLVMValueRef nv_sigmoid(Kb *kb, LLVMValueRef a) {
    LLVMValueRef one = kb_float(kb, 1);
    return kb_fdiv(kb, one, kb_fadd(kb, one, kb_exp(kb, kb_fneg(kb, a))));
}

LLVMValueRef nv_tanh(Kb *kb, LLVMValueRef a) {
    LLVMValueRef zero = kb_float(kb, 0), one = kb_float(kb, 1);
    LLVMValueRef neg = kb_flt(kb, a, zero), abs = kb_select(kb, neg, kb_fneg(kb, a), a);
    LLVMValueRef e = kb_exp(kb, kb_fmul(kb, abs, kb_float(kb, -2)));
    LLVMValueRef t = kb_fdiv(kb, kb_fsub(kb, one, e), kb_fadd(kb, one, e));
    return kb_select(kb, neg, kb_fneg(kb, t), t);
}
