/* emit_elementwise.c — the C of the other elementwise ops: add (two
 * operands, or a chain of adds the fuse pass merged, with a fused ReLU or
 * ReLU gradient) and dropout, the identity for inference, and its training
 * form and gradient, whose masks come from the op's seed. */
#include "emit.h"

#define put dlc_cpu_put

void dlc_cpu_emit_add(Emit *e, Out *o, const DlcOp *op) {
    const DlcValue *x = op->in[0];
    const char *count = dlc_cpu_count(x);
    long long ne = (long long)dlc_cpu_numel(x);
    int mask = dlc_op_relu_grad_mask(op), nterms = mask >= 0 ? mask : op->nin;
    if (nterms > 2) {
        /* a merged chain of adds: one pass over the terms */
        put(o, "    const %s *const terms[] = {", e->real);
        for (int i = 0; i < nterms; i++)
            put(o, "%sa%d", i ? ", " : "", i);
        put(o, "};\n    dlrt_sum(%s%lld, %d, terms, %s, %s, r0);\n", count, ne, nterms,
            dlc_op_fused_relu(op) ? "true" : "false", dlc_cpu_relu_y(e, op));
        return;
    }
    if (mask >= 0)
        put(o, "    dlrt_add_relu_grad(%s%lld, a0, a1, a2, r0);\n", count, ne);
    else
        put(o, "    dlrt_add%s(%s%lld, a0, a1, r0);\n", dlc_op_fused_relu(op) ? "_relu" : "",
            count, ne);
}

/* inference: the identity (nothing to copy where the plan put r0 on a0) */
void dlc_cpu_emit_dropout(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    if (r0 != a0)\n        memcpy(r0, a0, sizeof *r0 * n * %lld);\n",
        (long long)dlc_cpu_numel(op->in[0]));
}

/* (x) -> (y, mask) */
void dlc_cpu_emit_dropout_train(Emit *e, Out *o, const DlcOp *op) {
    e->seed = true;
    put(o, "    dlrt_dropout_forward(n * %lld, %s, seed, a0, r0, r1);\n",
        (long long)dlc_cpu_numel(op->in[0]), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_P)));
}

/* (dy, mask): dy * mask */
void dlc_cpu_emit_dropout_grad(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dropout_backward(n * %lld, a0, a1, %s, r0);\n",
        (long long)dlc_cpu_numel(op->in[0]), dlc_cpu_relu_y(e, op));
}
