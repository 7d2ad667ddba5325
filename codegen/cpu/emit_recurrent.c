/* emit_recurrent.c — the C of the recurrent layers (rnn, rnn_relu, lstm,
 * gru): the forward pass of one layer in one direction, its training form,
 * which also keeps what the backward pass reads, and backpropagation
 * through time.
 *
 * Each is one call of libdlrt's (kernels/recurrent.inc), described by a
 * DlrtRnn; the input projection of every step is one product inside the
 * forward kernel, in scratch sized for the largest batch.  The tile pass's
 * vector=B asks for libdlrt's vectorized activations (DlrtRnn.fast).  The backward
 * kernel gives the gates' gradients at every step (dpre); the input's and
 * the weights' gradients are the per-step dense products autodiff puts
 * after it (emit_dense.c).
 *
 * A stateful layer (stateful=true) starts from the states in net->state
 * (cpu.c gives each layer its rows there) and leaves its final ones there
 * at inference; its training form leaves them beside, in the rows the
 * training step copies over the state once its update is done, since the
 * backward pass still reads the LSTM's c0. */
#include "emit.h"

#define put dlc_cpu_put

/* The DlrtRnn `rn` of a recurrent op of any form: `input` is the
 * features of a step of x, which the backward pass does not read (0). */
static const char *rnn_literal(Emit *e, const DlcOp *op) {
    static const char *const cells[] = {
        [DLC_OP_RNN] = "DLRT_CELL_RNN_TANH",
        [DLC_OP_RNN_RELU] = "DLRT_CELL_RNN_RELU",
        [DLC_OP_LSTM] = "DLRT_CELL_LSTM",
        [DLC_OP_GRU] = "DLRT_CELL_GRU",
    };
    DlcOpKind cell = dlc_recurrent_cell(op->kind);
    bool backward = dlc_op_is_recurrent_grad(op->kind);
    /* the steps are those of x, or of hprev (the backward's third operand) */
    const DlcType *seq = &op->in[backward ? 2 : 0]->type;
    return dlc_arena_printf(
        e->arena,
        "    static const DlrtRnn rn = {.cell = %s, .steps = %lld, .input = %lld, "
        ".hidden = %lld,\n        .reverse = %s, .last = %s, .fast = %s};\n",
        cells[cell], (long long)seq->dims[0], backward ? 0LL : (long long)seq->dims[1],
        (long long)dlc_attr_int(op, DLC_A_HIDDEN), dlc_attr_bool(op, DLC_A_REVERSE) ? "true" : "false",
        dlc_attr_bool(op, DLC_A_LAST) ? "true" : "false",
        dlc_attr_int(op, DLC_A_VECTOR) > 0 ? "true" : "false");
}

/* The lengths operand of op (lengths=true: the one before the
 * parameters), or NULL. */
static const char *lengths(Emit *e, const DlcOp *op) {
    return dlc_attr_bool(op, DLC_A_LENGTHS)
               ? dlc_arena_printf(e->arena, "a%d", op->nin - op->nparams - 1)
               : "NULL";
}

/* rnn, rnn_relu, lstm, gru: (x[, lengths], @w_ih, @w_hh, @b_ih, @b_hh) -> y;
 * and their training forms, -> (y, hprev, cache) */
void dlc_cpu_emit_recurrent(Emit *e, Out *o, const DlcOp *op) {
    const char *rn = rnn_literal(e, op);
    bool train = dlc_op_is_recurrent_train(op->kind);
    int p = op->nin - op->nparams;
    bool stateful = dlc_attr_bool(op, DLC_A_STATEFUL);
    const char *states = !stateful ? "NULL, NULL, NULL, NULL"
                         : train   ? "state_h, state_c, next_h, next_c"
                                   : "state_h, state_c, state_h, state_c";
    e->state = !stateful ? 0 : train ? 2 : 1;
    put(o, "%s", rn);
    put(o, "    dlrt_rnn_forward(&rn, n, a0, a%d, a%d, a%d, a%d, %s, %s, r0, %s, %s, work, "
           "threads);\n",
        p, p + 1, p + 2, p + 3, lengths(e, op), states, train ? "r1" : "NULL",
        train ? "r2" : "NULL");
    e->scratch = dlc_arena_printf(
        e->arena, "%s    int64_t w = dlrt_rnn_workspace(&rn, max_batch, threads);\n", rn);
}

/* rnn_grad, ...: (dy, cache, hprev[, lengths], @w_hh) -> dpre; gru_grad ->
 * (dpre_ih, dpre_hh) */
void dlc_cpu_emit_recurrent_grad(Emit *e, Out *o, const DlcOp *op) {
    const char *rn = rnn_literal(e, op);
    put(o, "%s", rn);
    bool stateful = dlc_attr_bool(op, DLC_A_STATEFUL);
    e->state = stateful ? 1 : 0; /* an LSTM's backward reads c0 */
    if (stateful)
        put(o, "    (void)state_h;\n");
    put(o, "    dlrt_rnn_backward(&rn, n, a0, a1, a2, a%d, %s, %s, r0, %s, work, threads);\n",
        op->nin - 1, lengths(e, op), stateful ? "state_c" : "NULL",
        op->nout == 2 ? "r1" : "NULL");
    e->scratch = dlc_arena_printf(
        e->arena, "%s    int64_t w = dlrt_rnn_backward_workspace(&rn, max_batch, threads);\n", rn);
}
