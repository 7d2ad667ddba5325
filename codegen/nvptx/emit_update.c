/* emit_update.c — the GPU kernels of the weight update: sgd_update and
 * adam_update (torch.optim.SGD and Adam, as libdlrt's dlrt_sgd_update and
 * dlrt_adam_update compute them), each a map over the parameter's
 * elements that updates it and its optimizer state in place; and
 * param_grad, which needs none.  The learning rate (and Adam's step) are
 * the kernel's scalar arguments, so one PTX serves every schedule. */
#include <math.h>

#include "emit.h"

/* The map both updates are: element i of the parameter, its value p, the
 * gradient with weight decay d, and the learning rate lr. */
typedef struct Update {
    Build b;
    LLVMValueRef i, lr, p, d;
} Update;

/* (g, lr[, step], @p, state...): the scalars lr (and step) after the batch */
static void begin_update(Update *u, NvKernels *nk, const DlcOp *op, const char *tag, int nscalars) {
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    int sc[2] = {NV_SCALAR + 1, NV_SCALAR + 2};
    nv_start(&u->b, nk, op, tag, "", slots, ns, sc, nscalars, MAP_THREADS);
    Kb *kb = u->b.kb;
    u->i = nv_begin_map(&u->b, 0, nv_numel(op->in[0]));
    LLVMValueRef g = kb_load(kb, u->b.p[0], u->i);
    u->lr = u->b.sc[1];
    u->p = kb_load(kb, u->b.p[1], u->i);
    double wd = dlc_attr_float(op, DLC_A_WEIGHT_DECAY);
    u->d = wd != 0 ? kb_fma(kb, kb_float(kb, (float)wd), u->p, g) : g;
}

/* (g, lr, @p[, @p.momentum_buffer]) */
void nv_emit_sgd_update(NvKernels *nk, const DlcOp *op, const char *tag) {
    Update u;
    begin_update(&u, nk, op, tag, 1);
    Kb *kb = u.b.kb;
    LLVMValueRef i = u.i, d = u.d, *p = u.b.p;
    double momentum = dlc_attr_float(op, DLC_A_MOMENTUM);
    if (op->nparams == 2 && momentum != 0) {
        LLVMValueRef buf = kb_fadd(kb, kb_fmul(kb, kb_load(kb, p[2], i), kb_float(kb, (float)momentum)), d);
        kb_store(kb, p[2], i, buf);
        d = dlc_attr_true(op->kind, op->attrs, DLC_A_NESTEROV) ? kb_fma(kb, kb_float(kb, (float)momentum), buf, d) : buf;
    }
    kb_store(kb, p[1], i, kb_fma(kb, kb_fneg(kb, u.lr), d, u.p));
    nv_end_map(&u.b);
}

/* (g, lr, step, @p, @p.exp_avg, @p.exp_avg_sq) */
void nv_emit_adam_update(NvKernels *nk, const DlcOp *op, const char *tag) {
    Update u;
    begin_update(&u, nk, op, tag, 2);
    Kb *kb = u.b.kb;
    LLVMValueRef i = u.i, d = u.d, *p = u.b.p;
    /* the bias corrections from the step, in f32 here (f64 on the CPU) */
    double beta1 = dlc_attr_float(op, DLC_A_BETA1), beta2 = dlc_attr_float(op, DLC_A_BETA2), eps = dlc_attr_float(op, DLC_A_EPS);
    LLVMValueRef t = kb_itof(kb, kb_max(kb, u.b.sc[2], kb_int(kb, 1)));
    LLVMValueRef bc1 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta1)))));
    LLVMValueRef bc2 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta2)))));
    LLVMValueRef step_size = kb_fdiv(kb, u.lr, bc1), bc2_sqrt = kb_sqrt(kb, bc2);
    LLVMValueRef m = kb_fma(kb, kb_float(kb, (float)(1 - beta1)), d,
                            kb_fmul(kb, kb_load(kb, p[2], i), kb_float(kb, (float)beta1)));
    LLVMValueRef v = kb_fma(kb, kb_fmul(kb, kb_float(kb, (float)(1 - beta2)), d), d,
                            kb_fmul(kb, kb_load(kb, p[3], i), kb_float(kb, (float)beta2)));
    kb_store(kb, p[2], i, m);
    kb_store(kb, p[3], i, v);
    LLVMValueRef denom = kb_fadd(kb, kb_fdiv(kb, kb_sqrt(kb, v), bc2_sqrt), kb_float(kb, (float)eps));
    kb_store(kb, p[1], i, kb_fadd(kb, u.p, kb_fdiv(kb, kb_fmul(kb, kb_fneg(kb, step_size), m), denom)));
    nv_end_map(&u.b);
}

/* (g, @param): no kernel; the gradient stays where the memory plan put it */
void nv_emit_param_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    (void)nk, (void)op, (void)tag;
}
