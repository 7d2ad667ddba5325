/* recompute.c — meets --mem-budget by computing cheap forward values again
 * in the backward pass instead of keeping them.
 *
 * A training step keeps the forward values that the backward pass reads
 * until it reads them, so its memory peaks where the backward pass begins.
 * A value whose op is cheap (an activation, pooling, concat, add, LRN, a
 * reshape, batchnorm from the statistics it saved, dropout from its mask)
 * need not be kept across that gap when its operands are live anyway at
 * the backward reader: a copy of the op just before that reader computes
 * it again, bit for bit, and the readers from there on read the copy.
 *
 *   %p = maxpool(%r)                             %p = maxpool(%r)
 *   ...                                          ...
 *   %g = conv2d_grad_weight(%dy, %p)      =>     %p.recomputed = maxpool(%r)
 *   ...                                          %g = conv2d_grad_weight(%dy, %p.recomputed)
 *   %dr = maxpool_grad(%dp, %r)                  ...
 *
 * The pass is greedy.  While a network needs more than the budget
 * (parameters and optimizer state, plus its activations as
 * passes/plan_memory.c places them at the train section's batch size), it
 * takes the op during which the most memory is live (the peak) and
 * recomputes the largest value live across it that qualifies.  A copy only
 * ever reads values that are live where it runs, so no op's live set grows.
 * When no value at the peak qualifies, the pass fails, naming the values
 * live there, largest first.  batchnorm_train and dropout_train draw or
 * update state, so their results are recomputed by batchnorm_normalize
 * (from the mean and invstd they returned) and dropout_grad (x times the
 * mask).  maxpool_train's result is not recomputed: maxpool's loops may
 * take the other of two equal zeros of opposite sign, and its input is
 * rarely live then (the argmax lets it die at the pooling).  A ReLU fused
 * into a convolution is not cheap: the convolution is not recomputed.
 *
 * A recurrent layer's training form is not cheap either, but what it keeps
 * for backpropagation through time (hprev and cache: its gates at every
 * step, 5H per step for an LSTM) is often the largest value of a sequence
 * network.  Only when no cheap value at the peak qualifies, the whole
 * training form runs again just before its gradient, from its input (which
 * the input's weight gradient keeps live anyway) and its state, and the
 * readers of all its results from there on read the copy's: the gates are
 * computed again instead of stored, at the cost of a second forward pass
 * of the layer, with the same bits (a stateful layer's state changes only
 * after the step).
 *
 * Without a budget the pass does nothing.  It is the last pass of the C
 * target's pipeline: CSE after it would merge the copies back.
 *
 * Preconditions: the module verifies; ops are in execution order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* One network's memory at one batch size, as it stands. */
typedef struct Step {
    DlcModule *m;
    DlcNetwork *net;
    int64_t batch, elem;  /* samples; bytes per element */
    int64_t fixed;        /* bytes of parameters and optimizer state */
    DlcMemPlan plan;      /* measured: the last uses, what is live */
    int64_t *live;        /* bytes of batched values live during each op */
    int64_t unbatched;    /* the most bytes of other values (the parameters'
                             gradients, the loss) live during any op: the
                             plan keeps them in a part of their own */
} Step;

static int64_t value_bytes(const Step *s, const DlcValue *v) {
    return dlc_plan_elements(v) * (v->type.batched ? s->batch : 1) * s->elem;
}

static int last_use(const Step *s, const DlcValue *v) {
    return dlc_plan_last_use(&s->plan, v);
}

/* Each op result's last use and the bytes live during each op, as the
 * plan counts them (with its in-place sharing). */
static void analyse(Step *s) {
    dlc_plan_memory(&s->m->arena, s->net, DLC_PLAN_MEASURE, false, &s->plan);
    s->live = s->plan.live[0];
    for (int k = 0; k < s->net->nops; k++)
        s->live[k] *= s->batch * s->elem;
    s->unbatched = s->plan.lower[1] * s->elem;
}

static int peak(const Step *s) {
    int p = 0;
    for (int i = 1; i < s->net->nops; i++)
        if (s->live[i] > s->live[p])
            p = i;
    return p;
}

/* The bytes the network needs as the plan places its values. */
static int64_t placed_bytes(Step *s) {
    DlcMemPlan plan;
    dlc_plan_memory(&s->m->arena, s->net, DLC_PLAN_SHARED, false, &plan);
    return s->fixed + (plan.size[0] * s->batch + plan.size[1]) * s->elem;
}

/* The op that computes v again, and its operands (tensors, then
 * parameters); false when v is not cheap to recompute. */
typedef struct Copy {
    DlcOpKind kind;
    DlcValue *in[8];
    int nin, nparams;
    int nout;       /* its results: v's op's (a recurrent training form's
                       three), or v alone */
    bool costly;    /* the recurrent training form: a forward pass again */
    DlcAttr attrs[DLC_MAX_ATTRS];
} Copy;

static bool copy_of(const DlcValue *v, Copy *c) {
    const DlcOp *d = v->def;
    memset(c, 0, sizeof *c);
    c->kind = d->kind;
    c->nout = 1;
    memcpy(c->attrs, d->attrs, sizeof c->attrs);
    /* the activations (dlc_op_is_activation) and these, computed again as
       they are */
    bool as_is = dlc_op_is_activation(d->kind);
    switch (d->kind) {
    case DLC_OP_ADD: case DLC_OP_MAXPOOL: case DLC_OP_AVGPOOL: case DLC_OP_GLOBALAVGPOOL:
    case DLC_OP_FLATTEN: case DLC_OP_RESHAPE: case DLC_OP_CONCAT: case DLC_OP_LRN:
    case DLC_OP_BATCHNORM_NORMALIZE:
        as_is = true;
        break;
    default:
        break;
    }
    if (as_is) {
        if (d->nin > (int)(sizeof c->in / sizeof *c->in))
            return false;
        memcpy(c->in, d->in, sizeof *d->in * (size_t)d->nin);
        c->nin = d->nin, c->nparams = d->nparams;
        return true;
    }
    if (dlc_op_is_recurrent_train(d->kind)) { /* (x[, lengths], @w_ih, ...) -> (y, hprev, cache) */
        if (v->result == 0 || d->nin > (int)(sizeof c->in / sizeof *c->in))
            return false;
        memcpy(c->in, d->in, sizeof *d->in * (size_t)d->nin);
        c->nin = d->nin, c->nparams = d->nparams, c->nout = d->nout;
        c->costly = true;
        return true;
    }
    switch (d->kind) {
    case DLC_OP_BATCHNORM_TRAIN: /* (x, @w, @b, @mean, @var) -> (y, mean, invstd) */
        if (v->result != 0)
            return false;
        c->kind = DLC_OP_BATCHNORM_NORMALIZE;
        memset(c->attrs, 0, sizeof c->attrs);
        dlc_op_fill_defaults(c->kind, c->attrs);
        dlc_attrs_at(c->kind, c->attrs, DLC_A_RELU)->b = dlc_op_fused_relu(d);
        DlcValue *in[] = {d->in[0], d->out[1], d->out[2], d->in[1], d->in[2]};
        memcpy(c->in, in, sizeof in);
        c->nin = 5, c->nparams = 2;
        return true;
    case DLC_OP_DROPOUT_TRAIN: /* (x) -> (y, mask) */
        if (v->result != 0)
            return false;
        c->kind = DLC_OP_DROPOUT_GRAD;
        memset(c->attrs, 0, sizeof c->attrs);
        c->in[0] = d->in[0], c->in[1] = d->out[1];
        c->nin = 2;
        return true;
    default:
        return false;
    }
}

/* Whether an op between from and to (exclusive) updates parameter p in
 * place: a weight update, or batchnorm_train's running statistics. */
static bool updated_between(const DlcNetwork *net, const DlcValue *p, int from, int to) {
    for (int i = from + 1; i < to; i++) {
        const DlcOp *op = net->ops[i];
        if (!dlc_op_is_update(op->kind) && op->kind != DLC_OP_BATCHNORM_TRAIN)
            continue;
        for (int j = op->nin - op->nparams; j < op->nin; j++)
            if (op->in[j] == p)
                return true;
    }
    return false;
}

/* Whether the copy can run just before op `at` reading only what is there
 * anyway: its tensor operands live at `at`, its parameters as they were. */
static bool operands_there(const Step *s, const Copy *c, int def, int at) {
    for (int j = 0; j < c->nin; j++) {
        const DlcValue *u = c->in[j];
        if (u->kind == DLC_VAL_PARAM ? updated_between(s->net, u, def, at)
                                     : u->kind == DLC_VAL_OP && last_use(s, u) < at)
            return false;
    }
    return true;
}

/* The first op after `after` that reads v; -1 if none does. */
static int next_reader(const DlcNetwork *net, const DlcValue *v, int after) {
    for (int i = after + 1; i < net->nops; i++)
        if (dlc_op_reads(net->ops[i], v))
            return i;
    return -1;
}

/* The largest value live during op p that can be recomputed before its
 * next reader after p (returned in *at), by a cheap op or, with costly, by
 * a recurrent layer's forward pass; NULL if there is none. */
static DlcValue *choose(const Step *s, int p, bool costly, int *at) {
    DlcValue *best = NULL;
    for (int i = 0; i < p; i++)
        for (int r = 0; r < s->net->ops[i]->nout; r++) {
            DlcValue *v = s->net->ops[i]->out[r];
            Copy c;
            if (last_use(s, v) <= p || dlc_op_reads(s->net->ops[p], v) || !copy_of(v, &c) ||
                c.costly != costly)
                continue;
            int next = next_reader(s->net, v, p);
            if (next < 0 || !operands_there(s, &c, i, next))
                continue;
            if (!best || value_bytes(s, v) > value_bytes(s, best))
                best = v, *at = next;
        }
    return best;
}

/* Puts a copy of v's op before op `at`; the readers from there on, and the
 * outputs, read the copy (of each result, for a copy of several). */
static void recompute(Step *s, DlcValue *v, int at) {
    DlcNetwork *net = s->net;
    Copy c;
    copy_of(v, &c);
    DlcValue *const *olds = c.nout > 1 ? v->def->out : &v;
    const char *names[DLC_MAX_RESULTS];
    DlcType types[DLC_MAX_RESULTS];
    for (int r = 0; r < c.nout; r++) {
        names[r] = dlc_network_unique_name(
            s->m, net, dlc_arena_printf(&s->m->arena, "%s.recomputed", olds[r]->name));
        types[r] = olds[r]->type;
    }
    DlcOp *op = dlc_network_add_op(s->m, net, c.kind, c.in, c.nin, c.nparams, c.attrs, types,
                                   names, c.nout, v->def->loc);
    if (!op)
        dlc_unreachable("recompute: cannot add a copy of '%s'", v->name);
    memmove(net->ops + at + 1, net->ops + at, sizeof *net->ops * (size_t)(net->nops - 1 - at));
    net->ops[at] = op;
    for (int r = 0; r < c.nout; r++) {
        for (int i = at + 1; i < net->nops; i++)
            for (int j = 0; j < net->ops[i]->nin; j++)
                if (net->ops[i]->in[j] == olds[r])
                    net->ops[i]->in[j] = op->out[r];
        for (int i = 0; i < net->noutputs; i++)
            if (net->outputs[i] == olds[r])
                net->outputs[i] = op->out[r];
    }
}

/* bytes for a message: in KiB, MiB or GiB, whichever reads best */
static const char *size_text(DlcArena *a, int64_t bytes) {
    double b = (double)bytes;
    if (b < 1 << 20)
        return dlc_arena_printf(a, "%.1f KiB", b / (1 << 10));
    if (b < 1 << 30)
        return dlc_arena_printf(a, "%.1f MiB", b / (1 << 20));
    return dlc_arena_printf(a, "%.2f GiB", b / (1 << 30));
}

static int by_bytes_desc(const void *a, const void *b) {
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The error when the budget cannot be met: the op at the peak, then the
 * values live there, largest first. */
static void report(DlcCtx *ctx, Step *s, int p, int64_t need, int64_t budget) {
    DlcNetwork *net = s->net;
    DlcArena *a = &s->m->arena;
    const DlcOp *op = net->ops[p];
    int64_t least = s->fixed + s->unbatched + s->live[p];
    dlc_error(ctx, op->loc,
              "network '%s' needs %s at batch %lld, over the memory budget of %s "
              "(--mem-budget): %s of parameters and optimizer state, %s of their gradients "
              "and other values without a batch dimension, and %s of batched values live "
              "during '%s' (op %d), where nothing more can be recomputed%s",
              net->name, size_text(a, need), (long long)s->batch, size_text(a, budget),
              size_text(a, s->fixed), size_text(a, s->unbatched), size_text(a, s->live[p]),
              dlc_op_info(op->kind)->name, p,
              need > least ? dlc_arena_printf(a, " (%s when placed in memory)", size_text(a, need - least)) : "");
    /* (bytes, index of the op, result) of each batched value live during op p */
    int64_t (*live)[3] = dlc_arena_alloc(a, sizeof *live * (size_t)(p + 1) * DLC_MAX_RESULTS);
    int n = 0;
    for (int i = 0; i <= p; i++)
        for (int r = 0; r < net->ops[i]->nout; r++)
            if (net->ops[i]->out[r]->type.batched && last_use(s, net->ops[i]->out[r]) >= p) {
                live[n][0] = value_bytes(s, net->ops[i]->out[r]);
                live[n][1] = i, live[n][2] = r;
                n++;
            }
    qsort(live, (size_t)n, sizeof *live, by_bytes_desc);
    int shown = n < 8 ? n : 8;
    for (int k = 0; k < shown; k++) {
        const DlcValue *v = net->ops[live[k][1]]->out[live[k][2]];
        char t[DLC_TYPE_STR_MAX];
        dlc_note(ctx, v->loc, "live there: %%%s, %s, %s", v->name,
                 dlc_type_str(&v->type, t, sizeof t), size_text(a, live[k][0]));
    }
    if (n > shown) {
        int64_t rest = 0;
        for (int k = shown; k < n; k++)
            rest += live[k][0];
        dlc_note(ctx, DLC_NOLOC, "and %d more values live there, %s in all", n - shown,
                 size_text(a, rest));
    }
}

/* The batch size a network's memory is counted at: its train section's
 * (NAME.train is trained by NAME's), else 64, the program's default. */
static int64_t batch_of(const DlcModule *m, const DlcNetwork *net) {
    char *base = dlc_arena_strdup((DlcArena *)&m->arena, net->name);
    size_t len;
    if (dlc_is_train_network(base, &len))
        base[len] = 0;
    const DlcTrain *t = dlc_module_find_train(m, base);
    const DlcCfg *b = t ? dlc_train_get(t, "batch") : NULL;
    return b && b->kind == DLC_CFG_INT ? b->i : 64;
}

/* Whether any op or output reads v. */
static bool has_reader(const DlcNetwork *net, const DlcValue *v) {
    for (int i = 0; i < net->noutputs; i++)
        if (net->outputs[i] == v)
            return true;
    return next_reader(net, v, -1) >= 0;
}

/* op's attributes by name for kind (which op then takes), the rest kind's
 * defaults. */
static void become(DlcOp *op, DlcOpKind kind) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_attrs_like(kind, op->kind, op->attrs, attrs);
    dlc_op_fill_defaults(kind, attrs);
    memcpy(op->attrs, attrs, sizeof attrs);
    op->kind = kind;
}

/* autodiff has a max pooling that alone reads its input return its argmax
 * (maxpool_train) for the gradient (maxpool_grad_argmax), so that the
 * input dies at the pooling.  The input is then not there to compute the
 * pooling's result again from, and the argmax is kept instead.  When
 * recomputing cannot meet the budget that way, the poolings go back to
 * maxpool and maxpool_grad, which reads the input again (with the ReLU's
 * gradient the argmax had applied): both the input (a batchnorm's result)
 * and the pooling's result can then be recomputed, which lowers the
 * least a network gets to (GoogLeNet's at 64x64, docs/passes.md; fit tries
 * this before masks_from_branches).  Returns whether any pooling changed. */
static bool pools_from_inputs(DlcModule *m, DlcNetwork *net) {
    bool changed = false;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *op = net->ops[i];
        if (op->kind != DLC_OP_MAXPOOL_GRAD_ARGMAX)
            continue;
        DlcOp *pool = op->in[1]->def;
        DlcValue **in = dlc_arena_alloc(&m->arena, sizeof *in * 2);
        in[0] = op->in[0], in[1] = pool->in[0];
        op->in = in;
        become(op, DLC_OP_MAXPOOL_GRAD);
        dlc_attrs_at(op->kind, op->attrs, DLC_A_RELU_GRAD)->b = dlc_op_relu_grad_mask(pool) >= 0;
        changed = true;
    }
    for (int i = 0; i < net->nops; i++)
        if (net->ops[i]->kind == DLC_OP_MAXPOOL_TRAIN) {
            become(net->ops[i], DLC_OP_MAXPOOL);
            net->ops[i]->nout = 1; /* the argmax, read by nothing now */
        }
    if (changed)
        dlc_network_reindex(m, net);
    return changed;
}

/* The fuse pass has the slices of a concat's gradient take their ReLUs'
 * masks from the concatenation, so that the branches' results need not be
 * kept.  When recomputing cannot meet the budget that way, the slices read
 * the branches' results again: each can then be recomputed on its own (a
 * batchnorm's from its statistics) just before its slice, where the
 * concatenation has to be live whole from the first slice to the last.
 * Going back only once nothing else qualifies gets GoogLeNet lower than
 * not going back, or going back before recomputing anything
 * (docs/passes.md).  A recomputed concatenation that only the masks read
 * goes.  Returns whether any slice changed. */
static bool masks_from_branches(DlcModule *m, DlcNetwork *net) {
    bool changed = false;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *op = net->ops[i];
        int k = op->kind == DLC_OP_SLICE ? dlc_op_relu_grad_mask(op) : -1;
        if (k < 0 || op->in[k]->kind != DLC_VAL_OP || op->in[k]->def->kind != DLC_OP_CONCAT)
            continue;
        DlcValue *branch = dlc_concat_operand_sliced(op->in[k]->def, op);
        if (branch)
            op->in[k] = branch, changed = true;
    }
    int n = 0;
    for (int i = 0; i < net->nops; i++)
        if (net->ops[i]->kind != DLC_OP_CONCAT || has_reader(net, net->ops[i]->out[0]))
            net->ops[n++] = net->ops[i];
    if (n < net->nops) {
        net->nops = n;
        dlc_network_reindex(m, net);
    }
    return changed;
}

static bool fit(DlcCtx *ctx, DlcModule *m, DlcNetwork *net, int64_t budget) {
    Step s = {.m = m, .net = net, .batch = batch_of(m, net), .elem = 4};
    if (net->ninputs > 0 && net->inputs[0]->type.dtype == DLC_F64)
        s.elem = 8;
    for (int i = 0; i < net->nparams; i++)
        s.fixed += dlc_plan_elements(net->params[i]) * s.elem;
    if (net->nops == 0) {
        if (s.fixed <= budget)
            return true;
        dlc_error(ctx, net->loc, "network '%s' needs %s of parameters, over the memory budget "
                  "of %s (--mem-budget)", net->name, size_text(&m->arena, s.fixed),
                  size_text(&m->arena, budget));
        return false;
    }
    /* each round takes one value off the peak; a bound keeps a planner bug
       from looping */
    int reverted = 0; /* masks_from_branches, then pools_from_inputs, have run */
    for (int round = 0; round <= 4 * net->nops + 4; round++) {
        analyse(&s);
        int p = peak(&s), at = 0;
        int64_t least = s.fixed + s.unbatched + s.live[p], placed = least;
        if (least <= budget && (placed = placed_bytes(&s)) <= budget)
            return true;
        DlcValue *v = choose(&s, p, false, &at);
        if (!v) /* a recurrent layer's gates, before reverting anything */
            v = choose(&s, p, true, &at);
        /* when nothing qualifies, go back on the poolings first and on the
           masks next, each only when still needed: the other way round
           leaves GoogLeNet's step larger (docs/passes.md) */
        if (!v && reverted == 0) {
            reverted = 1;
            if (pools_from_inputs(m, net))
                continue;
        }
        if (!v && reverted == 1) {
            reverted = 2;
            if (masks_from_branches(m, net))
                continue;
        }
        if (!v) {
            report(ctx, &s, p, placed, budget);
            return false;
        }
        recompute(&s, v, at);
    }
    dlc_unreachable("recompute: no progress on '%s'", net->name);
}

bool dlc_pass_recompute(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    if (!opt || opt->mem_budget <= 0)
        return true;
    bool ok = true;
    for (int i = 0; i < m->nnetworks; i++)
        ok &= fit(ctx, m, m->networks[i], opt->mem_budget);
    return ok;
}
