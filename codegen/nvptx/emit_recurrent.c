/* emit_recurrent.c — the GPU kernels of the recurrent layers (rnn,
 * rnn_relu, lstm, gru): the forward pass of one layer in one direction,
 * its training form (which also keeps hprev and the cache), and
 * backpropagation through time (the _grad ops, which give dpre).
 *
 * The algorithm is the CPU's (runtime/kernels/recurrent.inc), step for
 * step, with the same cache layout, so that the backward pass and the
 * check read the same tensors:
 *   forward   the input projection of every step as one product over the
 *             batch's n T rows (nv_product, the dense layers' tiled
 *             kernel), from the two biases added once; then per step s, a
 *             product h W_hh^T of the n states and one map over the n H
 *             hidden values computing the gates and the new state;
 *   backward  per step, last first, one map taking each state's gradient
 *             through the gates (dpre, and the cell state's gradient for
 *             the LSTM), then a product adding dpre_hh W_hh to the
 *             gradient of the previous state.  The weights' and the
 *             input's gradients are the per-step dense ops after it.
 * The steps' launches run in a loop on the host (NvLaunch.loop_steps),
 * the counter a kernel argument; each waits for the one before on the
 * stream, which is the recurrence.
 *
 * The CPU sorts the samples by length so that its products skip those
 * that have ended.  Here every product covers the whole batch, and the
 * step maps mask instead: a sample past its length keeps its state (its
 * row of the backward product is zero, and the product adds), and its
 * padded rows of y, hprev, cache and dpre are written as zeros, the row
 * of step s at step s.  The products' sums are in the tiled kernel's
 * order, not BLAS's, and exp goes through the GPU's approximate units:
 * results agree with the CPU within float tolerance, not bit for bit.
 *
 * The states, the projections and the step's products live in the
 * network's scratch memory (NV_WORKSPACE), per sample of the largest
 * batch. */
#include "emit.h"

/* A recurrent op's shape, and where its buffers lie in the scratch
 * memory: offsets in floats per sample of the largest batch (the fixed
 * part after all of them). */
typedef struct Rnn {
    DlcOpKind cell;
    int64_t T, F, H, G, gh, S; /* steps, input features, hidden, gates, G H, cache row */
    bool reverse, last, train;
    int lengths;               /* the lengths operand, or -1 */
    int w_ih, w_hh, b_ih, b_hh; /* the parameters' operands (w_hh only backward) */
    /* forward: proj [T, G H], q [G H], h [H], c [H] per sample, then the
       bias [G H]; backward: d [G H], dh [H], dc [H] per sample */
    int64_t proj, q, h, c, d, dh, dc, per_n, bias;
} Rnn;

static Rnn rnn_of(const DlcOp *op) {
    Rnn r = {.cell = dlc_recurrent_cell(op->kind)};
    bool backward = dlc_op_is_recurrent_grad(op->kind);
    /* the steps are those of x, or of hprev (the backward's third operand) */
    const DlcType *seq = &op->in[backward ? 2 : 0]->type;
    r.T = seq->dims[0], r.F = backward ? 0 : seq->dims[1];
    r.H = dlc_attr_int(op, DLC_A_HIDDEN);
    r.G = dlc_recurrent_gates(r.cell), r.gh = r.G * r.H;
    r.S = dlc_recurrent_cache(r.cell) * r.H;
    r.reverse = dlc_attr_bool(op, DLC_A_REVERSE), r.last = dlc_attr_bool(op, DLC_A_LAST);
    r.train = dlc_op_is_recurrent_train(op->kind);
    int p = op->nin - op->nparams; /* the first parameter */
    r.lengths = dlc_attr_bool(op, DLC_A_LENGTHS) ? p - 1 : -1;
    if (backward) {
        r.w_hh = p;
        r.d = 0, r.dh = r.gh, r.dc = r.dh + r.H;
        r.per_n = r.dc + (r.cell == DLC_OP_LSTM ? r.H : 0);
    } else {
        r.w_ih = p, r.w_hh = p + 1, r.b_ih = p + 2, r.b_hh = p + 3;
        r.proj = 0, r.q = r.T * r.gh, r.h = r.q + r.gh, r.c = r.h + r.H;
        r.per_n = r.c + (r.cell == DLC_OP_LSTM ? r.H : 0);
        r.bias = r.per_n;
    }
    return r;
}

/* A pointer slot in the scratch memory, at per_n floats per sample. */
static NvOperand ws(int64_t per_n) { return (NvOperand){NV_WORKSPACE, per_n, 0}; }

/* The kernel's pointer arguments, built up one by one: add returns the
 * argument's index (ws_per_n for NV_WORKSPACE slots). */
typedef struct Args {
    int slots[NV_MAX_PTRS];
    int64_t per_n[NV_MAX_PTRS];
    int count;
} Args;

static int add(Args *a, int slot, int64_t per_n) {
    a->slots[a->count] = slot;
    a->per_n[a->count] = per_n;
    return a->count++;
}

/* Starts a map kernel TAG_suffix over the given pointers, with the loop
 * counter as a scalar where `looped`, and records the scratch offsets. */
static void start(Build *b, NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                  const Args *a, bool looped) {
    int loop = NV_SC_LOOP;
    nv_start(b, nk, op, tag, suffix, a->slots, a->count, &loop, looped ? 1 : 0, MAP_THREADS);
    for (int i = 0; i < a->count; i++)
        if (a->slots[i] == NV_WORKSPACE)
            nv_set_workspace(b, i, a->per_n[i], 0);
}

/* Every launch of the op from `first` on needs its scratch memory: per_n
 * floats per sample and the fixed part after them. */
static void reserve(NvKernels *nk, int first, const Rnn *r, int64_t fixed) {
    for (int k = first; k < nk->nlaunches; k++) {
        NvLaunch *l = &nk->launches[k];
        if (l->workspace_per_n < r->per_n)
            l->workspace_per_n = r->per_n;
        if (l->workspace < fixed)
            l->workspace = fixed;
    }
}

/* Sample i's steps: its length within [0, T], or T without lengths. */
static LLVMValueRef length_of(Build *b, const Rnn *r, int arg, LLVMValueRef i) {
    Kb *kb = b->kb;
    if (arg < 0)
        return kb_int(kb, r->T);
    LLVMValueRef len = nv_load_i32(kb, b->p[arg], i);
    return kb_min(kb, kb_max(kb, len, kb_int(kb, 0)), kb_int(kb, r->T));
}

/* The row of sample i's step that the recurrence runs at its s-th step:
 * s, or reversed len - 1 - s. */
static LLVMValueRef step_row(Kb *kb, const Rnn *r, LLVMValueRef i, LLVMValueRef s, LLVMValueRef len) {
    LLVMValueRef t = r->reverse ? kb_sub(kb, kb_addi(kb, len, -1), s) : s;
    return kb_add(kb, kb_muli(kb, i, r->T), t);
}

/* element (row, block, j) of a tensor of rows of `width` values in blocks of H */
static LLVMValueRef at3(Kb *kb, const Rnn *r, LLVMValueRef row, int64_t width, int block, LLVMValueRef j) {
    return kb_add(kb, kb_muli(kb, row, width), kb_addi(kb, j, block * r->H));
}

/* ---- the forward pass ------------------------------------------------------------ */

/* bias = b_ih + b_hh, except the GRU's n gate, whose b_hn the step adds
 * inside r (n = tanh(W_in x + b_in + r (W_hn h + b_hn))): b_in alone */
static void forward_bias(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    int b_ih = add(&a, r->b_ih, 0), b_hh = add(&a, r->b_hh, 0), out = add(&a, NV_WORKSPACE, r->bias);
    Build b;
    start(&b, nk, op, tag, "bias", &a, false);
    Kb *kb = b.kb;
    LLVMValueRef j = nv_begin_map(&b, 0, r->gh);
    LLVMValueRef v = kb_load(kb, b.p[b_ih], j);
    if (r->cell == DLC_OP_GRU) {
        LLVMValueRef hh = kb_lt(kb, j, kb_int(kb, 2 * r->H));
        v = kb_fadd(kb, v, kb_load_if(kb, hh, b.p[b_hh], kb_select(kb, hh, j, kb_int(kb, 0))));
    } else {
        v = kb_fadd(kb, v, kb_load(kb, b.p[b_hh], j));
    }
    kb_store(kb, b.p[out], j, v);
    nv_end_map(&b);
}

/* h = 0 (and c = 0): the zero state that starts each sequence */
static void forward_init(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    bool lstm = r->cell == DLC_OP_LSTM;
    int h = add(&a, NV_WORKSPACE, r->h), c = lstm ? add(&a, NV_WORKSPACE, r->c) : -1;
    Build b;
    start(&b, nk, op, tag, "init", &a, false);
    Kb *kb = b.kb;
    LLVMValueRef i = nv_begin_map(&b, r->H, 0);
    kb_store(kb, b.p[h], i, kb_float(kb, 0));
    if (lstm)
        kb_store(kb, b.p[c], i, kb_float(kb, 0));
    nv_end_map(&b);
}

/* One step of every sample: a thread per hidden value (i, j).  From px,
 * the step's row of the projection, and q, h_prev W_hh^T, the gates and
 * the new state, as recurrent.inc's rnn_cell_forward computes them (c =
 * f c_prev + i g; the GRU's h = (h_prev - n) z + n). */
static void forward_step(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    bool lstm = r->cell == DLC_OP_LSTM, gru = r->cell == DLC_OP_GRU;
    int proj = add(&a, NV_WORKSPACE, r->proj), q = add(&a, NV_WORKSPACE, r->q);
    int h = add(&a, NV_WORKSPACE, r->h), c = lstm ? add(&a, NV_WORKSPACE, r->c) : -1;
    int y = add(&a, NV_RESULT, 0);
    int hprev = r->train ? add(&a, NV_RESULT + 1, 0) : -1;
    int cache = r->train ? add(&a, NV_RESULT + 2, 0) : -1;
    int lengths = r->lengths >= 0 ? add(&a, r->lengths, 0) : -1;
    int b_hh = gru ? add(&a, r->b_hh, 0) : -1;
    Build b;
    start(&b, nk, op, tag, "step", &a, true);
    Kb *kb = b.kb;
    int64_t H = r->H, T = r->T;
    LLVMValueRef s = b.sc[1];
    LLVMValueRef e = nv_begin_map(&b, H, 0);
    LLVMValueRef i = kb_divi(kb, e, H), j = kb_remi(kb, e, H);
    LLVMValueRef len = length_of(&b, r, lengths, i);
    kb_if(kb, kb_lt(kb, s, len));
    {
        LLVMValueRef row = step_row(kb, r, i, s, len);
        LLVMValueRef hv = kb_load(kb, b.p[h], e);
        if (r->train)
            kb_store(kb, b.p[hprev], kb_add(kb, kb_muli(kb, row, H), j), hv);
        LLVMValueRef pre[4];
        for (int g = 0; g < r->G; g++)
            pre[g] = kb_load(kb, b.p[proj], at3(kb, r, row, r->gh, g, j));
        LLVMValueRef qv[4];
        for (int g = 0; g < r->G; g++)
            qv[g] = kb_load(kb, b.p[q], at3(kb, r, i, r->gh, g, j));
        LLVMValueRef hn, keep[5];
        int nkeep = 0;
        switch (r->cell) {
        case DLC_OP_RNN:
            hn = nv_tanh(kb, kb_fadd(kb, pre[0], qv[0]));
            keep[nkeep++] = hn;
            break;
        case DLC_OP_RNN_RELU: {
            LLVMValueRef v = kb_fadd(kb, pre[0], qv[0]);
            hn = kb_select(kb, kb_flt(kb, v, kb_float(kb, 0)), kb_float(kb, 0), v);
            keep[nkeep++] = hn;
            break;
        }
        case DLC_OP_LSTM: {
            LLVMValueRef gi = nv_sigmoid(kb, kb_fadd(kb, pre[0], qv[0]));
            LLVMValueRef gf = nv_sigmoid(kb, kb_fadd(kb, pre[1], qv[1]));
            LLVMValueRef gg = nv_tanh(kb, kb_fadd(kb, pre[2], qv[2]));
            LLVMValueRef go = nv_sigmoid(kb, kb_fadd(kb, pre[3], qv[3]));
            LLVMValueRef cj = kb_fadd(kb, kb_fmul(kb, gf, kb_load(kb, b.p[c], e)), kb_fmul(kb, gi, gg));
            kb_store(kb, b.p[c], e, cj);
            hn = kb_fmul(kb, go, nv_tanh(kb, cj));
            keep[0] = gi, keep[1] = gf, keep[2] = gg, keep[3] = go, keep[4] = cj;
            nkeep = 5;
            break;
        }
        default: { /* GRU */
            LLVMValueRef gr = nv_sigmoid(kb, kb_fadd(kb, pre[0], qv[0]));
            LLVMValueRef gz = nv_sigmoid(kb, kb_fadd(kb, pre[1], qv[1]));
            LLVMValueRef hh = kb_fadd(kb, qv[2], kb_load(kb, b.p[b_hh], kb_addi(kb, j, 2 * H)));
            LLVMValueRef gn = nv_tanh(kb, kb_fadd(kb, pre[2], kb_fmul(kb, gr, hh)));
            hn = kb_fadd(kb, kb_fmul(kb, kb_fsub(kb, hv, gn), gz), gn);
            keep[0] = gr, keep[1] = gz, keep[2] = gn, keep[3] = hh;
            nkeep = 4;
            break;
        }
        }
        kb_store(kb, b.p[h], e, hn);
        if (!r->last)
            kb_store(kb, b.p[y], kb_add(kb, kb_muli(kb, row, H), j), hn);
        for (int k = 0; r->train && k < nkeep; k++)
            kb_store(kb, b.p[cache], at3(kb, r, row, r->S, k, j), keep[k]);
    }
    if (r->lengths >= 0 && (!r->last || r->train)) {
        /* a sample that has ended: its padded row s is zero */
        kb_else(kb);
        LLVMValueRef pad = kb_add(kb, kb_muli(kb, i, T), s);
        LLVMValueRef zero = kb_float(kb, 0);
        if (!r->last)
            kb_store(kb, b.p[y], kb_add(kb, kb_muli(kb, pad, H), j), zero);
        if (r->train) {
            kb_store(kb, b.p[hprev], kb_add(kb, kb_muli(kb, pad, H), j), zero);
            for (int k = 0; k < r->S / H; k++)
                kb_store(kb, b.p[cache], at3(kb, r, pad, r->S, k, j), zero);
        }
    }
    kb_endif(kb);
    nv_end_map(&b);
}

/* last=true: y = each sample's final state (0 for an empty sequence) */
static void forward_last(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    int h = add(&a, NV_WORKSPACE, r->h), y = add(&a, NV_RESULT, 0);
    Build b;
    start(&b, nk, op, tag, "last", &a, false);
    LLVMValueRef i = nv_begin_map(&b, r->H, 0);
    kb_store(b.kb, b.p[y], i, kb_load(b.kb, b.p[h], i));
    nv_end_map(&b);
}

/* rnn, rnn_relu, lstm, gru: (x[, lengths], @w_ih, @w_hh, @b_ih, @b_hh) -> y,
 * and their training forms -> (y, hprev, cache) */
void nv_emit_recurrent(NvKernels *nk, const DlcOp *op, const char *tag) {
    Rnn r = rnn_of(op);
    int begin = nk->nlaunches;
    forward_bias(nk, op, tag, &r);
    /* proj = x W_ih^T + bias over the n T rows of x */
    NvProduct proj = {.x = {0, 0, 0}, .w = {r.w_ih, 0, 0}, .bias = {NV_WORKSPACE, r.bias, 0},
                      .out = ws(r.proj), .rows = r.T, .ins = r.F, .outs = r.gh};
    nv_product(nk, op, tag, "proj", &proj);
    forward_init(nk, op, tag, &r);
    int first = nv_loop_begin(nk);
    /* q = h W_hh^T (zero at the first step, from the zero state) */
    NvProduct hh = {.x = ws(r.h), .w = {r.w_hh, 0, 0}, .bias = {-1, 0, 0}, .out = ws(r.q),
                    .rows = 1, .ins = r.H, .outs = r.gh};
    nv_product(nk, op, tag, "hh", &hh);
    forward_step(nk, op, tag, &r);
    nv_loop_end(nk, first, r.T);
    if (r.last)
        forward_last(nk, op, tag, &r);
    reserve(nk, begin, &r, r.gh);
}

/* ---- backpropagation through time ------------------------------------------------- */

/* dh = dy (the final state's gradient, last=true) or 0; dc = 0 */
static void backward_init(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    bool lstm = r->cell == DLC_OP_LSTM;
    int dy = r->last ? add(&a, 0, 0) : -1;
    int dh = add(&a, NV_WORKSPACE, r->dh), dc = lstm ? add(&a, NV_WORKSPACE, r->dc) : -1;
    Build b;
    start(&b, nk, op, tag, "init", &a, false);
    Kb *kb = b.kb;
    LLVMValueRef i = nv_begin_map(&b, r->H, 0);
    kb_store(kb, b.p[dh], i, r->last ? kb_load(kb, b.p[dy], i) : kb_float(kb, 0));
    if (lstm)
        kb_store(kb, b.p[dc], i, kb_float(kb, 0));
    nv_end_map(&b);
}

/* One step of every sample backward, the loop's u-th (step s = T - 1 - u):
 * a thread per hidden value, as recurrent.inc's rnn_cell_backward.  g,
 * the gradient of the step's result, is dh plus the step's dy; the gates'
 * gradients go to dpre (both dpre_ih and dpre_hh for the GRU, whose n
 * gates differ) and to d, the next product's operand; dh becomes what that
 * product adds to: 0, or the GRU's g z, which skips W_hh.  A sample that
 * has not started (s past its length) keeps dh, and its d row is 0. */
static void backward_step(NvKernels *nk, const DlcOp *op, const char *tag, const Rnn *r) {
    Args a = {0};
    bool lstm = r->cell == DLC_OP_LSTM, gru = r->cell == DLC_OP_GRU;
    int dy = add(&a, 0, 0), cache = add(&a, 1, 0), hprev = add(&a, 2, 0);
    int lengths = r->lengths >= 0 ? add(&a, r->lengths, 0) : -1;
    int d = add(&a, NV_WORKSPACE, r->d), dh = add(&a, NV_WORKSPACE, r->dh);
    int dc = lstm ? add(&a, NV_WORKSPACE, r->dc) : -1;
    int dpre_ih = add(&a, NV_RESULT, 0), dpre_hh = gru ? add(&a, NV_RESULT + 1, 0) : -1;
    Build b;
    start(&b, nk, op, tag, "step", &a, true);
    Kb *kb = b.kb;
    int64_t H = r->H, T = r->T, gh = r->gh, S = r->S;
    LLVMValueRef s = kb_sub(kb, kb_int(kb, T - 1), b.sc[1]);
    LLVMValueRef e = nv_begin_map(&b, H, 0);
    LLVMValueRef i = kb_divi(kb, e, H), j = kb_remi(kb, e, H);
    LLVMValueRef len = length_of(&b, r, lengths, i);
    LLVMValueRef zero = kb_float(kb, 0), one = kb_float(kb, 1);
    kb_if(kb, kb_lt(kb, s, len));
    {
        LLVMValueRef row = step_row(kb, r, i, s, len);
        LLVMValueRef g = kb_load(kb, b.p[dh], e);
        if (!r->last)
            g = kb_fadd(kb, g, kb_load(kb, b.p[dy], kb_add(kb, kb_muli(kb, row, H), j)));
        LLVMValueRef cr[5];
        for (int k = 0; k < S / H; k++)
            cr[k] = kb_load(kb, b.p[cache], at3(kb, r, row, S, k, j));
        LLVMValueRef dd[4], di[4], dh_next = zero;
        switch (r->cell) {
        case DLC_OP_RNN: /* tanh's gradient from its result */
            dd[0] = kb_fmul(kb, g, kb_fsub(kb, one, kb_fmul(kb, cr[0], cr[0])));
            break;
        case DLC_OP_RNN_RELU:
            dd[0] = kb_select(kb, kb_fgt(kb, cr[0], zero), g, zero);
            break;
        case DLC_OP_LSTM: {
            LLVMValueRef gi = cr[0], gf = cr[1], gg = cr[2], go = cr[3];
            /* tanh(c_t): h_t / o_t from the next step's hprev, or tanh at
               the sample's final step, as the CPU computes it */
            LLVMValueRef has_next = kb_lt(kb, s, kb_addi(kb, len, -1));
            LLVMValueRef t_next = kb_add(kb, row, kb_int(kb, r->reverse ? -1 : 1));
            LLVMValueRef ht = kb_load_if(kb, has_next, b.p[hprev],
                                         kb_select(kb, has_next, kb_add(kb, kb_muli(kb, t_next, H), j), kb_int(kb, 0)));
            LLVMValueRef tc = kb_var(kb, kb->f32, zero);
            kb_if(kb, has_next);
            kb_set(kb, tc, kb_fdiv(kb, ht, kb_select(kb, kb_fgt(kb, go, zero), go, one)));
            kb_else(kb);
            kb_set(kb, tc, nv_tanh(kb, cr[4]));
            kb_endif(kb);
            LLVMValueRef tcv = kb_get(kb, tc);
            /* c_{t-1}: the previous step's, 0 before the first */
            LLVMValueRef has_prev = kb_lt(kb, kb_int(kb, 0), s);
            LLVMValueRef t_prev = kb_add(kb, row, kb_int(kb, r->reverse ? 1 : -1));
            LLVMValueRef cp = kb_load_if(kb, has_prev, b.p[cache],
                                         kb_select(kb, has_prev, at3(kb, r, t_prev, S, 4, j), kb_int(kb, 0)));
            LLVMValueRef dcj = kb_fadd(kb, kb_load(kb, b.p[dc], e),
                                       kb_fmul(kb, kb_fmul(kb, g, go), kb_fsub(kb, one, kb_fmul(kb, tcv, tcv))));
            dd[0] = kb_fmul(kb, kb_fmul(kb, kb_fmul(kb, dcj, gg), gi), kb_fsub(kb, one, gi));
            dd[1] = kb_fmul(kb, kb_fmul(kb, kb_fmul(kb, dcj, cp), gf), kb_fsub(kb, one, gf));
            dd[2] = kb_fmul(kb, kb_fmul(kb, dcj, gi), kb_fsub(kb, one, kb_fmul(kb, gg, gg)));
            dd[3] = kb_fmul(kb, kb_fmul(kb, kb_fmul(kb, g, tcv), go), kb_fsub(kb, one, go));
            kb_store(kb, b.p[dc], e, kb_fmul(kb, dcj, gf));
            break;
        }
        default: { /* GRU */
            LLVMValueRef gr = cr[0], gz = cr[1], gn = cr[2], hn = cr[3];
            LLVMValueRef hp = kb_load(kb, b.p[hprev], kb_add(kb, kb_muli(kb, row, H), j));
            LLVMValueRef dn = kb_fmul(kb, kb_fmul(kb, g, kb_fsub(kb, one, gz)), kb_fsub(kb, one, kb_fmul(kb, gn, gn)));
            LLVMValueRef dz = kb_fmul(kb, kb_fmul(kb, kb_fmul(kb, g, kb_fsub(kb, hp, gn)), gz), kb_fsub(kb, one, gz));
            LLVMValueRef dr = kb_fmul(kb, kb_fmul(kb, kb_fmul(kb, dn, hn), gr), kb_fsub(kb, one, gr));
            di[0] = dd[0] = dr;
            di[1] = dd[1] = dz;
            di[2] = dn;
            dd[2] = kb_fmul(kb, dn, gr);
            dh_next = kb_fmul(kb, g, gz);
            break;
        }
        }
        for (int k = 0; k < r->G; k++) {
            kb_store(kb, b.p[dpre_ih], at3(kb, r, row, gh, k, j), gru ? di[k] : dd[k]);
            if (gru)
                kb_store(kb, b.p[dpre_hh], at3(kb, r, row, gh, k, j), dd[k]);
            kb_store(kb, b.p[d], at3(kb, r, i, gh, k, j), dd[k]);
        }
        kb_store(kb, b.p[dh], e, dh_next);
    }
    if (r->lengths >= 0) {
        kb_else(kb);
        /* not started yet: the product adds nothing to dh; the padded row s
           of dpre is zero */
        LLVMValueRef pad = kb_add(kb, kb_muli(kb, i, T), s);
        for (int k = 0; k < r->G; k++) {
            kb_store(kb, b.p[d], at3(kb, r, i, gh, k, j), zero);
            kb_store(kb, b.p[dpre_ih], at3(kb, r, pad, gh, k, j), zero);
            if (gru)
                kb_store(kb, b.p[dpre_hh], at3(kb, r, pad, gh, k, j), zero);
        }
    }
    kb_endif(kb);
    nv_end_map(&b);
}

/* rnn_grad, ...: (dy, cache, hprev[, lengths], @w_hh) -> dpre; gru_grad ->
 * (dpre_ih, dpre_hh) */
void nv_emit_recurrent_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    Rnn r = rnn_of(op);
    int begin = nk->nlaunches;
    backward_init(nk, op, tag, &r);
    int first = nv_loop_begin(nk);
    backward_step(nk, op, tag, &r);
    /* dh += d W_hh: the gradient of the previous state (W_hh is [G H, H]) */
    NvProduct hh = {.x = ws(r.d), .w = {r.w_hh, 0, 0}, .bias = {-1, 0, 0}, .out = ws(r.dh),
                    .rows = 1, .ins = r.gh, .outs = r.H, .w_by_k = true, .accumulate = true};
    nv_product(nk, op, tag, "hh", &hh);
    nv_loop_end(nk, first, r.T);
    reserve(nk, begin, &r, 0);
}
