/* fuse.c — merges a ReLU into the convolution, dense layer or batch
 * normalization before it.
 *
 *   %c = conv2d(%x, @w, @b) {...}            %r = conv2d(%x, @w, @b) {..., relu=true}
 *   %r = relu(%c)                      =>
 *
 * when the relu is the only reader of %c (and %c is not an output); the
 * same for dense, batchnorm and batchnorm_train (whose other results, the
 * batch statistics, stay as they are).  The fused op computes the same
 * values, but the CPU code applies the ReLU to each sample's output right
 * after its product, while it is in the caches, instead of in a second
 * pass over the whole batch (dense and batchnorm apply it in place after
 * the op); and %c, one activation the size of the layer's output, no
 * longer exists.  The backward pass is unchanged: relu_grad reads the
 * ReLU's result, which the fused op still defines under its old name, and
 * batchnorm's gradients read its input and statistics, not its result.
 *
 * It runs after autodiff and optimizer (the C target's pipeline), so both
 * the inference network and the training step are fused; autodiff also
 * accepts fused ops (it differentiates through the ReLU first).
 *
 * Preconditions: the module verifies. */
#include "passes.h"

/* How many ops (and outputs) read each value, by name. */
static void count_uses(DlcModule *m, const DlcNetwork *net, DlcMap *uses) {
    dlc_map_init(uses, &m->arena);
    for (int i = 0; i <= net->nops; i++) {
        int n = i < net->nops ? net->ops[i]->nin : net->noutputs;
        for (int j = 0; j < n; j++) {
            const DlcValue *v = i < net->nops ? net->ops[i]->in[j] : net->outputs[j];
            intptr_t k = (intptr_t)dlc_map_get(uses, v->name);
            dlc_map_put(uses, v->name, (void *)(k + 1));
        }
    }
}

/* The op a relu can merge into: a conv2d, dense or batchnorm that has no
 * ReLU yet and whose (first) result only the relu reads; NULL otherwise. */
static DlcOp *fusable_producer(const DlcOp *relu, const DlcMap *uses) {
    const DlcValue *x = relu->in[0];
    DlcOp *def = x->kind == DLC_VAL_OP && x->result == 0 ? x->def : NULL;
    if (!def || (def->kind != DLC_OP_CONV2D && def->kind != DLC_OP_DENSE &&
                 def->kind != DLC_OP_BATCHNORM && def->kind != DLC_OP_BATCHNORM_TRAIN))
        return NULL;
    if (dlc_op_fused_relu(def))
        return NULL;
    return (intptr_t)dlc_map_get(uses, x->name) == 1 ? def : NULL;
}

static void fuse_network(DlcModule *m, DlcNetwork *net) {
    DlcMap uses;
    count_uses(m, net, &uses);
    int n = 0;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *op = net->ops[i];
        DlcOp *def = op->kind == DLC_OP_RELU ? fusable_producer(op, &uses) : NULL;
        if (!def) {
            net->ops[n++] = op;
            continue;
        }
        /* the producer now defines the relu's result, and the relu goes */
        def->attrs[dlc_op_attr_index(def->kind, "relu")].b = true;
        DlcValue *y = op->out[0];
        def->out[0] = y;
        y->def = def;
        y->result = 0;
    }
    if (n == net->nops)
        return;
    net->nops = n;
    dlc_network_reindex(m, net);
}

bool dlc_pass_fuse(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)opt;
    (void)ctx;
    for (int i = 0; i < m->nnetworks; i++)
        fuse_network(m, m->networks[i]);
    return true;
}
