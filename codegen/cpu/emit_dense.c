/* emit_dense.c — the C of the dense (fully connected) layers: dense, with
 * its bias and a fused activation, and its input and weight gradients.
 * Each is one call of libdlrt's, a GEMM through BLAS over the batch; with
 * per_step=true (a dense layer on each step of a sequence, and a recurrent
 * layer's products with its input) over the batch's steps, n * T rows of
 * one step's features each. */
#include "emit.h"

#define put dlc_cpu_put

/* The rows of op's product: "n", or "n * T" for a per-step op, whose
 * values are [T, features] (v, any operand or result of op, gives T). */
static const char *rows(Emit *e, const DlcOp *op, const DlcValue *v) {
    if (!dlc_attr_bool(op, DLC_A_PER_STEP))
        return "n";
    return dlc_arena_printf(e->arena, "n * %lld", (long long)v->type.dims[0]);
}

/* The features of one row of v: all of a sample's, or one step's. */
static long long row_size(const DlcOp *op, const DlcValue *v) {
    int64_t all = dlc_cpu_numel(v);
    return (long long)(dlc_attr_bool(op, DLC_A_PER_STEP) ? all / v->type.dims[0] : all);
}

void dlc_cpu_emit_dense(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dense_forward(%s, %lld, %lld, a0, a1, %s, %s, %s, r0);\n", rows(e, op, op->in[0]),
        row_size(op, op->in[0]), row_size(op, op->out[0]), op->nparams == 2 ? "a2" : "NULL",
        dlc_cpu_activation(e, op), dlc_cpu_activation_param(e, op));
}

/* (dy, @weight), or (dy, y, @weight) with a fused ReLU gradient */
void dlc_cpu_emit_dense_grad_input(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dense_backward_input(%s, %lld, %lld, a0, %s, %s, r0);\n", rows(e, op, op->in[0]),
        row_size(op, op->out[0]), row_size(op, op->in[0]), dlc_cpu_weight(e, op),
        dlc_cpu_relu_y(e, op));
}

/* (dy, x) */
void dlc_cpu_emit_dense_grad_weight(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dense_backward_weight(%s, %lld, %lld, a0, a1, r0);\n", rows(e, op, op->in[0]),
        row_size(op, op->in[1]), row_size(op, op->in[0]));
}
