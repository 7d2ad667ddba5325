/* emit_norm.c — the C of the normalizations: batchnorm (inference, with
 * its running statistics), its training form and the normalization the
 * fuse pass splits from it, their gradients; local response normalization
 * (lrn) and softmax, with theirs. */
#include "emit.h"

#define put dlc_cpu_put

/* A batchnorm's channels c and positions per channel hw, of x. */
static void channels(const DlcOp *op, long long *c, long long *hw) {
    const DlcValue *x = op->in[0];
    *c = (long long)x->type.dims[0];
    *hw = (long long)(dlc_cpu_numel(x) / x->type.dims[0]);
}

/* A ReLU fused into a batchnorm (relu=true), over its result. */
static void put_fused_relu(Out *o, const DlcOp *op, long long c, long long hw) {
    if (dlc_op_fused_relu(op))
        put(o, "    dlrt_relu_forward(n * %lld, r0, r0);\n", c * hw);
}

/* (x, @weight, @bias, @running_mean, @running_var) */
void dlc_cpu_emit_batchnorm(Emit *e, Out *o, const DlcOp *op) {
    long long c, hw;
    channels(op, &c, &hw);
    put(o, "    dlrt_batchnorm_forward_eval(n, %lld, %lld, %s, a0, a1, a2, a3, a4, r0);\n", c, hw,
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_EPS)));
    put_fused_relu(o, op, c, hw);
}

/* (x, @weight, @bias, @running_mean, @running_var) -> (y, mean, invstd),
 * updating the running statistics in place */
void dlc_cpu_emit_batchnorm_train(Emit *e, Out *o, const DlcOp *op) {
    long long c, hw;
    channels(op, &c, &hw);
    e->written = 2;
    put(o, "    dlrt_batchnorm_forward_train(n, %lld, %lld, %s, %s, a0, a1, a2, a3, a4, r0, r1, "
           "r2);\n", c, hw, dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_EPS)),
        dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_MOMENTUM)));
    put_fused_relu(o, op, c, hw);
}

/* (x, mean, invstd, @weight, @bias) */
void dlc_cpu_emit_batchnorm_normalize(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    long long c, hw;
    channels(op, &c, &hw);
    put(o, "    dlrt_batchnorm_normalize(n, %lld, %lld, a0, a1, a2, a3, a4, r0);\n", c, hw);
    put_fused_relu(o, op, c, hw);
}

/* (dy, x, mean, invstd, @weight) */
void dlc_cpu_emit_batchnorm_grad_input(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    long long c, hw;
    channels(op, &c, &hw);
    put(o, "    dlrt_batchnorm_backward_input(n, %lld, %lld, a0, a1, a2, a3, a4, r0);\n", c, hw);
}

/* (dy, x, mean, invstd) */
void dlc_cpu_emit_batchnorm_grad_weight(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    long long c, hw;
    channels(op, &c, &hw);
    put(o, "    dlrt_batchnorm_backward_weight(n, %lld, %lld, a0, a1, a2, a3, r0);\n", c, hw);
}

/* The DlrtLrn `lrn` of an lrn or lrn_grad op. */
static void put_lrn(Out *o, const DlcOp *op) {
    const DlcValue *y = op->out[0];
    const DlcType *t = &y->type;
    put(o, "    static const DlrtLrn lrn = {.c = %lld, .hw = %lld, .size = %lld, .alpha = %.17g, "
           ".beta = %.17g, .k = %.17g%s};\n", (long long)t->dims[0],
        (long long)(dlc_cpu_numel(y) / t->dims[0]), (long long)dlc_attr_int(op, DLC_A_SIZE),
        dlc_attr_float(op, DLC_A_ALPHA), dlc_attr_float(op, DLC_A_BETA), dlc_attr_float(op, DLC_A_K),
        dlc_op_relu_grad_mask(op) >= 0 ? ", .relu_grad = true" : "");
}

void dlc_cpu_emit_lrn(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_lrn(o, op);
    put(o, "    dlrt_lrn_forward(&lrn, n, a0, r0);\n");
}

/* (dy, x, y) */
void dlc_cpu_emit_lrn_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_lrn(o, op);
    put(o, "    dlrt_lrn_backward(&lrn, n, a0, a1, a2, r0);\n");
}

void dlc_cpu_emit_softmax(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcType *x = &op->in[0]->type;
    int64_t before, after;
    int axis = dlc_cpu_axis(op, x, &before, &after);
    put(o, "    dlrt_softmax_forward(n * %lld, %lld, %lld, a0, r0);\n", (long long)before,
        (long long)x->dims[axis], (long long)after);
}

/* (dy, y) */
void dlc_cpu_emit_softmax_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcType *x = &op->in[0]->type;
    int64_t before, after;
    int axis = dlc_cpu_axis(op, x, &before, &after);
    put(o, "    dlrt_softmax_backward(n * %lld, %lld, %lld, a0, a1, r0);\n", (long long)before,
        (long long)x->dims[axis], (long long)after);
}
