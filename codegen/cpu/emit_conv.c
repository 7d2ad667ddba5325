/* emit_conv.c — the C of the convolutions: conv2d (with a fused activation
 * or a folded batchnorm), its input and weight gradients, and bias_grad,
 * the bias gradient of conv2d and dense alike.
 *
 * A convolution calls libdlrt's (im2col and BLAS), described by a DlrtConv,
 * and takes scratch for its workers.  The convolutions the tile pass gave
 * a register block (vector > 0) are dlc's own loops instead, which cpu.c
 * asks direct_conv.c for. */
#include "emit.h"

#define put dlc_cpu_put

/* The DlrtConv `cv` of convolution op (forward input x, output y: the
 * images all three convolutions read or write), and the scratch it says
 * its function takes. */
static void put_conv(Emit *e, Out *o, const DlcOp *op) {
    const DlcType *x, *y;
    dlc_conv_images(op, &x, &y);
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD), *d = dlc_attr_pair(op, DLC_A_DILATION);
    const char *cv = dlc_arena_printf(
        e->arena,
        "    static const DlrtConv cv = {.c = %lld, .h = %lld, .w = %lld, .f = %lld, "
        ".oh = %lld, .ow = %lld,\n        .kh = %lld, .kw = %lld, .sh = %lld, .sw = %lld, "
        ".ph = %lld, .pw = %lld, .dh = %lld, .dw = %lld, .groups = %lld,\n"
        "        .act = %s%s};\n",
        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
        (long long)y->dims[0], (long long)y->dims[1], (long long)y->dims[2], (long long)k[0],
        (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
        (long long)d[0], (long long)d[1], (long long)dlc_attr_int(op, DLC_A_GROUPS),
        dlc_cpu_activation(e, op),
        dlc_cpu_activation_param_name(op)
            ? dlc_arena_printf(e->arena, ", .%s = %s", dlc_cpu_activation_param_name(op),
                               dlc_cpu_activation_param(e, op))
            : "");
    put(o, "%s", cv);
    e->scratch = dlc_arena_printf(e->arena,
                                  "%s    int64_t w = dlrt_conv2d_workspace(&cv, threads);\n", cv);
}

void dlc_cpu_emit_conv2d(Emit *e, Out *o, const DlcOp *op) {
    dlc_cpu_put_batchnorm_fold(e, o, op);
    put_conv(e, o, op);
    if (dlc_op_folded_batchnorm(op) >= 0)
        put(o, "    dlrt_conv2d_forward_folded(&cv, n, a0, a1, bn_scale, bn_shift, r0, work, "
               "threads);\n");
    else
        put(o, "    dlrt_conv2d_forward(&cv, n, a0, a1, %s, r0, work, threads);\n",
            dlc_cpu_bias(e, op));
}

void dlc_cpu_emit_conv2d_grad_input(Emit *e, Out *o, const DlcOp *op) {
    put_conv(e, o, op);
    put(o, "    dlrt_conv2d_backward_input(&cv, n, a0, %s, %s, r0, work, threads);\n",
        dlc_cpu_weight(e, op), dlc_cpu_relu_y(e, op));
}

void dlc_cpu_emit_conv2d_grad_weight(Emit *e, Out *o, const DlcOp *op) {
    put_conv(e, o, op);
    put(o, "    dlrt_conv2d_backward_weight(&cv, n, a0, a1, r0, work, threads);\n");
}

/* (dy): the sum over all but the channels; per_step=true (dy [T,C]), the
 * sum of n * T rows of C */
void dlc_cpu_emit_bias_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcValue *dy = op->in[0], *db = op->out[0];
    if (dlc_attr_bool(op, DLC_A_PER_STEP))
        put(o, "    dlrt_bias_backward(n * %lld, %lld, 1, a0, r0);\n", (long long)dy->type.dims[0],
            (long long)db->type.dims[0]);
    else
        put(o, "    dlrt_bias_backward(n, %lld, %lld, a0, r0);\n", (long long)db->type.dims[0],
            (long long)(dlc_cpu_numel(dy) / db->type.dims[0]));
}
