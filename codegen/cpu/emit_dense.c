/* emit_dense.c — the C of the dense (fully connected) layers: dense, with
 * its bias and a fused activation, and its input and weight gradients.
 * Each is one call of libdlrt's, a GEMM through BLAS over the batch. */
#include "emit.h"

#define put dlc_cpu_put

void dlc_cpu_emit_dense(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dense_forward(n, %lld, %lld, a0, a1, %s, %s, %s, r0);\n",
        (long long)dlc_cpu_numel(op->in[0]), (long long)dlc_cpu_numel(op->out[0]),
        op->nparams == 2 ? "a2" : "NULL", dlc_cpu_activation(e, op), dlc_cpu_activation_param(e, op));
}

/* (dy, @weight), or (dy, y, @weight) with a fused ReLU gradient */
void dlc_cpu_emit_dense_grad_input(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_dense_backward_input(n, %lld, %lld, a0, %s, %s, r0);\n",
        (long long)dlc_cpu_numel(op->out[0]), (long long)dlc_cpu_numel(op->in[0]),
        dlc_cpu_weight(e, op), dlc_cpu_relu_y(e, op));
}

/* (dy, x) */
void dlc_cpu_emit_dense_grad_weight(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_dense_backward_weight(n, %lld, %lld, a0, a1, r0);\n",
        (long long)dlc_cpu_numel(op->in[1]), (long long)dlc_cpu_numel(op->in[0]));
}
