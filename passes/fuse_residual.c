/* fuse_residual.c — merges a residual addition into the blocked
 * convolution that computes one of its terms, which then adds the other
 * term in its epilogue, after the bias or folded batchnorm and before the
 * ReLU:
 *
 *   %c = conv2d(%x, @w, ...) {..., batchnorm=true, layout=16}      %s = conv2d(%x, %r, @w, ...)
 *   %s = add(%c, %r) {relu=true, layout=16}                  =>          {..., batchnorm=true, relu=true,
 *                                                                         layout=16, residual=true}
 *
 * Why: the end of every ResNet block is such an add, and apart it is a
 * pass of its own over three tensors (both terms read, the sum written)
 * while the convolution's result is still in the caches, or no longer is;
 * fused, the term is read once into the register the convolution is about
 * to store, and the convolution's result is never stored at all (ONNX
 * Runtime's NCHWc "Sum" fusion).  ResNet-50's layer1 spends 0.87 ms on its
 * adds at batch 1.
 *
 * The choice: an add of exactly two blocked terms, one of which is the
 * result of a blocked conv2d (layout=B, the add's) with no activation of
 * its own (relu?(act(conv) + r) is not act(conv + r)), read by nothing
 * else and not returned by the network; the other term, r, must be
 * defined before that convolution in execution order, since the
 * convolution reads it where it stands.  Where both terms qualify, the
 * later convolution takes the sum: the earlier one's result is then ready
 * as its residual.  The add's fused ReLU moves into the convolution.  The
 * result is the add's, under its name, defined by the convolution at the
 * convolution's place; the add goes.  The bits may differ from the ops
 * apart by the rounding of one addition: the term is added to the scaled
 * and shifted sum before it is stored, where the add read it back.
 *
 * Only the inference network and only the CPU's blocked kernel
 * (codegen/cpu/blocked_conv.c) take a residual: autodiff and the GPU
 * refuse residual=true, and the shape rule wants a blocked layout.
 *
 * Preconditions: the module verifies; runs after fuse (the ReLU fused into
 * the add, the batchnorm folded into the convolution) and layout (which
 * sets the blocked layouts), before tile and plan_memory, which see the
 * residual as the convolution's second tensor operand. */
#include <stdint.h>
#include <string.h>

#include "passes.h"

/* Where v is defined in execution order: its op's index, or -1 for an
 * input or parameter (ready before every op). */
static int defined_at(const DlcMap *at, const DlcValue *v) {
    return v->kind == DLC_VAL_OP ? (int)(intptr_t)dlc_map_get(at, v->name) - 1 : -1;
}

/* The convolution that can take add's term k with the other as its
 * residual, or NULL; its index in *conv_at. */
static DlcOp *taker(const DlcOp *add, int k, const DlcMap *uses, const DlcMap *at,
                    int *conv_at) {
    const DlcValue *c = add->in[k], *r = add->in[1 - k];
    if (c->kind != DLC_VAL_OP || c == r)
        return NULL;
    DlcOp *conv = c->def;
    if (conv->kind != DLC_OP_CONV2D || conv->nout != 1 ||
        dlc_attr_int(conv, DLC_A_LAYOUT) != dlc_attr_int(add, DLC_A_LAYOUT) ||
        dlc_attr_bool(conv, DLC_A_RESIDUAL) || dlc_op_fused_activation(conv) != DLC_OP_COUNT ||
        (intptr_t)dlc_map_get(uses, c->name) != 1 || dlc_value_layout(r) != dlc_value_layout(c))
        return NULL;
    *conv_at = defined_at(at, c);
    return defined_at(at, r) < *conv_at ? conv : NULL;
}

static void fuse_network(DlcModule *m, DlcNetwork *net) {
    DlcMap uses, at; /* value name -> readers; -> its op's index + 1 */
    dlc_fuse_count_uses(m, net, &uses); /* the outputs count as readers */
    dlc_map_init(&at, &m->arena);
    for (int i = 0; i < net->nops; i++)
        for (int r = 0; r < net->ops[i]->nout; r++)
            dlc_map_put(&at, net->ops[i]->out[r]->name, (void *)(intptr_t)(i + 1));
    int n = 0;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *add = net->ops[i];
        net->ops[n++] = add;
        if (add->kind != DLC_OP_ADD || add->nin != 2 || dlc_attr_int(add, DLC_A_LAYOUT) == 0 ||
            dlc_op_relu_grad_mask(add) >= 0)
            continue;
        int at0 = -1, at1 = -1;
        DlcOp *c0 = taker(add, 0, &uses, &at, &at0), *c1 = taker(add, 1, &uses, &at, &at1);
        int k = c1 && (!c0 || at1 > at0) ? 1 : 0; /* the later convolution */
        DlcOp *conv = k ? c1 : c0;
        if (!conv)
            continue;
        /* the residual after x, before the parameters */
        DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(conv->nin + 1));
        in[0] = conv->in[0];
        in[1] = add->in[1 - k];
        memcpy(in + 2, conv->in + 1, sizeof *in * (size_t)(conv->nin - 1));
        conv->in = in;
        conv->nin++;
        dlc_attrs_at(conv->kind, conv->attrs, DLC_A_RESIDUAL)->b = true;
        if (dlc_op_fused_relu(add))
            dlc_attrs_at(conv->kind, conv->attrs, DLC_A_RELU)->b = true;
        /* the convolution now defines the sum, under its name */
        DlcValue *y = add->out[0];
        conv->out[0] = y;
        y->def = conv;
        y->result = 0;
        n--;
    }
    if (n == net->nops)
        return;
    net->nops = n;
    dlc_network_reindex(m, net);
}

bool dlc_pass_fuse_residual(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)ctx;
    if (opt && opt->gpu)
        return true; /* the GPU's kernels take no residual */
    for (int i = 0; i < m->nnetworks; i++)
        if (!dlc_is_derived_network(m->networks[i]->name))
            fuse_network(m, m->networks[i]);
    return true;
}
