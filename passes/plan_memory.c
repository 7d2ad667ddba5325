/* plan_memory.c — where each value of a network lives in the activation
 * arena.
 *
 * A value needs its memory from the op that defines it to the last op that
 * reads it (its live range, both ends included, so an op never writes a
 * result over an operand it is still reading); a value the caller reads
 * after the network has run (an output, or, when the caller keeps them,
 * the gradients that NAME_gradient shows) lives to the end.  A parameter's
 * gradient otherwise dies at its weight update, which the optimizer pass
 * puts right after the last op that needs the gradient or reads the
 * weight (or, clipped, at its clip_scale, right before).  Two values whose
 * live ranges are disjoint may share memory.  The plan places the values
 * largest first, each at the lowest offset where it overlaps no placed
 * value whose live range meets its own (greedy by size, as TensorFlow
 * Lite's arena planner does); the arena is as large as the highest end.
 *
 * An elementwise op (and a flatten or reshape) may write its result over
 * an operand that dies at it (dlc_op_in_place): the result then takes the
 * operand's memory, and the two are one interval from the operand's
 * definition to the result's last reader (a ReLU's gradient over the
 * incoming gradient, a residual add over one of its summands, a residual
 * convolution over its residual).
 *
 * The lower bound is the most memory live at any one op: no placement can
 * do with less.  The naive sum is every value in a slot of its own, which
 * is what -fno-plan-memory generates.  Values in a batch take
 * numel floats per sample and are placed in their own part of the arena,
 * in floats per sample; the others (gradients of parameters, the loss)
 * in a second part, in floats.
 *
 * Preconditions: the network verifies; its ops are in execution order. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct Interval {
    const DlcValue *v;
    int first, last;   /* the ops between which it is live; for a host, its
                          guests' ops too */
    int64_t size;      /* floats, or floats per sample */
    int64_t offset;    /* where the plan puts it */
    bool kept;         /* read after the network has run */
    struct Interval *host; /* the value whose memory it takes over in place */
} Interval;

int64_t dlc_plan_elements(const DlcValue *v) {
    int64_t n = dlc_value_numel(v);
    if (v->type.dtype == DLC_I8) /* four to a float (four to a double in f64 code: more than enough) */
        n = (n + 3) / 4;
    return (n + 15) & ~(int64_t)15;
}

static int by_size_then_start(const void *a, const void *b) {
    const Interval *x = *(const Interval *const *)a, *y = *(const Interval *const *)b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b) {
    const Interval *x = *(const Interval *const *)a, *y = *(const Interval *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* One part's memory live during each op, and the most of it (the lower
 * bound), counting each host once for its guests. */
static int64_t *measure(Interval **list, int n, int nops, int64_t *lower, DlcArena *arena) {
    *lower = 0;
    int64_t *live = dlc_arena_alloc(arena, sizeof *live * (size_t)(nops + 1));
    for (int i = 0; i < n; i++)
        for (int k = list[i]->first; k <= list[i]->last; k++)
            live[k] += list[i]->size;
    for (int k = 0; k < nops; k++)
        *lower = live[k] > *lower ? live[k] : *lower;
    return live;
}

/* Places one part's values (their offsets) and returns the part's size. */
static int64_t place(Interval **list, int n, bool share, DlcArena *arena) {
    int64_t size = 0;
    if (!share) { /* a slot of its own for each, in op order */
        for (int i = 0; i < n; i++) {
            list[i]->offset = size;
            size += list[i]->size;
        }
        return size;
    }
    qsort(list, (size_t)n, sizeof *list, by_size_then_start);
    /* the placed values whose ranges meet the current one, by offset */
    Interval **near = dlc_arena_alloc(arena, sizeof *near * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        Interval *v = list[i];
        int m = 0;
        for (int j = 0; j < i; j++)
            if (list[j]->first <= v->last && v->first <= list[j]->last)
                near[m++] = list[j];
        qsort(near, (size_t)m, sizeof *near, by_offset);
        /* the lowest gap between them that is large enough */
        int64_t offset = 0;
        for (int j = 0; j < m; j++) {
            if (near[j]->offset >= offset + v->size)
                break;
            int64_t end = near[j]->offset + near[j]->size;
            offset = end > offset ? end : offset;
        }
        v->offset = offset;
        size = offset + v->size > size ? offset + v->size : size;
    }
    return size;
}

/* Whether two placed values overlap in both time and memory: a planner
 * bug, which would make the generated code compute wrong results. */
static void check_placement(Interval **list, int n) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const Interval *a = list[i], *b = list[j];
            bool in_time = a->first <= b->last && b->first <= a->last;
            bool in_memory = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            if (in_time && in_memory)
                dlc_unreachable("plan_memory: overlapping live values");
        }
}

/* Where op i may put its result: over an operand that dies at it, when the
 * op allows it and the two are alike (NULL otherwise).  clip_scale's
 * coefficient, which every element reads, is not one: only its gradient;
 * nor a residual convolution's source: only its residual. */
static Interval *in_place_host(const DlcOp *op, int i, Interval *res, const DlcMap *index,
                               Interval *all) {
    if (!dlc_op_in_place(op))
        return NULL;
    int hosts = op->kind == DLC_OP_CLIP_SCALE ? 1 : op->nin - op->nparams;
    for (int j = op->kind == DLC_OP_CONV2D; j < hosts; j++) {
        intptr_t at = (intptr_t)dlc_map_get(index, op->in[j]->name);
        Interval *u = at ? &all[at - 1] : NULL;
        if (u && !u->kept && u->last == i && u->size == res->size &&
            u->v->type.batched == res->v->type.batched)
            return u->host ? u->host : u;
    }
    return NULL;
}

/* Every op result's interval, in op order, with in-place results joined to
 * their hosts when share is set; each one's own last use in *last.  Returns
 * how many. */
static int intervals(DlcArena *arena, const DlcNetwork *net, bool share, bool keep_gradients,
                     Interval **out, DlcMap *last) {
    DlcMap index; /* value name -> its interval + 1 */
    dlc_map_init(&index, arena);
    int n = 0;
    for (int i = 0; i < net->nops; i++)
        n += net->ops[i]->nout;
    Interval *all = dlc_arena_alloc(arena, sizeof *all * (size_t)(n + 1));
    n = 0;
    for (int i = 0; i < net->nops; i++)
        for (int r = 0; r < net->ops[i]->nout; r++) {
            const DlcValue *v = net->ops[i]->out[r];
            all[n] = (Interval){.v = v, .first = i, .last = i,
                                .size = dlc_plan_elements(v)};
            dlc_map_put(&index, v->name, (void *)(intptr_t)(++n));
        }
    for (int i = 0; i < net->nops; i++)
        for (int j = 0; j < net->ops[i]->nin; j++) {
            intptr_t at = (intptr_t)dlc_map_get(&index, net->ops[i]->in[j]->name);
            if (at)
                all[at - 1].last = i;
        }
    /* the outputs, and the gradients that NAME_gradient shows if kept */
    for (int i = 0; i < net->noutputs + (keep_gradients ? net->nparams : 0); i++) {
        const DlcValue *v = i < net->noutputs ? net->outputs[i]
                                              : dlc_param_gradient(net, net->params[i - net->noutputs]);
        intptr_t at = v ? (intptr_t)dlc_map_get(&index, v->name) : 0;
        if (at) {
            all[at - 1].last = net->nops - 1;
            all[at - 1].kept = true;
        }
    }
    dlc_map_init(last, arena);
    for (int i = 0; i < n; i++)
        dlc_map_put(last, all[i].v->name, (void *)(intptr_t)(all[i].last + 1));
    for (int i = 0, k = 0; share && i < net->nops; k += net->ops[i]->nout, i++) {
        Interval *res = &all[k];
        Interval *host = net->ops[i]->nout == 1 ? in_place_host(net->ops[i], i, res, &index, all)
                                                : NULL;
        if (host) {
            res->host = host;
            host->last = res->last > host->last ? res->last : host->last;
        }
    }
    *out = all;
    return n;
}

void dlc_plan_memory(DlcArena *arena, const DlcNetwork *net, DlcPlanKind kind,
                     bool keep_gradients, DlcMemPlan *plan) {
    Interval *all;
    int n = intervals(arena, net, kind != DLC_PLAN_OWN, keep_gradients, &all, &plan->last);
    dlc_map_init(&plan->offset, arena);
    for (int part = 0; part < 2; part++) {
        /* the part's values, and those of them that have memory of their own */
        Interval **list = dlc_arena_alloc(arena, sizeof *list * (size_t)(n + 1));
        Interval **own = dlc_arena_alloc(arena, sizeof *own * (size_t)(n + 1));
        int m = 0, nown = 0;
        plan->naive[part] = 0;
        for (int i = 0; i < n; i++)
            if (all[i].v->type.batched == (part == 0)) {
                list[m++] = &all[i];
                plan->naive[part] += all[i].size;
                if (!all[i].host)
                    own[nown++] = &all[i];
            }
        plan->live[part] = measure(own, nown, net->nops, &plan->lower[part], arena);
        plan->size[part] = 0;
        if (kind == DLC_PLAN_MEASURE)
            continue;
        plan->size[part] = place(own, nown, kind == DLC_PLAN_SHARED, arena);
        check_placement(own, nown);
        for (int i = 0; i < m; i++) {
            const Interval *at = list[i]->host ? list[i]->host : list[i];
            dlc_map_put(&plan->offset, list[i]->v->name, (void *)(intptr_t)(at->offset + 1));
        }
    }
}

const DlcOp *dlc_param_update(const DlcNetwork *net, const DlcValue *p) {
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        bool consumes = dlc_op_is_update(op->kind) || op->kind == DLC_OP_PARAM_GRAD;
        if (consumes && op->nparams > 0 && strcmp(op->in[op->nin - op->nparams]->name, p->name) == 0)
            return op;
    }
    return NULL;
}

const DlcValue *dlc_param_gradient(const DlcNetwork *net, const DlcValue *p) {
    const DlcOp *op = dlc_param_update(net, p);
    if (!op || dlc_op_is_dense_update(op->kind))
        return NULL;
    const DlcValue *g = op->in[0];
    return g->kind == DLC_VAL_OP && g->def->kind == DLC_OP_CLIP_SCALE ? g->def->in[0] : g;
}

int dlc_plan_last_use(const DlcMemPlan *plan, const DlcValue *v) {
    return (int)(intptr_t)dlc_map_get(&plan->last, v->name) - 1;
}

int64_t dlc_plan_offset(const DlcMemPlan *plan, const DlcValue *v) {
    return (intptr_t)dlc_map_get(&plan->offset, v->name) - 1;
}
