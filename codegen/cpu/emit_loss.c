/* emit_loss.c — the C of the losses: cross_entropy (log-sum-exp over the
 * logits against integer labels) and mse, each reduced over the batch to
 * one scalar, and their gradients, which the same libdlrt function
 * computes when given somewhere to write them. */
#include "emit.h"

#define put dlc_cpu_put

/* (logits, labels) */
void dlc_cpu_emit_cross_entropy(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    r0[0] = (%s)dlrt_cross_entropy(a0, a1, n, %lld, NULL);\n", e->real,
        (long long)dlc_cpu_numel(op->in[0]));
}

void dlc_cpu_emit_cross_entropy_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_cross_entropy(a0, a1, n, %lld, r0);\n", (long long)dlc_cpu_numel(op->in[0]));
}

/* (pred, target) */
void dlc_cpu_emit_mse(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    r0[0] = (%s)dlrt_mse(a0, a1, n, %lld, NULL);\n", e->real,
        (long long)dlc_cpu_numel(op->in[0]));
}

void dlc_cpu_emit_mse_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_mse(a0, a1, n, %lld, r0);\n", (long long)dlc_cpu_numel(op->in[0]));
}
