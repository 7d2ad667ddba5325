/* emit_pool.c — the C of the pooling ops over [C, H, W]: maxpool, avgpool
 * and globalavgpool, maxpool's training form (which keeps each window's
 * argmax) and the gradients of all four.  A window's geometry goes to
 * libdlrt as a DlrtPool. */
#include "emit.h"

#define put dlc_cpu_put

/* The DlrtPool `pool` of a pooling op from x to y (for a gradient, the
 * forward op's input and output). */
static void put_pool(Out *o, const DlcOp *op, const DlcType *x, const DlcType *y) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD);
    int band = dlc_op_attr_slot(op->kind, DLC_A_BAND); /* maxpool's, the tile pass's choice */
    put(o, "    static const DlrtPool pool = {.c = %lld, .h = %lld, .w = %lld, .oh = %lld, "
           ".ow = %lld,\n        .kh = %lld, .kw = %lld, .sh = %lld, .sw = %lld, .ph = %lld, "
           ".pw = %lld, .count_include_pad = %s%s",
        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
        (long long)y->dims[1], (long long)y->dims[2], (long long)k[0], (long long)k[1],
        (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
        dlc_attr_true(op->kind, op->attrs, DLC_A_COUNT_INCLUDE_PAD) ? "true" : "false",
        dlc_attr_true(op->kind, op->attrs, DLC_A_RELU_GRAD) ? ", .relu_grad = true" : "");
    if (band >= 0 && op->attrs[band].i)
        put(o, ", .band = %lld", (long long)op->attrs[band].i);
    put(o, "};\n");
}

void dlc_cpu_emit_maxpool(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    put(o, "    dlrt_maxpool_forward(&pool, n, a0, r0);\n");
}

void dlc_cpu_emit_avgpool(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    put(o, "    dlrt_avgpool_forward(&pool, n, a0, r0);\n");
}

void dlc_cpu_emit_globalavgpool(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const int64_t *x = op->in[0]->type.dims;
    put(o, "    dlrt_globalavgpool_forward(n, %lld, %lld, a0, r0);\n", (long long)x[0],
        (long long)(x[1] * x[2]));
}

/* (x) -> (y, argmax) */
void dlc_cpu_emit_maxpool_train(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    put(o, "    dlrt_maxpool_forward_argmax(&pool, n, a0, r0, r1);\n");
}

/* (dy, x) */
void dlc_cpu_emit_maxpool_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[1]->type, &op->in[0]->type);
    put(o, "    dlrt_maxpool_backward(&pool, n, a0, a1, r0);\n");
}

/* (dy, argmax) */
void dlc_cpu_emit_maxpool_grad_argmax(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const int64_t *dx = op->out[0]->type.dims, *dy = op->in[0]->type.dims;
    put(o, "    dlrt_maxpool_backward_argmax(n * %lld, %lld, %lld, a0, a1, r0);\n",
        (long long)dx[0], (long long)(dx[1] * dx[2]), (long long)(dy[1] * dy[2]));
}

/* (dy) */
void dlc_cpu_emit_avgpool_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->out[0]->type, &op->in[0]->type);
    put(o, "    dlrt_avgpool_backward(&pool, n, a0, r0);\n");
}

/* (dy), or (dy, y) with a fused ReLU gradient */
void dlc_cpu_emit_globalavgpool_grad(Emit *e, Out *o, const DlcOp *op) {
    const int64_t *dx = op->out[0]->type.dims;
    put(o, "    dlrt_globalavgpool_backward(n, %lld, %lld, a0, %s, r0);\n", (long long)dx[0],
        (long long)(dx[1] * dx[2]), dlc_cpu_relu_y(e, op));
}
