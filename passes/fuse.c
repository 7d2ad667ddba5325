/* fuse.c — merges an op into the op that computes its operand, so that the
 * code generators compute both in one loop nest (or kernel) and the value
 * between them is never stored.  All patterns but the last two are an
 * attribute of the producer, which then defines the consumer's result under
 * its old name:
 *
 *   %c = conv2d(%x, @w, @b) {...}            %r = conv2d(%x, @w, @b) {..., relu=true}
 *   %r = relu(%c)                      =>
 *
 *   relu into the op before it: conv2d, dense, batchnorm, batchnorm_train
 *   (whose other results, the batch statistics, stay as they are) and add
 *   (the end of a residual block, an elementwise chain); sigmoid, tanh and
 *   leaky_relu into a conv2d or dense (sigmoid=true, tanh=true,
 *   leaky_relu=true with its slope, which must not be negative, since the
 *   gradient is then computed from the result), except where the pipeline
 *   feeds the GPU, whose kernels apply a ReLU only.  An op takes
 *   one activation at most.  The CPU code
 *   applies the ReLU to each sample's output right after its product, while
 *   it is in the caches (a dense layer's workers each to its own block of
 *   the output after its product; batchnorm in place after the op).
 *
 *   %g = maxpool_grad(%dy, %y) {...}         %d = maxpool_grad(%dy, %y) {..., relu_grad=true}
 *   %d = relu_grad(%g, %y)             =>
 *
 *   the backward pass of relu -> maxpool: the ReLU's gradient masks where y
 *   is not positive, and y is the very tensor maxpool_grad reads, so the
 *   mask costs one comparison at each window's maximum, the only place a
 *   gradient lands, instead of a pass over the whole gradient.  With the
 *   argmax (autodiff's maxpool_train for the CPU), the comparison moves to
 *   the forward pass: maxpool_train(y) {relu_grad=true} writes -1 for a
 *   window whose maximum is not positive, maxpool_grad_argmax skips it, and
 *   y has no reader left after the pooling.
 *
 *   %g = conv2d_grad_input(%dy, @w) {...}    %d = conv2d_grad_input(%dy, %y, @w) {..., relu_grad=true}
 *   %d = relu_grad(%g, %y)             =>
 *
 *   the same for the other ops that compute a ReLU's result's gradient:
 *   the input gradient of the next convolution or dense layer, dropout's
 *   gradient, a slice of concat's (GoogLeNet's branches), a gradient sum
 *   (add) and global average pooling's (the last ReLU of a ResNet).  y
 *   becomes their last tensor operand, and each writes y > 0 ? g : 0 where
 *   it writes g, while it is in the caches; the separate pass read g and y
 *   and wrote the result again.  LRN's (Caffe's AlexNet) reads y as its x
 *   already, as max pooling's does, and takes no operand more.  Not for a
 *   GPU target, whose kernels do not take y yet.
 *
 *   %c = concat(%a, %y)                      %c = concat(%a, %y)
 *   %s = slice(%dc) {begin=4}          =>    %d = slice(%dc, %c) {begin=4, relu_grad=true}
 *   %d = relu_grad(%s, %y)
 *
 *   a slice of concat's gradient reads the ReLU's result from the
 *   concatenation, where the same slice of it is y: GoogLeNet's branches
 *   then die at their concatenation, which the next block's gradients keep
 *   anyway, instead of living to the backward pass.  recompute has the
 *   slices read y again when a budget calls for it.
 *
 *   %c = conv2d(%x, @w, @b) {...}            %n = conv2d(%x, @w, @b, @n.weight, @n.bias,
 *   %n = batchnorm(%c, @n.weight, ...)  =>           @n.running_mean, @n.running_var)
 *                                                  {..., batchnorm=true, bn_eps=...}
 *
 *   an inference batchnorm folded into the convolution before it: the
 *   code multiplies each output channel by w / sqrt(running_var + eps) and
 *   adds the rest as its bias, in the convolution's epilogue.  The weights
 *   are not rewritten at compile time because training changes them; the
 *   per-channel scale and shift are computed at each call (a few operations
 *   per filter), and the epilogue costs one multiply-add per output value.
 *   A relu after the batchnorm then fuses as well (the epilogue is bias,
 *   batchnorm, relu).
 *
 * The last two go the other way: the consumer takes over the producer's
 * operands, at its own place, and the producer goes.
 *
 *   %s = add(%a, %b)                         %t = add(%a, %b, %c)
 *   %t = add(%s, %c)                   =>
 *
 *   a chain of adds, each the first term of the next (autodiff's sums of
 *   the gradients of a value read by several ops: GoogLeNet's blocks have
 *   four readers; a + b + c in a .dl file), becomes one add of all the
 *   terms, in their order, so the same bits: one pass that reads each term
 *   and writes the sum once, where the chain wrote and read back each
 *   partial sum, and no partial sum needs memory.  At the last add's
 *   place, where every term is defined; up to 16 terms (a GPU kernel's
 *   pointers).  The last add keeps its relu or relu_grad; the inner ones
 *   have none.  A weight update has no result:
 *
 *   %g = dense_grad_weight(%dy, %x)          dense_sgd_update(%dy, %x, %lr, @w, @w.momentum_buffer)
 *   sgd_update(%g, %lr, @w, @w.momentum_buffer)  =>   {momentum=..., weight_decay=...}
 *
 *   the gradient is accumulated straight into the momentum buffer (or,
 *   without momentum, with -lr into the weight) by the product that
 *   computes it, and is never stored, which takes a weight's size off the
 *   peak of the step.  Not with Nesterov momentum (its step needs the
 *   gradient and the buffer apart), and not for a GPU target, whose code
 *   generator has no kernel for it yet.
 *
 *   adam_update(dense_grad_weight(dy, x), lr, step, @w, @m, @v) likewise
 *   becomes dense_adam_update(dy, x, lr, step, @w, @m, @v): Adam needs
 *   each gradient element apart (for v), so the kernel computes the
 *   gradient a block of 128 x 128 at a time on the stack and updates that
 *   block right after; the whole gradient is never stored.
 *
 *   Neither applies to clipped gradients (the optimizer pass's clip_norm
 *   and clip_scale): the update reads clip_scale's result, and the weight
 *   gradient has clip_norm as a second reader, since the norm needs every
 *   gradient whole before any update.
 *
 * Each merge needs the producer's result to have no reader but the
 * consumer and not to be an output, and the producer not to have the
 * attribute already (nor a ReLU before a folded batchnorm).  The results
 * are those of the ops apart, up to float rounding (the batchnorm fold
 * reassociates; the others are the same bits).
 *
 * It runs after autodiff and optimizer (the C target's pipeline), so both
 * the inference network and the training step are fused; autodiff also
 * accepts relu=true (it differentiates through the ReLU first) and refuses
 * a folded batchnorm, which only inference networks have.
 *
 * Preconditions: the module verifies. */
#include "passes.h"

#include <string.h>

void dlc_fuse_count_uses(DlcModule *m, const DlcNetwork *net, DlcMap *uses) {
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

static void set_attr(DlcOp *op, DlcAttrName a) {
    dlc_attrs_at(op->kind, op->attrs, a)->b = true;
}

/* The op computing consumer's first operand, as its first result, when the
 * consumer is that value's only reader; NULL otherwise. */
static DlcOp *sole_producer(const DlcOp *consumer, const DlcMap *uses) {
    const DlcValue *x = consumer->in[0];
    if (x->kind != DLC_VAL_OP || x->result != 0)
        return NULL;
    return (intptr_t)dlc_map_get(uses, x->name) == 1 ? x->def : NULL;
}

/* relu after an op with a relu attribute, or another activation after a
 * conv2d or dense (not for a GPU target, whose kernels apply a ReLU only),
 * when the op has no activation yet.  The activation's own attributes (a
 * leaky ReLU's slope) go with it, by name; a leaky ReLU's slope must not be
 * negative, since the fused gradient is computed from the result. */
static bool fuse_activation(DlcOp *op, DlcOp *def, bool gpu) {
    if (!dlc_op_is_activation(op->kind))
        return false;
    bool conv_or_dense = def->kind == DLC_OP_CONV2D || def->kind == DLC_OP_DENSE;
    if (op->kind == DLC_OP_RELU) {
        if (!conv_or_dense && def->kind != DLC_OP_ADD && def->kind != DLC_OP_BATCHNORM &&
            def->kind != DLC_OP_BATCHNORM_TRAIN)
            return false;
    } else if (!conv_or_dense || gpu ||
               (op->kind == DLC_OP_LEAKY_RELU && !(dlc_attr_float(op, DLC_A_SLOPE) >= 0))) {
        return false;
    }
    if (dlc_op_fused_activation(def) != DLC_OP_COUNT)
        return false;
    set_attr(def, dlc_activation_attr(op->kind));
    const DlcOpInfo *info = dlc_op_info(op->kind);
    for (int i = 0; i < info->nattrs; i++)
        *dlc_attrs_at(def->kind, def->attrs, info->attrs[i].id) = op->attrs[i];
    return true;
}

/* The result of one of ops[0..nops) that is a concat whose slice is
 * exactly y (dlc_concat_operand_sliced); NULL when there is none. */
static DlcValue *concat_sliced_to(DlcOp *const *ops, int nops, const DlcOp *slice,
                                  const DlcValue *y) {
    for (int i = 0; i < nops; i++)
        if (ops[i]->kind == DLC_OP_CONCAT && dlc_concat_operand_sliced(ops[i], slice) == y)
            return ops[i]->out[0];
    return NULL;
}

/* relu_grad(def(...), y): maxpool_grad when y is the pooling's input, which
 * it reads already, and lrn_grad likewise (not for a GPU target); add,
 * slice, dropout_grad, dense_grad_input, conv2d_grad_input and
 * globalavgpool_grad (not for a GPU target, whose kernels do not take it
 * yet) with y as one more tensor operand, after their own.  A slice of
 * concat's gradient reads the concatenation (one of ops[0..nbefore), which
 * come before op) in place of y where y went into it, so that the branch's
 * result need not be kept for the backward pass: the concatenation is kept
 * anyway for the gradients of the ops that read it. */
static bool fuse_relu_grad(DlcModule *m, DlcOp *const *before, int nbefore, DlcOp *op,
                           DlcOp *def, bool gpu, const DlcMap *uses) {
    if (op->kind != DLC_OP_RELU_GRAD)
        return false;
    DlcValue *y = op->in[1];
    if (def->kind == DLC_OP_MAXPOOL_GRAD_ARGMAX) {
        /* the argmax's pooling writes -1 where the maximum is not positive */
        DlcValue *argmax = def->in[1];
        DlcOp *pool = argmax->kind == DLC_VAL_OP ? argmax->def : NULL;
        if (!pool || pool->kind != DLC_OP_MAXPOOL_TRAIN || pool->in[0] != y ||
            (intptr_t)dlc_map_get(uses, argmax->name) != 1 || dlc_op_relu_grad_mask(pool) >= 0)
            return false;
        set_attr(pool, DLC_A_RELU_GRAD);
        return true;
    }
    if (dlc_op_attr_slot(def->kind, DLC_A_RELU_GRAD) < 0 ||
        dlc_attr_true(def->kind, def->attrs, DLC_A_RELU_GRAD))
        return false;
    if (def->kind == DLC_OP_MAXPOOL_GRAD || def->kind == DLC_OP_LRN_GRAD) {
        if (def->in[1] != y || (gpu && def->kind == DLC_OP_LRN_GRAD))
            return false;
    } else if (gpu) {
        return false;
    } else {
        int ntensors = def->nin - def->nparams;
        DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(def->nin + 1));
        memcpy(in, def->in, sizeof *in * (size_t)ntensors);
        DlcValue *whole = def->kind == DLC_OP_SLICE ? concat_sliced_to(before, nbefore, def, y)
                                                    : NULL;
        in[ntensors] = whole ? whole : y;
        memcpy(in + ntensors + 1, def->in + ntensors, sizeof *in * (size_t)def->nparams);
        def->in = in;
        def->nin++;
    }
    set_attr(def, DLC_A_RELU_GRAD);
    return true;
}

/* The most terms a merged add takes: a GPU kernel has NV_MAX_PTRS (24)
 * pointer arguments, and chains longer than this are rare (GoogLeNet's
 * gradient sums have 4 terms). */
enum { MAX_SUM_TERMS = 16 };

/* add(add(a, b), c) => add(a, b, c): the outer add takes the inner one's
 * terms before its own (and keeps its attributes: relu, or relu_grad with
 * its mask last), at its own place, where c is defined; the inner add,
 * with neither attribute, goes.  The sum keeps its order, (a + b) + c, so
 * its bits.  Only an inner add that is the first term: add(c, add(a, b))
 * would reassociate. */
static bool fuse_sum(DlcModule *m, DlcOp *op, const DlcOp *def) {
    if (op->kind != DLC_OP_ADD || def->kind != DLC_OP_ADD || dlc_op_fused_relu(def) ||
        dlc_op_relu_grad_mask(def) >= 0)
        return false;
    int nterms = dlc_op_relu_grad_mask(op) >= 0 ? op->nin - 1 : op->nin;
    if (def->nin + nterms - 1 > MAX_SUM_TERMS)
        return false;
    DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(def->nin + op->nin - 1));
    memcpy(in, def->in, sizeof *in * (size_t)def->nin);
    memcpy(in + def->nin, op->in + 1, sizeof *in * (size_t)(op->nin - 1));
    op->in = in;
    op->nin += def->nin - 1;
    return true;
}

/* batchnorm(conv2d(x)): the batchnorm's parameters join the convolution's */
static bool fold_batchnorm(DlcModule *m, DlcOp *op, DlcOp *def) {
    if (op->kind != DLC_OP_BATCHNORM || def->kind != DLC_OP_CONV2D)
        return false;
    if (dlc_op_fused_activation(def) != DLC_OP_COUNT || dlc_op_folded_batchnorm(def) >= 0 ||
        dlc_attr_bool(def, DLC_A_RESIDUAL)) /* batchnorm(conv + r) is no fold */
        return false;
    DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(def->nin + 4));
    memcpy(in, def->in, sizeof *in * (size_t)def->nin);
    memcpy(in + def->nin, op->in + 1, sizeof *in * 4);
    def->in = in;
    def->nin += 4;
    def->nparams += 4;
    set_attr(def, DLC_A_BATCHNORM);
    dlc_attrs_at(def->kind, def->attrs, DLC_A_BN_EPS)->f = dlc_attr_float(op, DLC_A_EPS);
    if (dlc_op_fused_relu(op))
        set_attr(def, DLC_A_RELU);
    return true;
}

/* sgd_update(dense_grad_weight(dy, x), lr, @w[, @buf]) without Nesterov:
 * op becomes dense_sgd_update(dy, x, lr, @w[, @buf]); adam_update(
 * dense_grad_weight(dy, x), lr, step, @w, @m, @v) becomes
 * dense_adam_update(dy, x, lr, step, @w, @m, @v) */
static bool fuse_weight_update(DlcModule *m, DlcOp *op, const DlcOp *def) {
    bool sgd = op->kind == DLC_OP_SGD_UPDATE;
    /* a gradient over steps (per_step: a recurrent layer's, a dense layer's
       on a sequence) is stored: the fused kernels sum over the batch alone */
    if ((!sgd && op->kind != DLC_OP_ADAM_UPDATE) || def->kind != DLC_OP_DENSE_GRAD_WEIGHT ||
        dlc_attr_true(def->kind, def->attrs, DLC_A_PER_STEP) ||
        (sgd && dlc_attr_true(op->kind, op->attrs, DLC_A_NESTEROV)))
        return false;
    DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(op->nin + 1));
    in[0] = def->in[0];
    in[1] = def->in[1];
    memcpy(in + 2, op->in + 1, sizeof *in * (size_t)(op->nin - 1));
    DlcOpKind kind = sgd ? DLC_OP_DENSE_SGD_UPDATE : DLC_OP_DENSE_ADAM_UPDATE;
    DlcAttr attrs[DLC_MAX_ATTRS]; /* the attributes are the update's */
    dlc_attrs_like(kind, op->kind, op->attrs, attrs);
    dlc_op_fill_defaults(kind, attrs);
    op->kind = kind;
    op->in = in;
    op->nin++;
    memcpy(op->attrs, attrs, sizeof attrs);
    return true;
}

static bool removed(DlcOp *const *gone, int ngone, const DlcOp *op) {
    for (int k = 0; k < ngone; k++)
        if (gone[k] == op)
            return true;
    return false;
}

static void fuse_network(DlcModule *m, DlcNetwork *net, bool gpu) {
    DlcMap uses;
    dlc_fuse_count_uses(m, net, &uses);
    DlcOp **gone = dlc_arena_alloc(&m->arena, sizeof *gone * (size_t)(net->nops + 1));
    int n = 0, ngone = 0;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *op = net->ops[i];
        DlcOp *def = op->nin ? sole_producer(op, &uses) : NULL;
        if (def && (fuse_sum(m, op, def) || (!gpu && fuse_weight_update(m, op, def)))) {
            gone[ngone++] = def; /* the consumer takes the producer's place */
            net->ops[n++] = op;
            continue;
        }
        if (!def || !(fuse_activation(op, def, gpu) ||
                      fuse_relu_grad(m, net->ops, n, op, def, gpu, &uses) ||
                      fold_batchnorm(m, op, def))) {
            net->ops[n++] = op;
            continue;
        }
        /* the producer now defines the consumer's result, and the consumer goes */
        DlcValue *y = op->out[0];
        def->out[0] = y;
        y->def = def;
        y->result = 0;
    }
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (!removed(gone, ngone, net->ops[i]))
            net->ops[kept++] = net->ops[i];
    if (kept == net->nops)
        return;
    net->nops = kept;
    dlc_network_reindex(m, net);
}

bool dlc_pass_fuse(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)ctx;
    for (int i = 0; i < m->nnetworks; i++)
        fuse_network(m, m->networks[i], opt && opt->gpu);
    return true;
}
