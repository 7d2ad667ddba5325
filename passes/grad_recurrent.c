/* grad_recurrent.c — backpropagation through time for the recurrent
 * layers (rnn, rnn_relu, lstm, gru), trained as their training forms.
 *
 * The training form returns, besides y, the state each step read (hprev)
 * and the cache of its gates; its rule appends the op that runs the
 * recurrence backwards (lstm_grad, ...), giving the gradient of the gates'
 * input projection at every step, and then the gradients of the input and
 * the four parameters as per-step dense products, one over all the steps
 * each, as oneDNN's and cuDNN's RNN kernels compute them:
 *
 *   dx     = dense_grad_input {per_step}(dpre, @weight_ih)
 *   dW_ih  = dense_grad_weight {per_step}(dpre, x)      db_ih = bias_grad {per_step}(dpre)
 *   dW_hh  = dense_grad_weight {per_step}(dpre_hh, hprev)  db_hh = bias_grad {per_step}(dpre_hh)
 *
 * where dpre_hh is dpre but for a GRU, whose n gate multiplies the hidden
 * projection by r. */
#include "grad.h"

#include <string.h>

/* attrs (indexed by kind's schema) with per_step=true and the defaults */
static const DlcAttr *per_step(DlcOpKind kind, DlcAttr *attrs) {
    memset(attrs, 0, sizeof(DlcAttr) * DLC_MAX_ATTRS);
    *dlc_attrs_at(kind, attrs, DLC_A_PER_STEP) = (DlcAttr){.type = DLC_ATTR_BOOL, .set = true,
                                                           .b = true};
    dlc_op_fill_defaults(kind, attrs);
    return attrs;
}

/* Appends kind(in...) {per_step=true} as a term of v's gradient. */
static void per_step_term(DlcGrad *g, const DlcOp *op, DlcValue *v, DlcOpKind kind, DlcValue **in,
                          int nin, int nparams) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_grad_accumulate(g, v, dlc_grad_emit(g, kind, in, nin, nparams, per_step(kind, attrs),
                                            &v->type, dlc_grad_name(g, v), op->loc),
                        op->loc);
}

void dlc_grad_recurrent_train(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcOpKind cell = dlc_recurrent_cell(op->kind);
    DlcOpKind kind = (DlcOpKind)(DLC_OP_RNN_GRAD + (cell - DLC_OP_RNN));
    int p = op->nin - op->nparams; /* after x and, with lengths=true, the lengths */
    DlcValue *x = op->in[0], *lengths = p == 2 ? op->in[1] : NULL, *w_ih = op->in[p],
             *w_hh = op->in[p + 1], *b_ih = op->in[p + 2], *b_hh = op->in[p + 3];
    DlcValue *hprev = op->out[1], *cache = op->out[2];

    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_attrs_like(kind, op->kind, op->attrs, attrs);
    dlc_op_fill_defaults(kind, attrs);
    DlcType dpre_type = hprev->type;
    dpre_type.dims[1] = dlc_recurrent_gates(cell) * hprev->type.dims[1];
    int nout = cell == DLC_OP_GRU ? 2 : 1;
    const DlcType types[2] = {dpre_type, dpre_type};
    const char *base = op->out[0]->name, *names[2] = {
        dlc_network_unique_name(g->m, g->net, dlc_arena_printf(&g->m->arena, "%s.dpre", base)),
        dlc_network_unique_name(g->m, g->net, dlc_arena_printf(&g->m->arena, "%s.dpre_hh", base)),
    };
    DlcValue *in[5] = {dy, cache, hprev, lengths ? lengths : w_hh, w_hh};
    DlcOp *bptt = dlc_network_add_op(g->m, g->net, kind, in, lengths ? 5 : 4, 1, attrs, types,
                                     names, nout, op->loc);
    if (!bptt)
        dlc_unreachable("autodiff: %s does not take %s's results", dlc_op_info(kind)->name,
                        dlc_op_info(op->kind)->name);
    DlcValue *dpre = bptt->out[0], *dpre_hh = bptt->out[nout - 1];

    if (dlc_grad_needs(g, x))
        per_step_term(g, op, x, DLC_OP_DENSE_GRAD_INPUT, (DlcValue *[]){dpre, w_ih}, 2, 1);
    per_step_term(g, op, w_ih, DLC_OP_DENSE_GRAD_WEIGHT, (DlcValue *[]){dpre, x}, 2, 0);
    per_step_term(g, op, b_ih, DLC_OP_BIAS_GRAD, &dpre, 1, 0);
    per_step_term(g, op, w_hh, DLC_OP_DENSE_GRAD_WEIGHT, (DlcValue *[]){dpre_hh, hprev}, 2, 0);
    per_step_term(g, op, b_hh, DLC_OP_BIAS_GRAD, &dpre_hh, 1, 0);
}
