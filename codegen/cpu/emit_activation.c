/* emit_activation.c — the C of the activations, elementwise over the
 * batch: relu, sigmoid, tanh, leaky_relu, elu and their gradients, each one
 * call of libdlrt's kernel (dlrt_<name>_forward, dlrt_<name>_backward).
 * Fused into a convolution or a dense layer, an activation is that op's
 * (emit_conv.c, emit_dense.c, direct_conv.c's epilogue). */
#include "emit.h"

#define put dlc_cpu_put

/* (x) -> y: dlrt_<f>_forward over every element. */
static void put_forward(Out *o, const DlcOp *op, const char *f) {
    const DlcValue *x = op->in[0];
    put(o, "    dlrt_%s_forward(%s%lld, a0, r0);\n", f, dlc_cpu_count(x),
        (long long)dlc_cpu_numel(x));
}

/* (dy, y) -> dx (leaky_relu_grad: (dy, x)): dlrt_<f>_backward. */
static void put_backward(Out *o, const DlcOp *op, const char *f) {
    const DlcValue *dy = op->in[0];
    put(o, "    dlrt_%s_backward(%s%lld, a0, a1, r0);\n", f, dlc_cpu_count(dy),
        (long long)dlc_cpu_numel(dy));
}

void dlc_cpu_emit_relu(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_forward(o, op, "relu");
}

void dlc_cpu_emit_sigmoid(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_forward(o, op, "sigmoid");
}

void dlc_cpu_emit_tanh(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_forward(o, op, "tanh");
}

void dlc_cpu_emit_leaky_relu(Emit *e, Out *o, const DlcOp *op) {
    const DlcValue *x = op->in[0];
    put(o, "    dlrt_leaky_relu_forward(%s%lld, %s, a0, r0);\n", dlc_cpu_count(x),
        (long long)dlc_cpu_numel(x), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_SLOPE)));
}

void dlc_cpu_emit_elu(Emit *e, Out *o, const DlcOp *op) {
    const DlcValue *x = op->in[0];
    put(o, "    dlrt_elu_forward(%s%lld, %s, a0, r0);\n", dlc_cpu_count(x),
        (long long)dlc_cpu_numel(x), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_ALPHA)));
}

void dlc_cpu_emit_relu_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_backward(o, op, "relu");
}

void dlc_cpu_emit_sigmoid_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_backward(o, op, "sigmoid");
}

void dlc_cpu_emit_tanh_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_backward(o, op, "tanh");
}

void dlc_cpu_emit_leaky_relu_grad(Emit *e, Out *o, const DlcOp *op) {
    const DlcValue *dy = op->in[0];
    put(o, "    dlrt_leaky_relu_backward(%s%lld, %s, a0, a1, r0);\n", dlc_cpu_count(dy),
        (long long)dlc_cpu_numel(dy), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_SLOPE)));
}

void dlc_cpu_emit_elu_grad(Emit *e, Out *o, const DlcOp *op) {
    const DlcValue *dy = op->in[0];
    put(o, "    dlrt_elu_backward(%s%lld, %s, a0, a1, r0);\n", dlc_cpu_count(dy),
        (long long)dlc_cpu_numel(dy), dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_ALPHA)));
}
