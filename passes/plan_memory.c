/* plan_memory.c — where each value of a network lives in the activation
 * arena.
 *
 * A value needs its memory from the op that defines it to the last op that
 * reads it (its live range, both ends included, so an op never writes a
 * result over an operand it is still reading); a value the caller reads
 * after the network has run (an output, or one the caller pins: the
 * gradients that NAME_gradient shows) lives to the end.  Two values whose
 * live ranges are disjoint may share memory.  The plan places the values
 * largest first, each at the lowest offset where it overlaps no placed
 * value whose live range meets its own (greedy by size, as TensorFlow
 * Lite's arena planner does); the arena is as large as the highest end.
 *
 * The lower bound is the most memory live at any one op: no placement can
 * do with less.  The naive sum is every value in a slot of its own, which
 * is what code generation did before this plan.  Values in a batch take
 * numel floats per sample and are placed in their own part of the arena,
 * in floats per sample; the others (gradients of parameters, the loss)
 * in a second part, in floats.
 *
 * Preconditions: the network verifies; its ops are in execution order. */
#include <stdlib.h>

#include "passes.h"

typedef struct Interval {
    const DlcValue *v;
    int first, last;   /* the ops between which it is live */
    int64_t size;      /* floats, or floats per sample */
    int64_t offset;    /* where the plan puts it */
} Interval;

static int64_t round16(int64_t x) { return (x + 15) & ~(int64_t)15; }

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

/* One part's naive sum (a slot for every value) and lower bound (the most
 * live during any one op). */
static void measure(Interval **list, int n, int nops, int64_t *naive, int64_t *lower,
                    DlcArena *arena) {
    *naive = *lower = 0;
    int64_t *live = dlc_arena_alloc(arena, sizeof *live * (size_t)(nops + 1));
    for (int i = 0; i < n; i++) {
        *naive += list[i]->size;
        for (int k = list[i]->first; k <= list[i]->last; k++)
            live[k] += list[i]->size;
    }
    for (int k = 0; k < nops; k++)
        *lower = live[k] > *lower ? live[k] : *lower;
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

void dlc_plan_memory(DlcArena *arena, const DlcNetwork *net, const DlcValue *const *pinned,
                     int npinned, bool share, DlcMemPlan *plan) {
    DlcMap index; /* value name -> its interval + 1 */
    dlc_map_init(&index, arena);
    dlc_map_init(&plan->offset, arena);
    int n = 0;
    for (int i = 0; i < net->nops; i++)
        n += net->ops[i]->nout;
    Interval *all = dlc_arena_alloc(arena, sizeof *all * (size_t)(n + 1));
    n = 0;
    for (int i = 0; i < net->nops; i++)
        for (int r = 0; r < net->ops[i]->nout; r++) {
            const DlcValue *v = net->ops[i]->out[r];
            all[n] = (Interval){v, i, i, round16(dlc_type_numel(&v->type)), 0};
            dlc_map_put(&index, v->name, (void *)(intptr_t)(++n));
        }
    for (int i = 0; i < net->nops; i++)
        for (int j = 0; j < net->ops[i]->nin; j++) {
            intptr_t at = (intptr_t)dlc_map_get(&index, net->ops[i]->in[j]->name);
            if (at)
                all[at - 1].last = i;
        }
    for (int i = 0; i < net->noutputs + npinned; i++) {
        const DlcValue *v = i < net->noutputs ? net->outputs[i] : pinned[i - net->noutputs];
        intptr_t at = (intptr_t)dlc_map_get(&index, v->name);
        if (at)
            all[at - 1].last = net->nops - 1;
    }
    for (int part = 0; part < 2; part++) {
        Interval **list = dlc_arena_alloc(arena, sizeof *list * (size_t)(n + 1));
        int m = 0;
        for (int i = 0; i < n; i++)
            if (all[i].v->type.batched == (part == 0))
                list[m++] = &all[i];
        measure(list, m, net->nops, &plan->naive[part], &plan->lower[part], arena);
        plan->size[part] = place(list, m, share, arena);
        check_placement(list, m);
        for (int i = 0; i < m; i++)
            dlc_map_put(&plan->offset, list[i]->v->name, (void *)(intptr_t)(list[i]->offset + 1));
    }
}

int64_t dlc_plan_offset(const DlcMemPlan *plan, const DlcValue *v) {
    return (intptr_t)dlc_map_get(&plan->offset, v->name) - 1;
}
