/* emit_loss.c — the C of the losses: cross_entropy (log-sum-exp over the
 * logits against integer labels, per sample or per step of a sequence) and
 * mse, each reduced over the batch to one scalar, and their gradients, which the same libdlrt function
 * computes when given somewhere to write them. */
#include "emit.h"

#define put dlc_cpu_put

/* The rows of a cross-entropy's logits: the batch, or the batch's steps
 * for logits [T, classes] (a label per step); and the classes. */
static const char *ce_rows(Emit *e, const DlcOp *op, long long *classes) {
    const DlcType *t = &op->in[0]->type;
    *classes = (long long)t->dims[t->rank - 1];
    return t->rank == 2 ? dlc_arena_printf(e->arena, "n * %lld", (long long)t->dims[0]) : "n";
}

/* (logits, labels) */
void dlc_cpu_emit_cross_entropy(Emit *e, Out *o, const DlcOp *op) {
    long long classes;
    const char *rows = ce_rows(e, op, &classes);
    put(o, "    r0[0] = (%s)dlrt_cross_entropy(a0, a1, %s, %lld, NULL);\n", e->real, rows, classes);
}

void dlc_cpu_emit_cross_entropy_grad(Emit *e, Out *o, const DlcOp *op) {
    long long classes;
    const char *rows = ce_rows(e, op, &classes);
    put(o, "    dlrt_cross_entropy(a0, a1, %s, %lld, r0);\n", rows, classes);
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
