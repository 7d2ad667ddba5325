/* optimizer.c — the weight update as IR.
 *
 * In each training network NAME.train (made by autodiff), replaces every
 * param_grad(%g, @p) by the update the train section's optimizer names:
 *
 *   sgd(lr, momentum, nesterov, weight_decay)  ->  sgd_update(%g, %lr, @p[, @p.momentum_buffer])
 *   adam(lr, beta1, beta2, eps, weight_decay)  ->  adam_update(%g, %lr, %step, @p, @p.exp_avg, @p.exp_avg_sq)
 *
 * The learning rate becomes the scalar input %lr (and Adam's 1-based step
 * count %step), so that schedules and warm-up change it between steps
 * without recompiling; the train section's lr is the generated program's
 * default.  The optimizer's state is buffers named as PyTorch names them
 * (momentum_buffer, exp_avg, exp_avg_sq), initialized to zeros, so that a
 * checkpoint carries it.  Without an optimizer setting, plain SGD.
 *
 * Each update goes right after the last op that needs what it changes or
 * reads: its gradient's definition, and every read of its parameter (a
 * layer's input gradient reads its weights after the weight gradient is
 * made).  Its gradient then dies there, instead of living to the end of
 * the step with every other one, which is what lets the memory plan reuse
 * a dense layer's large weight gradient for the next layer's values.
 *
 * A train section's clip = X (X > 0) clips the gradients by their total
 * norm before any update, as torch.nn.utils.clip_grad_norm_(params, X)
 * does between loss.backward() and optimizer.step():
 *
 *   %clip_coef = clip_norm(%g1, %g2, ..., %clip)
 *   %g1.clipped = clip_scale(%g1, %clip_coef)
 *   sgd_update(%g1.clipped, %lr, @p1, ...)
 *   ...
 *
 * The largest norm becomes the scalar input %clip, as the learning rate
 * does, so that the program's --clip changes it without recompiling (0
 * turns clipping off).  clip_norm needs every gradient, so it comes after
 * the whole backward pass, and the updates after it, each right after the
 * clip_scale of its gradient: every gradient lives until then.  The
 * gradient is clipped before the optimizer adds weight decay to it, as
 * PyTorch's optimizers do.
 *
 * Preconditions: the module verifies and autodiff has run; NAME.train's
 * train section is NAME's. */
#include "passes.h"

#include <string.h>

/* A number from an optimizer call, or its default. */
static double cfg_number(const DlcCfg *call, const char *key, int position, double def) {
    const DlcCfg *v = call ? dlc_cfg_arg(call, key, position) : NULL;
    if (!v)
        return def;
    return v->kind == DLC_CFG_INT ? (double)v->i : v->f;
}

static DlcAttr number_attr(double x) {
    return (DlcAttr){.type = DLC_ATTR_FLOAT, .set = true, .f = x};
}

/* The attributes of the update op, from the optimizer call (positions as
 * in the train schema: sgd(lr, momentum, nesterov, weight_decay), adam(lr,
 * beta1, beta2, eps, weight_decay)). */
static void update_attrs(DlcOpKind kind, const DlcCfg *call, DlcAttr *attrs) {
    memset(attrs, 0, sizeof(DlcAttr) * DLC_MAX_ATTRS);
#define SET(id, pos, def) \
    *dlc_attrs_at(kind, attrs, DLC_A_##id) = number_attr(cfg_number(call, dlc_attr_name(DLC_A_##id), pos, def))
    if (kind == DLC_OP_SGD_UPDATE) {
        SET(MOMENTUM, 1, 0.0);
        SET(WEIGHT_DECAY, 3, 0.0);
        const DlcCfg *nesterov = call ? dlc_cfg_arg(call, "nesterov", 2) : NULL;
        *dlc_attrs_at(kind, attrs, DLC_A_NESTEROV) =
            (DlcAttr){.type = DLC_ATTR_BOOL, .set = true, .b = nesterov && nesterov->b};
    } else {
        SET(BETA1, 1, 0.9);
        SET(BETA2, 2, 0.999);
        SET(EPS, 3, 1e-8);
        SET(WEIGHT_DECAY, 4, 0.0);
    }
#undef SET
    dlc_op_fill_defaults(kind, attrs);
}

static DlcValue *scalar_input(DlcModule *m, DlcNetwork *net, const char *base, DlcDType dt,
                              DlcLoc loc) {
    DlcType t = {.dtype = dt, .rank = 0};
    return dlc_network_add_input(m, net, dlc_network_unique_name(m, net, base), t, loc);
}

/* The gradients of grads[0..n) (param_grad ops) clipped by their total
 * norm: appends clip_norm and a clip_scale per gradient to net, and
 * points each param_grad at its clipped gradient, which its update then
 * reads. */
static void clip_gradients(DlcModule *m, DlcNetwork *net, DlcOp **grads, int n, DlcLoc loc) {
    DlcType dt = grads[0]->in[0]->type;
    DlcValue *clip = scalar_input(m, net, "clip", dt.dtype, net->loc);
    DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        in[i] = grads[i]->in[0];
    in[n] = clip;
    DlcType scalar = {.dtype = dt.dtype, .rank = 0};
    const char *name = dlc_network_unique_name(m, net, "clip_coef");
    DlcValue *coef = dlc_network_add_op(m, net, DLC_OP_CLIP_NORM, in, n + 1, 0, NULL, &scalar,
                                        &name, 1, loc)->out[0];
    for (int i = 0; i < n; i++) {
        DlcValue *g = grads[i]->in[0];
        name = dlc_network_unique_name(m, net, dlc_arena_printf(&m->arena, "%s.clipped", g->name));
        DlcOp *scale = dlc_network_add_op(m, net, DLC_OP_CLIP_SCALE, (DlcValue *[]){g, coef}, 2, 0,
                                          NULL, &g->type, &name, 1, grads[i]->loc);
        grads[i]->in[0] = scale->out[0];
    }
}

/* Moves each of the updates, which are ops first.. of net, to just after
 * the last op before them that defines or reads one of its operands.  They
 * keep their relative order where two land at the same place. */
static void schedule_updates(DlcModule *m, DlcNetwork *net, int first) {
    int n = net->nops;
    int *after = dlc_arena_alloc(&m->arena, sizeof *after * (size_t)n);
    for (int u = first; u < n; u++) {
        const DlcOp *up = net->ops[u];
        after[u] = -1;
        for (int i = 0; i < first; i++) {
            bool needed = false;
            for (int j = 0; j < up->nin && !needed; j++)
                needed = dlc_op_reads(net->ops[i], up->in[j]) ||
                         (up->in[j]->kind == DLC_VAL_OP && up->in[j]->def == net->ops[i]);
            if (needed)
                after[u] = i;
        }
    }
    DlcOp **order = dlc_arena_alloc(&m->arena, sizeof *order * (size_t)n);
    int k = 0;
    for (int u = first; u < n; u++) /* updates that need nothing of the step */
        if (after[u] < 0)
            order[k++] = net->ops[u];
    for (int i = 0; i < first; i++) {
        order[k++] = net->ops[i];
        for (int u = first; u < n; u++)
            if (after[u] == i)
                order[k++] = net->ops[u];
    }
    memcpy(net->ops, order, sizeof *order * (size_t)n);
}

static bool optimize_network(DlcCtx *ctx, DlcModule *m, DlcNetwork *net, const DlcTrain *train) {
    const DlcCfg *call = train ? dlc_train_get(train, "optimizer") : NULL;
    bool adam = call && strcmp(call->s, "adam") == 0;
    DlcOpKind kind = adam ? DLC_OP_ADAM_UPDATE : DLC_OP_SGD_UPDATE;
    DlcAttr attrs[DLC_MAX_ATTRS];
    update_attrs(kind, call, attrs);
    if (kind == DLC_OP_SGD_UPDATE && dlc_attrs_at(kind, attrs, DLC_A_NESTEROV)->b &&
        dlc_attrs_at(kind, attrs, DLC_A_MOMENTUM)->f == 0) {
        dlc_error(ctx, call->loc, "sgd: nesterov needs a momentum above 0");
        return false;
    }
    bool has_momentum = kind == DLC_OP_ADAM_UPDATE || dlc_attrs_at(kind, attrs, DLC_A_MOMENTUM)->f > 0;

    /* detach the param_grad ops; the updates are appended in their order,
       then scheduled */
    int n = 0, nupdates = 0;
    DlcOp **grads = dlc_arena_alloc(&m->arena, sizeof(DlcOp *) * (size_t)(net->nops + 1));
    for (int i = 0; i < net->nops; i++) {
        if (net->ops[i]->kind == DLC_OP_PARAM_GRAD)
            grads[nupdates++] = net->ops[i];
        else
            net->ops[n++] = net->ops[i];
    }
    net->nops = n;
    if (!nupdates)
        return true;

    DlcType dt = grads[0]->in[0]->type;
    DlcValue *lr = scalar_input(m, net, "lr", dt.dtype, net->loc);
    DlcValue *step = adam ? scalar_input(m, net, "step", DLC_I32, net->loc) : NULL;
    const DlcCfg *clip = train ? dlc_train_get(train, "clip") : NULL;
    if (clip && (clip->kind == DLC_CFG_INT ? clip->i > 0 : clip->f > 0)) {
        clip_gradients(m, net, grads, nupdates, clip->loc);
        n = net->nops; /* the clipping ops come before the updates are scheduled */
    }
    static const char *const adam_state[] = {"exp_avg", "exp_avg_sq"};
    for (int i = 0; i < nupdates; i++) {
        DlcValue *g = grads[i]->in[0], *p = grads[i]->in[1];
        DlcValue *in[6] = {g, lr};
        int nin = 2;
        if (adam)
            in[nin++] = step;
        in[nin++] = p;
        int nstate = adam ? 2 : has_momentum ? 1 : 0;
        for (int s = 0; s < nstate; s++) {
            const char *name = dlc_arena_printf(&m->arena, "%s.%s", p->name,
                                                adam ? adam_state[s] : "momentum_buffer");
            DlcValue *buf = dlc_network_add_param(m, net, name, p->type, DLC_INIT_ZEROS,
                                                  false, p->loc);
            if (!buf) {
                dlc_error(ctx, p->loc, "optimizer: the name '%s' for the state of @%s is taken",
                          name, p->name);
                return false;
            }
            in[nin++] = buf;
        }
        int nparams = 1 + nstate;
        dlc_network_add_op(m, net, kind, in, nin, nparams, attrs, NULL, NULL, 0, grads[i]->loc);
    }
    schedule_updates(m, net, n);
    return true;
}

bool dlc_pass_optimizer(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)opt;
    bool ok = true;
    for (int i = 0; i < m->nnetworks; i++) {
        DlcNetwork *net = m->networks[i];
        size_t len;
        if (!dlc_is_train_network(net->name, &len))
            continue;
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)len, net->name);
        ok &= optimize_network(ctx, m, net, dlc_module_find_train(m, base));
    }
    return ok;
}
