/* autodiff.c — reverse-mode differentiation: the training step as IR.
 *
 * For each network with a train section, builds the network NAME.train: the
 * network's inputs plus the labels (or targets) of its loss, its parameters,
 * its forward ops, the loss the train section names, then the backward
 * graph: for every op on a path from a trainable parameter to the loss, in
 * reverse order, the ops of its vector-Jacobian product (vjp() below, one
 * case per op kind).  A value used twice gets the sum of its gradients.
 * Each trainable parameter's gradient ends in a param_grad(%g, @p) op, which
 * the optimizer pass turns into the weight update.  Gradients are ordinary
 * values of ordinary ops, so later passes (fusion, memory planning) see the
 * whole step.  The inference network is left as it is.
 *
 * The forward values the backward graph reads (a relu's result, a conv's
 * input) are exactly the operands of gradient ops that are not gradients
 * themselves; they must stay alive until then, which memory planning reads
 * off the IR.
 *
 * Preconditions: the module verifies.  A network to train returns one value:
 * the prediction, which the train section's loss (cross_entropy by default)
 * compares with a new input, or a loss the network computes itself.
 *
 * batchnorm and dropout behave differently in training: the forward copy
 * uses batchnorm_train (batch statistics, returned for the backward pass,
 * and the running statistics updated) and dropout_train (a random mask,
 * returned), whose extra results are named after the op's value:
 * %bn.mean, %bn.invstd, %drop.mask.  A maxpool that alone reads its input
 * becomes maxpool_train, which also returns its windows' maxima's indices,
 * %pool.argmax, for maxpool_grad_argmax (not when the GPU code generator
 * reads the result: it has no kernel for them). */
#include "passes.h"

#include <string.h>

typedef struct Autodiff {
    DlcCtx *ctx;
    DlcModule *m;
    DlcNetwork *net;   /* NAME.train, being built */
    DlcMap grads;      /* value name -> its gradient (DlcValue *) so far */
    DlcMap needs;      /* value name -> (void*)1 when it depends on a trainable param */
    bool gpu;          /* the GPU code generator reads the result: no maxpool_train */
    bool ok;
} Autodiff;

/* The same value in the train network (forward values keep their names). */
static DlcValue *twin(Autodiff *ad, const DlcValue *v) {
    DlcValue *t = dlc_map_get(&ad->net->names, v->name);
    if (!t)
        dlc_unreachable("autodiff: %s has no twin", v->name);
    return t;
}

/* Appends a one-result op; attrs may be NULL. */
static DlcValue *emit(Autodiff *ad, DlcOpKind kind, DlcValue **in, int nin, int nparams,
                      const DlcAttr *attrs, const DlcType *type, const char *base, DlcLoc loc) {
    DlcAttr filled[DLC_MAX_ATTRS];
    memset(filled, 0, sizeof filled);
    if (attrs)
        memcpy(filled, attrs, sizeof filled);
    if (dlc_op_fill_defaults(kind, filled) >= 0)
        dlc_unreachable("autodiff: %s is missing an attribute", dlc_op_info(kind)->name);
    const char *name = dlc_network_unique_name(ad->m, ad->net, base);
    DlcOp *op = dlc_network_add_op(ad->m, ad->net, kind, in, nin, nparams, filled, type,
                                   &name, type ? 1 : 0, loc);
    return op && type ? op->out[0] : NULL;
}

/* The attributes of `from` that `kind` also has (dlc_attrs_like): a tile
 * written in IR text for a forward convolution is not one for its
 * gradients (the tile pass chooses theirs). */
static void attrs_like(DlcOpKind kind, const DlcOp *from, DlcAttr *out) {
    dlc_attrs_like(kind, from->kind, from->attrs, out);
}

static const char *grad_name(Autodiff *ad, const DlcValue *v) {
    return dlc_arena_printf(&ad->m->arena, "%s.grad", v->name);
}

/* Adds g to the gradient of v (a value of the train network). */
static void accumulate(Autodiff *ad, DlcValue *v, DlcValue *g, DlcLoc loc) {
    DlcValue *old = dlc_map_get(&ad->grads, v->name);
    if (old)
        g = emit(ad, DLC_OP_ADD, (DlcValue *[]){old, g}, 2, 0, NULL, &g->type,
                 grad_name(ad, v), loc);
    dlc_map_put(&ad->grads, v->name, g);
}

static bool needs(Autodiff *ad, const DlcValue *v) {
    return dlc_map_get(&ad->needs, v->name) != NULL;
}

/* dy through the activation fused into op (relu=true, sigmoid=true,
 * tanh=true or leaky_relu=true, as the fuse pass or a user writes it),
 * which comes after the op proper; dy itself without one.  Each gradient
 * reads the op's result. */
static DlcValue *through_fused_activation(Autodiff *ad, const DlcOp *op, DlcValue *dy) {
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act == DLC_OP_COUNT)
        return dy;
    DlcOpKind grad = act == DLC_OP_RELU      ? DLC_OP_RELU_GRAD
                     : act == DLC_OP_SIGMOID ? DLC_OP_SIGMOID_GRAD
                     : act == DLC_OP_TANH    ? DLC_OP_TANH_GRAD
                                             : DLC_OP_LEAKY_RELU_GRAD;
    DlcValue *y = op->out[0];
    /* leaky_relu_grad from y, not x: the verifier allows no negative
       slope, so y > 0 exactly where x > 0 */
    DlcAttr attrs[DLC_MAX_ATTRS];
    attrs_like(grad, op, attrs); /* the slope, for leaky_relu_grad */
    return emit(ad, grad, (DlcValue *[]){dy, y}, 2, 0, attrs, &y->type,
                dlc_arena_printf(&ad->m->arena, "%s.%s", y->name, dlc_op_info(grad)->name),
                op->loc);
}

/* The vector-Jacobian product of op (of the train network), whose result's
 * gradient is dy: adds the gradients of its operands that need one. */
static void vjp(Autodiff *ad, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0], *y = op->out[0];
    DlcAttr attrs[DLC_MAX_ATTRS];
    DlcLoc loc = op->loc;
    if (dlc_op_folded_batchnorm(op) >= 0) {
        /* the folded batchnorm normalizes with its running statistics: an
         * inference form, which training must not use */
        dlc_error(ad->ctx, loc, "autodiff: conv2d with batchnorm=true (a batchnorm folded in "
                  "for inference) cannot be trained; write conv2d(...) -> batchnorm");
        ad->ok = false;
        return;
    }
    if (dlc_op_relu_grad_mask(op) >= 0) {
        /* a gradient op's form (the fuse pass's, after autodiff) */
        dlc_error(ad->ctx, loc, "autodiff: %s with relu_grad=true (a ReLU's gradient fused in) "
                  "cannot be differentiated", dlc_op_info(op->kind)->name);
        ad->ok = false;
        return;
    }
    dy = through_fused_activation(ad, op, dy);
    switch (op->kind) {
    case DLC_OP_CONV2D:
    case DLC_OP_DENSE: {
        bool conv = op->kind == DLC_OP_CONV2D;
        DlcValue *w = op->in[1];
        if (needs(ad, x)) {
            DlcOpKind k = conv ? DLC_OP_CONV2D_GRAD_INPUT : DLC_OP_DENSE_GRAD_INPUT;
            attrs_like(k, op, attrs);
            accumulate(ad, x, emit(ad, k, (DlcValue *[]){dy, w}, 2, 1, attrs, &x->type,
                                   grad_name(ad, x), loc), loc);
        }
        DlcOpKind k = conv ? DLC_OP_CONV2D_GRAD_WEIGHT : DLC_OP_DENSE_GRAD_WEIGHT;
        attrs_like(k, op, attrs);
        accumulate(ad, w, emit(ad, k, (DlcValue *[]){dy, x}, 2, 0, attrs, &w->type,
                               grad_name(ad, w), loc), loc);
        if (op->nparams == 2) {
            DlcValue *b = op->in[2];
            accumulate(ad, b, emit(ad, DLC_OP_BIAS_GRAD, &dy, 1, 0, NULL, &b->type,
                                   grad_name(ad, b), loc), loc);
        }
        return;
    }
    case DLC_OP_RELU:
    case DLC_OP_SIGMOID:
    case DLC_OP_TANH: {
        DlcOpKind k = op->kind == DLC_OP_RELU      ? DLC_OP_RELU_GRAD
                      : op->kind == DLC_OP_SIGMOID ? DLC_OP_SIGMOID_GRAD
                                                   : DLC_OP_TANH_GRAD;
        accumulate(ad, x, emit(ad, k, (DlcValue *[]){dy, y}, 2, 0, NULL, &x->type,
                               grad_name(ad, x), loc), loc);
        return;
    }
    case DLC_OP_LEAKY_RELU: {
        /* from y where the slope is not negative (y > 0 exactly where x > 0,
           the same bits), which leaves x free to die and the leaky ReLU free
           to fuse into the op computing x; from x otherwise (y's sign is
           then not x's) */
        attrs_like(DLC_OP_LEAKY_RELU_GRAD, op, attrs);
        DlcValue *from = attrs[dlc_op_attr_index(DLC_OP_LEAKY_RELU_GRAD, "slope")].f >= 0 ? y : x;
        accumulate(ad, x, emit(ad, DLC_OP_LEAKY_RELU_GRAD, (DlcValue *[]){dy, from}, 2, 0, attrs,
                               &x->type, grad_name(ad, x), loc), loc);
        return;
    }
    case DLC_OP_LRN:
        attrs_like(DLC_OP_LRN_GRAD, op, attrs);
        accumulate(ad, x, emit(ad, DLC_OP_LRN_GRAD, (DlcValue *[]){dy, x, y}, 3, 0, attrs,
                               &x->type, grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_SOFTMAX:
        attrs_like(DLC_OP_SOFTMAX_GRAD, op, attrs);
        accumulate(ad, x, emit(ad, DLC_OP_SOFTMAX_GRAD, (DlcValue *[]){dy, y}, 2, 0, attrs,
                               &x->type, grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_ADD:
        for (int i = 0; i < op->nin; i++)
            if (needs(ad, op->in[i]))
                accumulate(ad, op->in[i], dy, loc);
        return;
    case DLC_OP_MAXPOOL:
        attrs_like(DLC_OP_MAXPOOL_GRAD, op, attrs);
        accumulate(ad, x, emit(ad, DLC_OP_MAXPOOL_GRAD, (DlcValue *[]){dy, x}, 2, 0, attrs,
                               &x->type, grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_MAXPOOL_TRAIN:
        attrs_like(DLC_OP_MAXPOOL_GRAD_ARGMAX, op, attrs);
        accumulate(ad, x, emit(ad, DLC_OP_MAXPOOL_GRAD_ARGMAX, (DlcValue *[]){dy, op->out[1]}, 2,
                               0, attrs, &x->type, grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_AVGPOOL:
    case DLC_OP_GLOBALAVGPOOL: {
        DlcOpKind k = op->kind == DLC_OP_AVGPOOL ? DLC_OP_AVGPOOL_GRAD : DLC_OP_GLOBALAVGPOOL_GRAD;
        attrs_like(k, op, attrs);
        accumulate(ad, x, emit(ad, k, &dy, 1, 0, attrs, &x->type, grad_name(ad, x), loc), loc);
        return;
    }
    case DLC_OP_BATCHNORM_TRAIN: {
        DlcValue *stats[4] = {dy, x, op->out[1], op->out[2]};
        DlcValue *w = op->in[1], *b = op->in[2];
        if (needs(ad, x))
            accumulate(ad, x, emit(ad, DLC_OP_BATCHNORM_GRAD_INPUT,
                                   (DlcValue *[]){dy, x, op->out[1], op->out[2], w}, 5, 1, NULL,
                                   &x->type, grad_name(ad, x), loc), loc);
        accumulate(ad, w, emit(ad, DLC_OP_BATCHNORM_GRAD_WEIGHT, stats, 4, 0, NULL, &w->type,
                               grad_name(ad, w), loc), loc);
        accumulate(ad, b, emit(ad, DLC_OP_BIAS_GRAD, &dy, 1, 0, NULL, &b->type,
                               grad_name(ad, b), loc), loc);
        return;
    }
    case DLC_OP_DROPOUT_TRAIN:
        accumulate(ad, x, emit(ad, DLC_OP_DROPOUT_GRAD, (DlcValue *[]){dy, op->out[1]}, 2, 0,
                               NULL, &x->type, grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_FLATTEN:
        accumulate(ad, x, emit(ad, DLC_OP_RESHAPE, &dy, 1, 0, NULL, &x->type,
                               grad_name(ad, x), loc), loc);
        return;
    case DLC_OP_CONCAT: {
        int rank = y->type.rank;
        int64_t axis = op->attrs[dlc_op_attr_index(op->kind, "axis")].i;
        if (axis < 0)
            axis += rank;
        int64_t begin = 0;
        for (int i = 0; i < op->nin; i++) {
            DlcValue *xi = op->in[i];
            if (needs(ad, xi)) {
                memset(attrs, 0, sizeof attrs);
                attrs[dlc_op_attr_index(DLC_OP_SLICE, "axis")] =
                    (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = axis};
                attrs[dlc_op_attr_index(DLC_OP_SLICE, "begin")] =
                    (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = begin};
                accumulate(ad, xi, emit(ad, DLC_OP_SLICE, &dy, 1, 0, attrs, &xi->type,
                                        grad_name(ad, xi), loc), loc);
            }
            begin += xi->type.dims[axis];
        }
        return;
    }
    default:
        dlc_error(ad->ctx, loc, "autodiff: %s has no gradient rule yet, so this network "
                  "cannot be trained", dlc_op_info(op->kind)->name);
        ad->ok = false;
        return;
    }
}

/* The loss's own gradient, which starts the backward graph. */
static void vjp_loss(Autodiff *ad, const DlcOp *loss) {
    DlcValue *pred = loss->in[0], *target = loss->in[1];
    DlcOpKind k = loss->kind == DLC_OP_CROSS_ENTROPY ? DLC_OP_CROSS_ENTROPY_GRAD : DLC_OP_MSE_GRAD;
    if (needs(ad, target)) {
        dlc_error(ad->ctx, loss->loc, "autodiff: the target of %s depends on parameters; only "
                  "the prediction can be differentiated", dlc_op_info(loss->kind)->name);
        ad->ok = false;
        return;
    }
    accumulate(ad, pred, emit(ad, k, (DlcValue *[]){pred, target}, 2, 0, NULL, &pred->type,
                              grad_name(ad, pred), loss->loc), loss->loc);
}

/* Whether op is the only reader of its first operand in net (and that is
 * not an output). */
static bool sole_reader(const DlcNetwork *net, const DlcOp *op) {
    const DlcValue *x = op->in[0];
    for (int i = 0; i < net->noutputs; i++)
        if (net->outputs[i] == x)
            return false;
    for (int i = 0; i < net->nops; i++)
        if (net->ops[i] != op && dlc_op_reads(net->ops[i], x))
            return false;
    return true;
}

/* The kind a forward op takes in the training network: batchnorm_train and
 * dropout_train for batchnorm and dropout, and for the CPU maxpool_train for
 * a maxpool that is the only reader of its input (need: which needs a
 * gradient), whose extra results it names and types in names[1...] and
 * types[1...]; the op's own kind otherwise.  With the argmax, the input
 * dies at the pooling instead of living to the backward pass; an input
 * that other ops read may be kept for them anyway, and maxpool_grad's own
 * scan of it is as fast (libdlrt's centred 3x3 windows). */
static DlcOpKind training_form(Autodiff *ad, const DlcNetwork *src, const DlcOp *op, bool need,
                               const char **names, DlcType *types) {
    const DlcValue *y = op->out[0];
    if (op->kind == DLC_OP_MAXPOOL && need && !ad->gpu && sole_reader(src, op) &&
        dlc_argmax_indexes_planes(&op->in[0]->type)) {
        names[1] = dlc_network_unique_name(ad->m, ad->net,
                                           dlc_arena_printf(&ad->m->arena, "%s.argmax", y->name));
        types[1] = y->type;
        types[1].dtype = DLC_I32;
        return DLC_OP_MAXPOOL_TRAIN;
    }
    if (op->kind == DLC_OP_BATCHNORM) {
        DlcType stat = {.dtype = y->type.dtype, .rank = 1, .dims = {y->type.dims[0]}};
        const char *roles[2] = {"mean", "invstd"};
        for (int r = 0; r < 2; r++) {
            names[1 + r] = dlc_network_unique_name(
                ad->m, ad->net, dlc_arena_printf(&ad->m->arena, "%s.%s", y->name, roles[r]));
            types[1 + r] = stat;
        }
        return DLC_OP_BATCHNORM_TRAIN;
    }
    if (op->kind == DLC_OP_DROPOUT) {
        names[1] = dlc_network_unique_name(ad->m, ad->net,
                                           dlc_arena_printf(&ad->m->arena, "%s.mask", y->name));
        types[1] = y->type;
        return DLC_OP_DROPOUT_TRAIN;
    }
    return op->kind;
}

/* Copies the inference network's inputs, parameters and ops. */
static void copy_forward(Autodiff *ad, const DlcNetwork *src) {
    for (int i = 0; i < src->ninputs; i++)
        dlc_network_add_input(ad->m, ad->net, src->inputs[i]->name, src->inputs[i]->type,
                              src->inputs[i]->loc);
    for (int i = 0; i < src->nparams; i++) {
        const DlcValue *p = src->params[i];
        dlc_network_add_param(ad->m, ad->net, p->name, p->type, p->init, p->trainable, p->loc);
        if (p->trainable)
            dlc_map_put(&ad->needs, p->name, (void *)1);
    }
    for (int i = 0; i < src->nops; i++) {
        const DlcOp *op = src->ops[i];
        DlcValue *in[64 + DLC_MAX_PARAMS_PER_OP];
        bool need = false;
        for (int j = 0; j < op->nin; j++) {
            in[j] = twin(ad, op->in[j]);
            need |= needs(ad, in[j]);
        }
        const char *names[DLC_MAX_RESULTS];
        DlcType types[DLC_MAX_RESULTS];
        for (int r = 0; r < op->nout; r++) {
            names[r] = op->out[r]->name;
            types[r] = op->out[r]->type;
        }
        DlcOpKind kind = training_form(ad, src, op, need, names, types);
        int nout = kind == DLC_OP_BATCHNORM_TRAIN                                ? 3
                   : kind == DLC_OP_DROPOUT_TRAIN || kind == DLC_OP_MAXPOOL_TRAIN ? 2
                                                                                 : op->nout;
        DlcAttr attrs[DLC_MAX_ATTRS];
        memcpy(attrs, op->attrs, sizeof attrs);
        if (kind != op->kind) { /* the training form's schema: by name, then its defaults */
            attrs_like(kind, op, attrs);
            dlc_op_fill_defaults(kind, attrs);
        }
        DlcOp *copy = dlc_network_add_op(ad->m, ad->net, kind, in, op->nin, op->nparams,
                                         attrs, types, names, nout, op->loc);
        for (int r = 0; need && r < copy->nout; r++)
            dlc_map_put(&ad->needs, copy->out[r]->name, (void *)1);
    }
}

/* Appends the train section's loss to the prediction; returns the loss op. */
static const DlcOp *add_loss(Autodiff *ad, const DlcNetwork *src, const DlcTrain *train) {
    const DlcCfg *loss = train ? dlc_train_get(train, "loss") : NULL;
    bool mse = loss && strcmp(loss->s, "mse") == 0;
    DlcValue *pred = twin(ad, src->outputs[0]);
    if (pred->kind != DLC_VAL_OP || !pred->type.batched) {
        dlc_error(ad->ctx, src->loc, "autodiff: network '%s' must return a prediction computed "
                  "from its inputs to be trained", src->name);
        return NULL;
    }
    DlcType target = pred->type;
    if (!mse)
        target = (DlcType){.dtype = DLC_I32, .batched = true, .rank = 0};
    const char *tname = dlc_network_unique_name(ad->m, ad->net, mse ? "target" : "labels");
    DlcValue *t = dlc_network_add_input(ad->m, ad->net, tname, target, src->loc);
    DlcType scalar = {.dtype = pred->type.dtype, .rank = 0};
    DlcValue *l = emit(ad, mse ? DLC_OP_MSE : DLC_OP_CROSS_ENTROPY, (DlcValue *[]){pred, t}, 2,
                       0, NULL, &scalar, "loss", pred->def->loc);
    return l ? l->def : NULL;
}

static void differentiate(Autodiff *ad, const DlcNetwork *src, const DlcTrain *train) {
    if (src->noutputs != 1) {
        dlc_error(ad->ctx, src->loc, "autodiff: network '%s' returns %d values; a network "
                  "to train returns one, its prediction or its loss", src->name, src->noutputs);
        ad->ok = false;
        return;
    }
    const char *name = dlc_arena_printf(&ad->m->arena, "%s.train", src->name);
    ad->net = dlc_network_new(ad->m, name, src->loc);
    dlc_map_init(&ad->grads, &ad->m->arena);
    dlc_map_init(&ad->needs, &ad->m->arena);
    copy_forward(ad, src);

    /* the loss: the network's own, or the train section's */
    DlcValue *out = twin(ad, src->outputs[0]);
    const DlcOp *loss = out->kind == DLC_VAL_OP && dlc_op_is_loss(out->def->kind)
                            ? out->def : add_loss(ad, src, train);
    if (!loss) {
        ad->ok = false;
        return;
    }
    dlc_network_add_output(ad->m, ad->net, loss->out[0]);
    vjp_loss(ad, loss);

    /* backward, over the forward ops (those before the loss) in reverse */
    int nforward = src->nops;
    for (int i = nforward - 1; i >= 0 && ad->ok; i--) {
        const DlcOp *op = ad->net->ops[i];
        if (op == loss)
            continue;
        DlcValue *dy = dlc_map_get(&ad->grads, op->out[0]->name);
        if (dy)
            vjp(ad, op, dy);
    }
    for (int i = 0; i < ad->net->nparams && ad->ok; i++) {
        DlcValue *p = ad->net->params[i];
        DlcValue *g = dlc_map_get(&ad->grads, p->name);
        if (p->trainable && g)
            emit(ad, DLC_OP_PARAM_GRAD, (DlcValue *[]){g, p}, 2, 1, NULL, NULL, "", p->loc);
    }
}

bool dlc_pass_autodiff(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    Autodiff ad = {.ctx = ctx, .m = m, .gpu = opt && opt->gpu, .ok = true};
    int n = m->nnetworks;
    for (int i = 0; i < n; i++) {
        DlcNetwork *net = m->networks[i];
        const DlcTrain *train = dlc_module_find_train(m, net->name);
        const char *twin_name = dlc_arena_printf(&m->arena, "%s.train", net->name);
        if (!train || dlc_module_find_network(m, twin_name))
            continue; /* nothing to train, or differentiated already */
        differentiate(&ad, net, train);
    }
    return ad.ok;
}
