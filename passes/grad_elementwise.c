/* grad_elementwise.c — the gradient rules of the elementwise ops other
 * than the activations: add and dropout's training form.
 *
 * An add passes dy on unchanged to each term that needs a gradient (no op:
 * the terms' gradients share dy).  dropout_train's gradient multiplies dy
 * by the mask the forward op returned, so the same elements are dropped
 * and kept ones scaled alike; dropout itself has no rule of its own, since
 * autodiff trains it as dropout_train (its row's TRAINED_AS). */
#include "grad.h"

void dlc_grad_add(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    for (int i = 0; i < op->nin; i++)
        if (dlc_grad_needs(g, op->in[i]))
            dlc_grad_accumulate(g, op->in[i], dy, op->loc);
}

void dlc_grad_dropout_train(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_DROPOUT_GRAD, (DlcValue *[]){dy, op->out[1]}, 2, 0);
}
