/* emit_update.c — the C of the weight updates the optimizer pass appends:
 * SGD (momentum, Nesterov, weight decay) and Adam, each also in the form
 * the fuse pass makes with a dense layer's weight gradient, which it then
 * computes itself and never stores; param_grad, a gradient that no
 * update consumes; and gradient clipping before the updates (clip_norm,
 * clip_scale).  An update changes its parameter and state in place.
 * The step without updates (NAME_gradients) skips clipping too, and copies
 * each gradient out instead, which cpu.c writes beside the call. */
#include "emit.h"

#define put dlc_cpu_put

/* (g, lr, @p[, @p.momentum_buffer]) */
void dlc_cpu_emit_sgd_update(Emit *e, Out *o, const DlcOp *op) {
    e->written = op->nparams;
    put(o, "    dlrt_sgd_update(%lld, a0, a1, %s, %s, %s, a2, %s);\n",
        (long long)dlc_cpu_numel(op->in[0]), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_MOMENTUM)),
        dlc_attr_bool(op, DLC_A_NESTEROV) ? "true" : "false",
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)), op->nparams == 2 ? "a3" : "NULL");
}

/* (g, lr, step, @p, @p.exp_avg, @p.exp_avg_sq) */
void dlc_cpu_emit_adam_update(Emit *e, Out *o, const DlcOp *op) {
    e->written = op->nparams;
    put(o, "    dlrt_adam_update(%lld, a0, a1, a2, %s, %s, %s, %s, a3, a4, a5);\n",
        (long long)dlc_cpu_numel(op->in[0]), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_BETA1)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_BETA2)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_EPS)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)));
}

/* (dy, x, lr, @p[, @p.momentum_buffer]) */
void dlc_cpu_emit_dense_sgd_update(Emit *e, Out *o, const DlcOp *op) {
    e->written = op->nparams;
    put(o, "    dlrt_dense_sgd_update(n, %lld, %lld, a0, a1, a2, %s, %s, a3, %s);\n",
        (long long)dlc_cpu_numel(op->in[1]), (long long)dlc_cpu_numel(op->in[0]),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_MOMENTUM)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)), op->nparams == 2 ? "a4" : "NULL");
}

/* (dy, x, lr, step, @p, @p.exp_avg, @p.exp_avg_sq) */
void dlc_cpu_emit_dense_adam_update(Emit *e, Out *o, const DlcOp *op) {
    e->written = op->nparams;
    put(o, "    dlrt_dense_adam_update(n, %lld, %lld, a0, a1, a2, a3, %s, %s, %s, %s, a4, a5, "
        "a6);\n", (long long)dlc_cpu_numel(op->in[1]), (long long)dlc_cpu_numel(op->in[0]),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_BETA1)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_BETA2)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_EPS)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)));
}

/* (g, @param): the optimizer pass did not run, so nothing consumes the
 * gradient; only NAME_gradients keeps it */
void dlc_cpu_emit_param_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e, (void)o, (void)op;
}

/* (g1, ..., gk, clip) -> coefficient: each gradient's sum of squares in
 * double, added in operand order */
void dlc_cpu_emit_clip_norm(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    double sum = 0;\n");
    for (int i = 0; i < op->nin - 1; i++)
        put(o, "    sum += dlrt_sum_squares(%lld, a%d);\n", (long long)dlc_cpu_numel(op->in[i]), i);
    put(o, "    r0[0] = dlrt_clip_coefficient(sum, a%d);\n", op->nin - 1);
}

/* (g, coefficient) -> g * coefficient, possibly over g */
void dlc_cpu_emit_clip_scale(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_clip_scale(%lld, a0, a1[0], r0);\n", (long long)dlc_cpu_numel(op->in[0]));
}
