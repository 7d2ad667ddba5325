/* plan_buckets.c — the gradient buckets of data-parallel training (see
 * plan_buckets.h).
 *
 * Each trained parameter's gradient is complete after one op of the
 * backward pass: the op that defines the gradient value its update reads
 * (before clipping), or for a dense layer whose weight update computes the
 * gradient itself (fuse), that update.  Sorting the gradients by that op
 * gives the order in which they become ready; laying them out in that
 * order, each at a multiple of 16 floats (64 bytes, as the arena's
 * buffers), and cutting the layout into buckets of at most `cap` floats
 * gives buckets that complete one after the other, the first while most of
 * the backward pass is still to run.  The cut starts from the end: the
 * last bucket, whose sum no computation is left to hide, holds only the
 * gradients completed last, up to a smaller cap (1/DLC_BUCKET_TAIL of
 * the gradients, at least DLC_BUCKET_MIN_BYTES), and the first bucket
 * takes what remains.  A gradient larger than the cap gets a bucket of
 * its own; a bucket never splits a gradient.
 *
 * Preconditions: the network verifies; the optimizer pass has run (its
 * updates name the parameters that train). */
#include <stdlib.h>
#include <string.h>

#include "plan_buckets.h"
#include "plan_memory.h"

/* The index of the op that defines v, -1 for a value no op defines. */
static int def_index(const DlcNetwork *net, const DlcValue *v) {
    for (int i = 0; v->kind == DLC_VAL_OP && i < net->nops; i++)
        for (int r = 0; r < net->ops[i]->nout; r++)
            if (net->ops[i]->out[r] == v)
                return i;
    return -1;
}

static int op_index(const DlcNetwork *net, const DlcOp *op) {
    for (int i = 0; i < net->nops; i++)
        if (net->ops[i] == op)
            return i;
    return -1;
}

static int by_ready(const void *a, const void *b) {
    const DlcBucketGrad *x = a, *y = b;
    if (x->ready != y->ready)
        return x->ready < y->ready ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset; /* the parameters' order */
}

void dlc_plan_buckets(DlcArena *arena, const DlcNetwork *train, int64_t cap_bytes,
                      DlcBucketPlan *plan) {
    *plan = (DlcBucketPlan){0};
    plan->grads = dlc_arena_alloc(arena, sizeof *plan->grads * (size_t)(train->nparams + 1));
    for (int i = 0; i < train->nparams; i++) {
        const DlcValue *p = train->params[i];
        const DlcOp *up = p->trainable ? dlc_param_update(train, p) : NULL;
        if (!up)
            continue;
        const DlcValue *g = dlc_param_gradient(train, p);
        int ready = g ? def_index(train, g) : op_index(train, up);
        if (ready < 0)
            continue; /* a gradient no op computes (an input's): nothing to sum */
        /* offset: the parameters' order, for the sort's ties */
        plan->grads[plan->ngrads++] = (DlcBucketGrad){
            .param = p, .grad = g, .update = up, .ready = ready, .offset = i,
            .count = dlc_type_numel(&p->type)};
    }
    qsort(plan->grads, (size_t)plan->ngrads, sizeof *plan->grads, by_ready);
    for (int i = 0; i < plan->ngrads; i++) {
        plan->grads[i].offset = plan->floats;
        plan->floats += dlc_plan_elements(plan->grads[i].param);
    }
    int64_t cap = cap_bytes > 0 ? cap_bytes / (int64_t)sizeof(float) : 0;
    if (cap <= 0) {
        int64_t target = (plan->floats + DLC_BUCKET_TARGET - 1) / DLC_BUCKET_TARGET;
        cap = DLC_BUCKET_MIN_BYTES / (int64_t)sizeof(float);
        cap = target > cap ? target : cap;
    }
    plan->cap = cap;
    /* from the end: the last bucket, whose sum nothing is left to hide,
       holds the gradients completed last, up to a smaller cap */
    int64_t tail = plan->floats / DLC_BUCKET_TAIL;
    tail = tail < cap ? tail : cap;
    tail = tail > DLC_BUCKET_MIN_BYTES / (int64_t)sizeof(float) ? tail
                                                                 : DLC_BUCKET_MIN_BYTES / (int64_t)sizeof(float);
    tail = tail < cap ? tail : cap;
    int *first = dlc_arena_alloc(arena, sizeof *first * (size_t)(plan->ngrads + 1));
    int nb = 0;
    int64_t fill = 0;
    for (int i = plan->ngrads - 1; i >= 0; i--) {
        int64_t size = dlc_plan_elements(plan->grads[i].param);
        if (!nb || fill + size > (nb == 1 ? tail : cap)) {
            nb++;
            fill = 0;
        }
        fill += size;
        first[nb - 1] = i; /* the bucket's first gradient so far */
    }
    plan->buckets = dlc_arena_alloc(arena, sizeof *plan->buckets * (size_t)(nb + 1));
    for (int k = 0; k < nb; k++) { /* in ready order: the last found first */
        DlcBucket *b = &plan->buckets[plan->nbuckets++];
        int from = first[nb - 1 - k], to = k + 1 < nb ? first[nb - 2 - k] : plan->ngrads;
        *b = (DlcBucket){.offset = plan->grads[from].offset, .first = from, .ngrads = to - from};
        for (int i = from; i < to; i++) {
            DlcBucketGrad *g = &plan->grads[i];
            b->count += dlc_plan_elements(g->param);
            b->ready = g->ready > b->ready ? g->ready : b->ready;
            g->bucket = plan->nbuckets - 1;
        }
    }
}

const DlcBucketGrad *dlc_bucket_of_value(const DlcBucketPlan *plan, const DlcValue *v) {
    for (int i = 0; v && i < plan->ngrads; i++)
        if (plan->grads[i].grad == v)
            return &plan->grads[i];
    return NULL;
}

const DlcBucketGrad *dlc_bucket_of_update(const DlcBucketPlan *plan, const DlcOp *update) {
    for (int i = 0; i < plan->ngrads; i++)
        if (plan->grads[i].update == update)
            return &plan->grads[i];
    return NULL;
}
