/* autodiff.c — reverse-mode differentiation: the training step as IR.
 *
 * For each network with a train section, builds the network NAME.train: the
 * network's inputs plus the labels (or targets) of its loss, its parameters,
 * its forward ops, the loss the train section names, then the backward
 * graph: for every op on a path from a trainable parameter to the loss, in
 * reverse order, the ops of its vector-Jacobian product, which the op's
 * gradient rule appends.  The rules are the grad column of ir/ops.def
 * (GRAD(x) names dlc_grad_x), one file per op family (grad_*.c, declared
 * in grad.h); this file expands the column into its dispatch table and
 * holds what the rules build with.  A value used twice gets the sum of its
 * gradients.  Each trainable parameter's gradient ends in a
 * param_grad(%g, @p) op, which the optimizer pass turns into the weight
 * update.  Gradients are ordinary values of ordinary ops, so later passes
 * (fusion, memory planning) see the whole step.  The inference network is
 * left as it is.
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
 * uses their rows' training forms (TRAINED_AS), batchnorm_train (batch
 * statistics, returned for the backward pass, and the running statistics
 * updated) and dropout_train (a random mask, returned), whose extra results
 * are named after the op's value: %bn.mean, %bn.invstd, %drop.mask.  A
 * maxpool that alone reads its input becomes maxpool_train, which also
 * returns its windows' maxima's indices, %pool.argmax, for
 * maxpool_grad_argmax (not when the GPU code generator reads the result: it
 * has no kernel for them). */
#include "grad.h"
#include "passes.h"

#include <stdarg.h>
#include <string.h>

/* ---- the grad column of ops.def ----------------------------------------- */

/* Each op's rule: GRAD(x) is dlc_grad_x, which grad.h declares from the
 * same column (a row naming a rule nobody wrote does not link); an op
 * trained as another form, or not differentiated, has none. */
#define GRAD(x) dlc_grad_##x
#define TRAINED_AS(id) NULL
#define NO_GRAD NULL
static const DlcGradRule rules[DLC_OP_COUNT] = {
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) [DLC_OP_##id] = grad,
#include "../ir/ops.def"
#undef OP
};
#undef GRAD
#undef TRAINED_AS
#undef NO_GRAD

/* Each op's training form (TRAINED_AS), or DLC_OP_COUNT for none. */
#define GRAD(x) DLC_OP_COUNT
#define TRAINED_AS(id) DLC_OP_##id
#define NO_GRAD DLC_OP_COUNT
static const DlcOpKind trained_as[DLC_OP_COUNT] = {
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) [DLC_OP_##id] = grad,
#include "../ir/ops.def"
#undef OP
};
#undef GRAD
#undef TRAINED_AS
#undef NO_GRAD

/* Whether each op has a rule of its own, as constants for the checks
 * below. */
#define GRAD(x) 1
#define TRAINED_AS(id) 0
#define NO_GRAD 0
enum {
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) HAS_RULE_##id = grad,
#include "../ir/ops.def"
#undef OP
};
#undef TRAINED_AS

/* A differentiable op has a rule: its own, or its training form's. */
#define TRAINED_AS(id) HAS_RULE_##id
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx)                               \
    _Static_assert(!((flags) & DLC_OPF_DIFF) || (grad),                                        \
                   "ops.def: " #id " is differentiable (DLC_OPF_DIFF) but has no gradient "   \
                   "rule: give it GRAD(x), or TRAINED_AS(ID) with a form that has one");
#include "../ir/ops.def"
#undef OP
#undef GRAD
#undef TRAINED_AS
#undef NO_GRAD

/* ---- what the rules build with (grad.h) --------------------------------- */

DlcValue *dlc_grad_emit(DlcGrad *g, DlcOpKind kind, DlcValue **in, int nin, int nparams,
                        const DlcAttr *attrs, const DlcType *type, const char *base,
                        DlcLoc loc) {
    DlcAttr filled[DLC_MAX_ATTRS];
    memset(filled, 0, sizeof filled);
    if (attrs)
        memcpy(filled, attrs, sizeof filled);
    if (dlc_op_fill_defaults(kind, filled) >= 0)
        dlc_unreachable("autodiff: %s is missing an attribute", dlc_op_info(kind)->name);
    const char *name = dlc_network_unique_name(g->m, g->net, base);
    DlcOp *op = dlc_network_add_op(g->m, g->net, kind, in, nin, nparams, filled, type,
                                   &name, type ? 1 : 0, loc);
    return op && type ? op->out[0] : NULL;
}

const char *dlc_grad_name(DlcGrad *g, const DlcValue *v) {
    return dlc_arena_printf(&g->m->arena, "%s.grad", v->name);
}

void dlc_grad_accumulate(DlcGrad *g, DlcValue *v, DlcValue *grad, DlcLoc loc) {
    DlcValue *old = dlc_map_get(&g->grads, v->name);
    if (old)
        grad = dlc_grad_emit(g, DLC_OP_ADD, (DlcValue *[]){old, grad}, 2, 0, NULL, &grad->type,
                             dlc_grad_name(g, v), loc);
    dlc_map_put(&g->grads, v->name, grad);
}

/* The attributes are the forward op's by name (dlc_attrs_like): a tile
 * written in IR text for a forward convolution is not one for its
 * gradients (the tile pass chooses theirs). */
void dlc_grad_term(DlcGrad *g, const DlcOp *op, DlcValue *v, DlcOpKind kind, DlcValue **in,
                   int nin, int nparams) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_attrs_like(kind, op->kind, op->attrs, attrs);
    dlc_grad_accumulate(g, v, dlc_grad_emit(g, kind, in, nin, nparams, attrs, &v->type,
                                            dlc_grad_name(g, v), op->loc),
                        op->loc);
}

bool dlc_grad_needs(const DlcGrad *g, const DlcValue *v) {
    return dlc_map_get(&g->needs, v->name) != NULL;
}

void dlc_grad_error(DlcGrad *g, DlcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dlc_vdiag(g->ctx, DLC_SEV_ERROR, loc, fmt, ap);
    va_end(ap);
    g->ok = false;
}

/* ---- the pass ----------------------------------------------------------- */

/* The same value in the train network (forward values keep their names). */
static DlcValue *twin(DlcGrad *g, const DlcValue *v) {
    DlcValue *t = dlc_map_get(&g->net->names, v->name);
    if (!t)
        dlc_unreachable("autodiff: %s has no twin", v->name);
    return t;
}

/* The vector-Jacobian product of op (of the train network), whose result's
 * gradient is dy: its rule's, after the fused activation's. */
static void vjp(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    if (dlc_op_folded_batchnorm(op) >= 0) {
        /* the folded batchnorm normalizes with its running statistics: an
         * inference form, which training must not use */
        dlc_grad_error(g, op->loc, "autodiff: conv2d with batchnorm=true (a batchnorm folded "
                       "in for inference) cannot be trained; write conv2d(...) -> batchnorm");
        return;
    }
    if (dlc_op_relu_grad_mask(op) >= 0) {
        /* a gradient op's form (the fuse pass's, after autodiff) */
        dlc_grad_error(g, op->loc, "autodiff: %s with relu_grad=true (a ReLU's gradient fused "
                       "in) cannot be differentiated", dlc_op_info(op->kind)->name);
        return;
    }
    dy = dlc_grad_through_fused_activation(g, op, dy);
    if (!rules[op->kind]) {
        dlc_grad_error(g, op->loc, "autodiff: %s has no gradient rule yet, so this network "
                       "cannot be trained", dlc_op_info(op->kind)->name);
        return;
    }
    rules[op->kind](g, op, dy);
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

/* The kind a forward op takes in the training network: its row's training
 * form (TRAINED_AS: batchnorm_train, dropout_train), and for the CPU
 * maxpool_train for a maxpool that is the only reader of its input (need:
 * which needs a gradient); the op's own kind otherwise.  With the argmax,
 * the input dies at the pooling instead of living to the backward pass; an
 * input that other ops read may be kept for them anyway, and
 * maxpool_grad's own scan of it is as fast (libdlrt's centred 3x3
 * windows). */
static DlcOpKind training_form(DlcGrad *g, const DlcNetwork *src, const DlcOp *op, bool need) {
    if (trained_as[op->kind] != DLC_OP_COUNT)
        return trained_as[op->kind];
    bool argmax = op->kind == DLC_OP_MAXPOOL && need && !g->gpu && sole_reader(src, op) &&
                  dlc_argmax_indexes_planes(&op->in[0]->type);
    return argmax ? DLC_OP_MAXPOOL_TRAIN : op->kind;
}

/* The roles of a training form's results beyond its forward op's, which
 * the form returns for its gradient rule: they name the results after the
 * op's value (%bn.mean).  Their types and number are the form's shape
 * rule's. */
static const char *const result_roles[DLC_OP_COUNT][DLC_MAX_RESULTS] = {
    [DLC_OP_BATCHNORM_TRAIN] = {NULL, "mean", "invstd"},
    [DLC_OP_DROPOUT_TRAIN] = {NULL, "mask"},
    [DLC_OP_MAXPOOL_TRAIN] = {NULL, "argmax"},
    [DLC_OP_RNN_TRAIN] = {NULL, "hprev", "cache"},
    [DLC_OP_RNN_RELU_TRAIN] = {NULL, "hprev", "cache"},
    [DLC_OP_LSTM_TRAIN] = {NULL, "hprev", "cache"},
    [DLC_OP_GRU_TRAIN] = {NULL, "hprev", "cache"},
};

/* The results of op's copy of kind `form` (with attributes attrs, from the
 * operands in[]) into names[] and types[]: op's own, then those of a
 * training form, typed by the form's shape rule.  Returns their number. */
static int form_results(DlcGrad *g, const DlcOp *op, DlcOpKind form, const DlcAttr *attrs,
                        DlcValue *const *in, const char **names, DlcType *types) {
    for (int r = 0; r < op->nout; r++) {
        names[r] = op->out[r]->name;
        types[r] = op->out[r]->type;
    }
    if (form == op->kind)
        return op->nout;
    DlcType tensors[64];
    DlcAttr checked[DLC_MAX_ATTRS];
    int ntensors = op->nin - op->nparams;
    for (int j = 0; j < ntensors; j++)
        tensors[j] = in[j]->type;
    memcpy(checked, attrs, sizeof checked);
    DlcInfer inf = {.ctx = g->ctx, .loc = op->loc, .kind = form, .in = tensors,
                    .nin = ntensors, .attrs = checked};
    if (!dlc_infer(&inf))
        dlc_unreachable("autodiff: %s does not take %s's operands", dlc_op_info(form)->name,
                        dlc_op_info(op->kind)->name);
    const DlcValue *y = op->out[0];
    for (int r = op->nout; r < inf.nout; r++) {
        const char *role = result_roles[form][r];
        if (!role)
            dlc_unreachable("autodiff: %s's result %d has no role", dlc_op_info(form)->name, r);
        names[r] = dlc_network_unique_name(
            g->m, g->net, dlc_arena_printf(&g->m->arena, "%s.%s", y->name, role));
        types[r] = inf.out[r];
    }
    return inf.nout;
}

/* Copies the inference network's inputs, parameters and ops. */
static void copy_forward(DlcGrad *g, const DlcNetwork *src) {
    for (int i = 0; i < src->ninputs; i++)
        dlc_network_add_input(g->m, g->net, src->inputs[i]->name, src->inputs[i]->type,
                              src->inputs[i]->loc);
    for (int i = 0; i < src->nparams; i++) {
        const DlcValue *p = src->params[i];
        dlc_network_add_param(g->m, g->net, p->name, p->type, p->init, p->trainable, p->loc)
            ->fan_in = p->fan_in;
        if (p->trainable)
            dlc_map_put(&g->needs, p->name, (void *)1);
    }
    for (int i = 0; i < src->nops; i++) {
        const DlcOp *op = src->ops[i];
        if (dlc_attr_true(op->kind, op->attrs, DLC_A_RESIDUAL)) {
            /* the fuse-residual pass's, on the inference network after layout:
             * refused before the backward walk meets the reorders around it
             * (the copy goes on, and the walk does not start) */
            dlc_grad_error(g, op->loc, "autodiff: conv2d with residual=true (an addition fused "
                           "in for inference) cannot be trained; write add(conv2d(...), r)");
        }
        DlcValue *in[64 + DLC_MAX_PARAMS_PER_OP];
        bool need = false;
        for (int j = 0; j < op->nin; j++) {
            in[j] = twin(g, op->in[j]);
            need |= dlc_grad_needs(g, in[j]);
        }
        DlcOpKind kind = training_form(g, src, op, need);
        DlcAttr attrs[DLC_MAX_ATTRS];
        memcpy(attrs, op->attrs, sizeof attrs);
        if (kind != op->kind) { /* the training form's schema: by name, then its defaults */
            dlc_attrs_like(kind, op->kind, op->attrs, attrs);
            dlc_op_fill_defaults(kind, attrs);
        }
        const char *names[DLC_MAX_RESULTS];
        DlcType types[DLC_MAX_RESULTS];
        int nout = form_results(g, op, kind, attrs, in, names, types);
        DlcOp *copy = dlc_network_add_op(g->m, g->net, kind, in, op->nin, op->nparams,
                                         attrs, types, names, nout, op->loc);
        for (int r = 0; need && r < copy->nout; r++)
            dlc_map_put(&g->needs, copy->out[r]->name, (void *)1);
    }
}

/* Appends the train section's loss to the prediction; returns the loss op. */
static const DlcOp *add_loss(DlcGrad *g, const DlcNetwork *src, const DlcTrain *train) {
    const DlcCfg *loss = train ? dlc_train_get(train, "loss") : NULL;
    bool mse = loss && strcmp(loss->s, "mse") == 0;
    DlcValue *pred = twin(g, src->outputs[0]);
    if (pred->kind != DLC_VAL_OP || !pred->type.batched) {
        dlc_error(g->ctx, src->loc, "autodiff: network '%s' must return a prediction computed "
                  "from its inputs to be trained", src->name);
        return NULL;
    }
    DlcType target = pred->type;
    if (!mse) /* a label per sample, or per step of [T,classes] logits */
        target = (DlcType){.dtype = DLC_I32, .batched = true, .rank = pred->type.rank - 1,
                           .dims = {pred->type.dims[0]}};
    const char *tname = dlc_network_unique_name(g->m, g->net, mse ? "target" : "labels");
    DlcValue *t = dlc_network_add_input(g->m, g->net, tname, target, src->loc);
    DlcType scalar = {.dtype = pred->type.dtype, .rank = 0};
    DlcValue *l = dlc_grad_emit(g, mse ? DLC_OP_MSE : DLC_OP_CROSS_ENTROPY,
                                (DlcValue *[]){pred, t}, 2, 0, NULL, &scalar, "loss",
                                pred->def->loc);
    return l ? l->def : NULL;
}

static void differentiate(DlcGrad *g, const DlcNetwork *src, const DlcTrain *train) {
    if (src->noutputs != 1) {
        dlc_grad_error(g, src->loc, "autodiff: network '%s' returns %d values; a network "
                       "to train returns one, its prediction or its loss", src->name,
                       src->noutputs);
        return;
    }
    const char *name = dlc_arena_printf(&g->m->arena, "%s.train", src->name);
    g->net = dlc_network_new(g->m, name, src->loc);
    dlc_map_init(&g->grads, &g->m->arena);
    dlc_map_init(&g->needs, &g->m->arena);
    copy_forward(g, src);

    /* the loss: the network's own, or the train section's */
    DlcValue *out = twin(g, src->outputs[0]);
    const DlcOp *loss = out->kind == DLC_VAL_OP && dlc_op_is_loss(out->def->kind)
                            ? out->def : add_loss(g, src, train);
    if (!loss) {
        g->ok = false;
        return;
    }
    dlc_network_add_output(g->m, g->net, loss->out[0]);
    /* the loss's rule starts the backward graph; a loss is trained as itself */
    if (!rules[loss->kind])
        dlc_unreachable("autodiff: the loss %s has no gradient rule",
                        dlc_op_info(loss->kind)->name);
    rules[loss->kind](g, loss, NULL);

    /* backward, over the forward ops (those before the loss) in reverse */
    int nforward = src->nops;
    for (int i = nforward - 1; i >= 0 && g->ok; i--) {
        const DlcOp *op = g->net->ops[i];
        if (op == loss)
            continue;
        DlcValue *dy = dlc_map_get(&g->grads, op->out[0]->name);
        if (dy)
            vjp(g, op, dy);
    }
    for (int i = 0; i < g->net->nparams && g->ok; i++) {
        DlcValue *p = g->net->params[i];
        DlcValue *dp = dlc_map_get(&g->grads, p->name);
        if (p->trainable && dp)
            dlc_grad_emit(g, DLC_OP_PARAM_GRAD, (DlcValue *[]){dp, p}, 2, 1, NULL, NULL, "",
                          p->loc);
    }
}

bool dlc_pass_autodiff(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    DlcGrad g = {.ctx = ctx, .m = m, .gpu = opt && opt->gpu, .ok = true};
    int n = m->nnetworks;
    for (int i = 0; i < n; i++) {
        DlcNetwork *net = m->networks[i];
        const DlcTrain *train = dlc_module_find_train(m, net->name);
        const char *twin_name = dlc_arena_printf(&m->arena, "%s.train", net->name);
        if (!train || dlc_module_find_network(m, twin_name))
            continue; /* nothing to train, or differentiated already */
        differentiate(&g, net, train);
    }
    return g.ok;
}
