/* emit_norm.c — the GPU kernels of normalization: batchnorm in each form
 * (inference, batchnorm_train, batchnorm_normalize, and folded into a
 * conv2d for emit_gemm.c), its gradients batchnorm_grad_input and
 * batchnorm_grad_weight, bias_grad (the same sum per channel), lrn,
 * softmax and their gradients.
 *
 * LRN and softmax are maps.  The sums per channel split each channel among
 * blocks (Parts): each part's sums go to scratch memory, and a small
 * kernel adds the parts in order, so that results do not depend on timing:
 * no atomics.  Semantics follow the CPU kernels (runtime/kernels/). */
#include <math.h>
#include <string.h>

#include "emit.h"

/* ---- LRN and softmax: maps ------------------------------------------------------ */

/* s_c = k + alpha/size * the sum of x_j^2 over c's window, at x (channel 0) */
static LLVMValueRef lrn_scale(Kb *kb, const DlcOp *op, LLVMValueRef x, LLVMValueRef c, int64_t channels,
                              int64_t hw) {
    int64_t size = dlc_attr_int(op, DLC_A_SIZE);
    LLVMValueRef lo = kb_max(kb, kb_sub(kb, c, kb_int(kb, size / 2)), kb_int(kb, 0));
    LLVMValueRef hi = kb_min(kb, kb_addi(kb, c, (size - 1) / 2 + 1), kb_int(kb, channels));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef j = kb_for(kb, lo, hi, kb_int(kb, 1));
    LLVMValueRef v = kb_load(kb, x, kb_muli(kb, kb_get(kb, j), hw));
    kb_set(kb, sum, kb_fma(kb, v, v, kb_get(kb, sum)));
    kb_endfor(kb);
    return kb_fma(kb, kb_float(kb, dlc_attr_float(op, DLC_A_ALPHA) / (double)size), kb_get(kb, sum),
                  kb_float(kb, dlc_attr_float(op, DLC_A_K)));
}

/* lrn (fwd: (x) -> y) or lrn_grad ((dy, x, y) -> dx): a thread per element */
static void lrn(NvKernels *nk, const DlcOp *op, const char *tag, bool fwd) {
    Build b;
    int slots[4] = {0, 1, 2, NV_RESULT};
    if (fwd)
        slots[1] = NV_RESULT;
    nv_start(&b, nk, op, tag, "", slots, fwd ? 2 : 4, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    int64_t channels = y->type.dims[0], hw = nv_numel(y) / channels, size = dlc_attr_int(op, DLC_A_SIZE);
    double beta = dlc_attr_float(op, DLC_A_BETA);
    LLVMValueRef i = nv_begin_map(&b, nv_numel(y), 0);
    LLVMValueRef sample = kb_divi(kb, i, channels * hw), r = kb_remi(kb, i, channels * hw);
    LLVMValueRef c = kb_divi(kb, r, hw), pixel = kb_add(kb, kb_muli(kb, sample, channels * hw), kb_remi(kb, r, hw));
    LLVMValueRef xp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[fwd ? 0 : 1], &pixel, 1, "");
    LLVMValueRef s = lrn_scale(kb, op, xp, c, channels, hw);
    if (fwd) {
        kb_store(kb, b.p[1], i, kb_fmul(kb, kb_load(kb, b.p[0], i), kb_pow(kb, s, -beta)));
    } else {
        LLVMValueRef dyp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], &pixel, 1, "");
        LLVMValueRef yp = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[2], &pixel, 1, "");
        LLVMValueRef lo = kb_max(kb, kb_sub(kb, c, kb_int(kb, (size - 1) / 2)), kb_int(kb, 0));
        LLVMValueRef hi = kb_min(kb, kb_addi(kb, c, size / 2 + 1), kb_int(kb, channels));
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef j = kb_for(kb, lo, hi, kb_int(kb, 1));
        LLVMValueRef at = kb_muli(kb, kb_get(kb, j), hw);
        LLVMValueRef sj = lrn_scale(kb, op, xp, kb_get(kb, j), channels, hw);
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum),
                                kb_fdiv(kb, kb_fmul(kb, kb_load(kb, dyp, at), kb_load(kb, yp, at)), sj)));
        kb_endfor(kb);
        double coef = 2.0 * dlc_attr_float(op, DLC_A_ALPHA) * beta / (double)size;
        LLVMValueRef dx = kb_fsub(kb, kb_fmul(kb, kb_load(kb, b.p[0], i), kb_pow(kb, s, -beta)),
                                  kb_fmul(kb, kb_fmul(kb, kb_float(kb, coef), kb_load(kb, b.p[1], i)),
                                          kb_get(kb, sum)));
        kb_store(kb, b.p[3], i, dx);
    }
    nv_end_map(&b);
}

/* softmax (fwd: (x) -> y) and its gradient ((dy, y) -> dx): one thread
 * per (outer, inner) row of the axis */
static void softmax(NvKernels *nk, const DlcOp *op, const char *tag, bool fwd) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    if (fwd)
        slots[1] = NV_RESULT;
    nv_start(&b, nk, op, tag, "", slots, fwd ? 2 : 3, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *x = op->in[0];
    int axis_i = nv_norm_axis(dlc_attr_int(op, DLC_A_AXIS), x->type.rank);
    int64_t before, after, axis = x->type.dims[axis_i];
    nv_around_axis(&x->type, axis_i, &before, &after);
    LLVMValueRef i = nv_begin_map(&b, before * after, 0);
    LLVMValueRef base = kb_add(kb, kb_muli(kb, kb_divi(kb, i, after), axis * after), kb_remi(kb, i, after));
    LLVMValueRef zero = kb_int(kb, 0), end = kb_int(kb, axis), one = kb_int(kb, 1);
#define AT(a) kb_add(kb, base, kb_muli(kb, (a), after))
    if (fwd) {
        LLVMValueRef max = kb_var(kb, kb->f32, kb_float(kb, -INFINITY));
        LLVMValueRef a = kb_for(kb, zero, end, one);
        kb_set(kb, max, kb_fmax(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_get(kb, max)));
        kb_endfor(kb);
        LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
        a = kb_for(kb, zero, end, one);
        LLVMValueRef e = kb_exp(kb, kb_fsub(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_get(kb, max)));
        kb_store(kb, b.p[1], AT(kb_get(kb, a)), e);
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), e));
        kb_endfor(kb);
        a = kb_for(kb, zero, end, one);
        kb_store(kb, b.p[1], AT(kb_get(kb, a)), kb_fdiv(kb, kb_load(kb, b.p[1], AT(kb_get(kb, a))), kb_get(kb, sum)));
        kb_endfor(kb);
    } else {
        LLVMValueRef dot = kb_var(kb, kb->f32, kb_float(kb, 0));
        LLVMValueRef a = kb_for(kb, zero, end, one);
        kb_set(kb, dot, kb_fma(kb, kb_load(kb, b.p[0], AT(kb_get(kb, a))), kb_load(kb, b.p[1], AT(kb_get(kb, a))), kb_get(kb, dot)));
        kb_endfor(kb);
        a = kb_for(kb, zero, end, one);
        LLVMValueRef at = AT(kb_get(kb, a));
        kb_store(kb, b.p[2], at, kb_fmul(kb, kb_load(kb, b.p[1], at), kb_fsub(kb, kb_load(kb, b.p[0], at), kb_get(kb, dot))));
        kb_endfor(kb);
    }
#undef AT
    nv_end_map(&b);
}

/* ---- channel reductions in parts ------------------------------------------------ */

/* For each row's items i in [0, count), the block's threads take i = tid,
 * tid + ROW_THREADS, ...; at(i) is the element of channel c. */
typedef struct Channel {
    int64_t c, hw;   /* channels, values per channel of a sample */
    LLVMValueRef ch; /* this block's channel */
    bool steps;      /* values [T, c] (per_step=true, hw = T): row i's is at i c */
} Channel;

static LLVMValueRef channel_at(Kb *kb, const Channel *ch, LLVMValueRef i) {
    if (ch->steps)
        return kb_add(kb, kb_muli(kb, i, ch->c), ch->ch);
    LLVMValueRef s = kb_divi(kb, i, ch->hw), r = kb_remi(kb, i, ch->hw);
    return kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, ch->c), ch->ch), ch->hw), r);
}

/* A channel's values split among `parts` blocks (grid (channels, parts)):
 * a channel of a large batch is too much work for one block, and a layer
 * has too few channels to fill the GPU.  Block (ch, part) takes the
 * channel's items [lo, hi) (item i is channel_at(i)); each part's result
 * goes to scratch memory, and a small kernel adds the parts in order, so
 * sums do not depend on timing. */
typedef struct Parts {
    Channel ch;
    int64_t parts;
    LLVMValueRef part, lo, hi, cnt; /* cnt: the channel's items, n hw */
} Parts;

/* Parts enough for 4 blocks per multiprocessor, keeping at least 4096
 * items per part at a batch of 32. */
static int64_t channel_parts(const NvKernels *nk, int64_t c, int64_t hw) {
    int64_t parts = 1;
    while (c * parts < 4 * (int64_t)nk->multiprocessors && hw * 32 / (parts * 2) >= 4096 && parts < 64)
        parts *= 2;
    return parts;
}

static void begin_parts(Build *b, Parts *p, int64_t c, int64_t hw) {
    Kb *kb = b->kb;
    p->ch = (Channel){.c = c, .hw = hw, .ch = nv_begin_rows(b, 0, c)};
    p->parts = channel_parts(b->nk, c, hw);
    b->l->gy = p->parts;
    p->part = kb_ctaid(kb, 'y');
    p->cnt = nv_count(b, hw, 0);
    LLVMValueRef chunk = kb_divi(kb, kb_addi(kb, p->cnt, p->parts - 1), p->parts);
    p->lo = kb_mul(kb, p->part, chunk);
    p->hi = kb_min(kb, p->cnt, kb_add(kb, p->lo, chunk));
}

/* Where value k of this block's part goes in scratch memory, with `width`
 * values per part: parts of a channel side by side, channel after channel
 * (sum_parts reads them back). */
static LLVMValueRef part_at(Kb *kb, const Parts *p, int width, int k) {
    return kb_addi(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, p->ch.ch, p->parts), p->part), width), k);
}

/* for each of this thread's items of the part: returns the loop counter */
static LLVMValueRef parts_for(Kb *kb, const Parts *p) {
    return kb_for(kb, kb_add(kb, p->lo, kb_tid(kb)), p->hi, kb_int(kb, ROW_THREADS));
}

/* The sum of the parts' values k (of `width` per part) of channel ch, in order. */
static LLVMValueRef sum_parts(Kb *kb, LLVMValueRef ws, LLVMValueRef ch, int64_t parts, int width, int k) {
    LLVMValueRef sum = kb_float(kb, 0);
    for (int64_t s = 0; s < parts; s++)
        sum = kb_fadd(kb, sum, kb_load(kb, ws, kb_addi(kb, kb_muli(kb, ch, parts * width), s * width + k)));
    return sum;
}

/* bias_grad, and batchnorm_grad_weight (bn): the sum per channel of dy
 * (times xhat), in parts, then the parts' sum */
static void channel_sum(NvKernels *nk, const DlcOp *op, const char *tag, bool bn) {
    Build b;
    const DlcValue *dy = op->in[0];
    int64_t c = op->out[0]->type.dims[0];
    /* (dy, scratch) or (dy, x, mean, invstd, scratch) */
    int slots[5] = {0, 1, 2, 3, NV_WORKSPACE}, ws = bn ? 4 : 1;
    slots[ws] = NV_WORKSPACE;
    nv_start(&b, nk, op, tag, "part", slots, ws + 1, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, nv_numel(dy) / c);
    /* a dense layer's on every step: dy [T, c], the sum of n T rows */
    p.ch.steps = !bn && dlc_attr_true(op->kind, op->attrs, DLC_A_PER_STEP);
    b.l->workspace = c * p.parts;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef mean = bn ? kb_load(kb, b.p[2], p.ch.ch) : NULL, invstd = bn ? kb_load(kb, b.p[3], p.ch.ch) : NULL;
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    LLVMValueRef at = channel_at(kb, &p.ch, kb_get(kb, i)), g = kb_load(kb, b.p[0], at);
    if (bn)
        g = kb_fmul(kb, g, kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], at), mean), invstd));
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), g));
    kb_endfor(kb);
    LLVMValueRef total = kb_block_sum(kb, scratch, kb_get(kb, sum), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[ws], part_at(kb, &p, 1, 0), total);
    kb_endif(kb);
    kb_end(kb);

    int sum_slots[2] = {NV_RESULT, NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "sum", sum_slots, 2, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = nv_begin_map(&b, 0, c);
    kb_store(kb, b.p[0], ch, sum_parts(kb, b.p[1], ch, p.parts, 1, 0));
    nv_end_map(&b);
}

/* y, a map: batchnorm (inference, from the running statistics), the
 * batchnorm folded into a conv2d (batchnorm=true: a second kernel of the
 * conv's over its own result, in place, after the product, which applies
 * its bias and no ReLU: emit_gemm.c), and from the batch's statistics
 * batchnorm_normalize and batchnorm_train's last kernel. */
void nv_batchnorm_map(NvKernels *nk, const DlcOp *op, const char *tag, NvBatchnormForm form) {
    Build b;
    int k = form == NV_BN_FOLDED ? dlc_op_folded_batchnorm(op) : -1;
    bool train = form == NV_BN_TRAIN;
    int slots[6] = {0, 1, 2, 3, 4, NV_RESULT};
    if (k >= 0)
        memcpy(slots, (int[6]){NV_RESULT, k, k + 1, k + 2, k + 3, NV_RESULT}, sizeof slots);
    else if (train) /* batchnorm_normalize's (x, mean, invstd, @w, @b) among its inputs and results */
        memcpy(slots, (int[6]){0, NV_RESULT + 1, NV_RESULT + 2, 1, 2, NV_RESULT}, sizeof slots);
    nv_start(&b, nk, op, tag, k >= 0 ? "batchnorm" : train ? "normalize" : "", slots, 6, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *x = k >= 0 ? op->out[0] : op->in[0];
    int64_t c = x->type.dims[0], hw = nv_numel(x) / c;
    LLVMValueRef i = nv_begin_map(&b, nv_numel(x), 0);
    LLVMValueRef j = kb_remi(kb, kb_divi(kb, i, hw), c), xv = kb_load(kb, b.p[0], i), y;
    if (form == NV_BN_RUNNING || form == NV_BN_FOLDED) { /* (x, @w, @b, @running_mean, @running_var) */
        double eps = dlc_attr_float(op, k >= 0 ? DLC_A_BN_EPS : DLC_A_EPS);
        LLVMValueRef scale = kb_fdiv(kb, kb_load(kb, b.p[1], j),
                                     kb_sqrt(kb, kb_fadd(kb, kb_load(kb, b.p[4], j), kb_float(kb, eps))));
        y = kb_fma(kb, kb_fsub(kb, xv, kb_load(kb, b.p[3], j)), scale, kb_load(kb, b.p[2], j));
    } else { /* (x, mean, invstd, @w, @b) */
        LLVMValueRef scale = kb_fmul(kb, kb_load(kb, b.p[2], j), kb_load(kb, b.p[3], j));
        y = kb_fma(kb, kb_fsub(kb, xv, kb_load(kb, b.p[1], j)), scale, kb_load(kb, b.p[4], j));
    }
    kb_store(kb, b.p[5], i, nv_relu_if(kb, dlc_op_fused_relu(op), y));
    nv_end_map(&b);
}

/* batchnorm_train: each part's count, mean and sum of squared deviations
 * (two passes over the part, the second from the cache); the parts merged
 * in order (Chan, Golub and LeVeque's pairwise update) into the batch's
 * statistics and the running ones; then y, a map. */
void nv_emit_batchnorm_train(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    const DlcValue *x = op->in[0];
    int64_t c = x->type.dims[0], hw = nv_numel(x) / c;
    int part_slots[2] = {0, NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "part", part_slots, 2, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, hw);
    b.l->workspace = 3 * c * p.parts;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef items = kb_sub(kb, p.hi, p.lo), fitems = kb_itof(kb, kb_max(kb, items, kb_int(kb, 1)));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_load(kb, b.p[0], channel_at(kb, &p.ch, kb_get(kb, i)))));
    kb_endfor(kb);
    LLVMValueRef mean = kb_fdiv(kb, kb_block_sum(kb, scratch, kb_get(kb, sum), ROW_THREADS), fitems);
    LLVMValueRef sq = kb_var(kb, kb->f32, kb_float(kb, 0));
    i = parts_for(kb, &p);
    LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], channel_at(kb, &p.ch, kb_get(kb, i))), mean);
    kb_set(kb, sq, kb_fma(kb, d, d, kb_get(kb, sq)));
    kb_endfor(kb);
    LLVMValueRef m2 = kb_block_sum(kb, scratch, kb_get(kb, sq), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 0), kb_itof(kb, items));
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 1), mean);
    kb_store(kb, b.p[1], part_at(kb, &p, 3, 2), m2);
    kb_endif(kb);
    kb_end(kb);

    /* (@running_mean, @running_var, mean, invstd, scratch) */
    int stat_slots[5] = {3, 4, NV_RESULT + 1, NV_RESULT + 2, NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "stats", stat_slots, 5, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = nv_begin_map(&b, 0, c);
    LLVMValueRef n = kb_float(kb, 0), mu = kb_float(kb, 0), ss = kb_float(kb, 0);
    for (int64_t s = 0; s < p.parts; s++) {
        LLVMValueRef base = kb_addi(kb, kb_muli(kb, ch, 3 * p.parts), 3 * s);
        LLVMValueRef nb = kb_load(kb, b.p[4], base), mb = kb_load(kb, b.p[4], kb_addi(kb, base, 1));
        LLVMValueRef m2b = kb_load(kb, b.p[4], kb_addi(kb, base, 2));
        LLVMValueRef total = kb_fadd(kb, n, nb), delta = kb_fsub(kb, mb, mu);
        LLVMValueRef w = kb_fdiv(kb, nb, kb_fmax(kb, total, kb_float(kb, 1)));
        LLVMValueRef take = kb_fgt(kb, nb, kb_float(kb, 0));
        mu = kb_select(kb, take, kb_fma(kb, delta, w, mu), mu);
        ss = kb_select(kb, take, kb_fadd(kb, kb_fadd(kb, ss, m2b), kb_fmul(kb, kb_fmul(kb, delta, delta), kb_fmul(kb, n, w))), ss);
        n = total;
    }
    LLVMValueRef cnt = nv_count(&b, hw, 0);
    LLVMValueRef var = kb_fdiv(kb, ss, kb_itof(kb, cnt));
    LLVMValueRef invstd = kb_fdiv(kb, kb_float(kb, 1), kb_sqrt(kb, kb_fadd(kb, var, kb_float(kb, dlc_attr_float(op, DLC_A_EPS)))));
    double m = dlc_attr_float(op, DLC_A_MOMENTUM);
    LLVMValueRef unbiased = kb_select(kb, kb_lt(kb, kb_int(kb, 1), cnt),
                                      kb_fdiv(kb, ss, kb_itof(kb, kb_addi(kb, cnt, -1))), var);
    kb_store(kb, b.p[2], ch, mu);
    kb_store(kb, b.p[3], ch, invstd);
    kb_store(kb, b.p[0], ch, kb_fma(kb, kb_float(kb, 1 - m), kb_load(kb, b.p[0], ch), kb_fmul(kb, kb_float(kb, m), mu)));
    kb_store(kb, b.p[1], ch, kb_fma(kb, kb_float(kb, 1 - m), kb_load(kb, b.p[1], ch), kb_fmul(kb, kb_float(kb, m), unbiased)));
    nv_end_map(&b);

    nv_batchnorm_map(nk, op, tag, NV_BN_TRAIN);
}

/* (dy, x, mean, invstd, @w) -> dx = w invstd (dy - mean(dy) - xhat mean(dy xhat)):
 * the two sums in parts, the parts' sums per channel, then dx, a map. */
void nv_emit_batchnorm_grad_input(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    const DlcValue *x = op->in[1];
    int64_t c = x->type.dims[0], hw = nv_numel(x) / c;
    int part_slots[5] = {0, 1, 2, 3, NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "part", part_slots, 5, NULL, 0, ROW_THREADS);
    Kb *kb = b.kb;
    Parts p;
    begin_parts(&b, &p, c, hw);
    int64_t sums_at = 2 * c * p.parts; /* after the parts: the channels' two sums */
    b.l->workspace = sums_at + 2 * c;
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef mean = kb_load(kb, b.p[2], p.ch.ch), invstd = kb_load(kb, b.p[3], p.ch.ch);
    LLVMValueRef sdy = kb_var(kb, kb->f32, kb_float(kb, 0)), sdyx = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = parts_for(kb, &p);
    LLVMValueRef at = channel_at(kb, &p.ch, kb_get(kb, i)), dy = kb_load(kb, b.p[0], at);
    LLVMValueRef xhat = kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], at), mean), invstd);
    kb_set(kb, sdy, kb_fadd(kb, kb_get(kb, sdy), dy));
    kb_set(kb, sdyx, kb_fma(kb, dy, xhat, kb_get(kb, sdyx)));
    kb_endfor(kb);
    LLVMValueRef tdy = kb_block_sum(kb, scratch, kb_get(kb, sdy), ROW_THREADS);
    LLVMValueRef tdyx = kb_block_sum(kb, scratch, kb_get(kb, sdyx), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[4], part_at(kb, &p, 2, 0), tdy);
    kb_store(kb, b.p[4], part_at(kb, &p, 2, 1), tdyx);
    kb_endif(kb);
    kb_end(kb);

    int sum_slots[1] = {NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "sum", sum_slots, 1, NULL, 0, MAP_THREADS);
    kb = b.kb;
    LLVMValueRef ch = nv_begin_map(&b, 0, c);
    for (int k = 0; k < 2; k++)
        kb_store(kb, b.p[0], kb_addi(kb, kb_muli(kb, ch, 2), sums_at + k), sum_parts(kb, b.p[0], ch, p.parts, 2, k));
    nv_end_map(&b);

    int map_slots[7] = {0, 1, 2, 3, 4, NV_WORKSPACE, NV_RESULT};
    nv_start(&b, nk, op, tag, "", map_slots, 7, NULL, 0, MAP_THREADS);
    kb = b.kb;
    i = nv_begin_map(&b, nv_numel(x), 0);
    ch = kb_remi(kb, kb_divi(kb, i, hw), c);
    LLVMValueRef fcnt = kb_itof(kb, nv_count(&b, hw, 0));
    LLVMValueRef sums = kb_addi(kb, kb_muli(kb, ch, 2), sums_at);
    LLVMValueRef mdy = kb_fdiv(kb, kb_load(kb, b.p[5], sums), fcnt);
    LLVMValueRef mdyx = kb_fdiv(kb, kb_load(kb, b.p[5], kb_addi(kb, sums, 1)), fcnt);
    invstd = kb_load(kb, b.p[3], ch);
    xhat = kb_fmul(kb, kb_fsub(kb, kb_load(kb, b.p[1], i), kb_load(kb, b.p[2], ch)), invstd);
    LLVMValueRef k = kb_fmul(kb, kb_load(kb, b.p[4], ch), invstd);
    LLVMValueRef dx = kb_fmul(kb, k, kb_fsub(kb, kb_fsub(kb, kb_load(kb, b.p[0], i), mdy), kb_fmul(kb, xhat, mdyx)));
    kb_store(kb, b.p[6], i, dx);
    nv_end_map(&b);
}

void nv_emit_batchnorm(NvKernels *nk, const DlcOp *op, const char *tag) {
    nv_batchnorm_map(nk, op, tag, NV_BN_RUNNING);
}

void nv_emit_batchnorm_normalize(NvKernels *nk, const DlcOp *op, const char *tag) {
    nv_batchnorm_map(nk, op, tag, NV_BN_NORMALIZE);
}

void nv_emit_batchnorm_grad_weight(NvKernels *nk, const DlcOp *op, const char *tag) {
    channel_sum(nk, op, tag, true);
}

void nv_emit_bias_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    channel_sum(nk, op, tag, false);
}

void nv_emit_lrn(NvKernels *nk, const DlcOp *op, const char *tag) {
    lrn(nk, op, tag, true);
}

void nv_emit_lrn_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    lrn(nk, op, tag, false);
}

void nv_emit_softmax(NvKernels *nk, const DlcOp *op, const char *tag) {
    softmax(nk, op, tag, true);
}

void nv_emit_softmax_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    softmax(nk, op, tag, false);
}
