/* grad_loss.c — the gradient rules of the losses (cross_entropy, mse),
 * which start the backward graph.
 *
 * A loss is the last op of the training step, so its rule gets no dy: its
 * gradient op computes the prediction's gradient from the prediction and
 * the target alone (softmax minus the one-hot labels, divided by the
 * batch size; the difference, scaled as the mean is).  Only the
 * prediction is differentiated: a target that depends on parameters is an
 * error. */
#include "grad.h"

/* The prediction's gradient, by the loss's gradient op `kind`. */
static void prediction_grad(DlcGrad *g, const DlcOp *loss, DlcOpKind kind) {
    DlcValue *pred = loss->in[0], *target = loss->in[1];
    if (dlc_grad_needs(g, target)) {
        dlc_grad_error(g, loss->loc, "autodiff: the target of %s depends on parameters; only "
                       "the prediction can be differentiated", dlc_op_info(loss->kind)->name);
        return;
    }
    dlc_grad_term(g, loss, pred, kind, (DlcValue *[]){pred, target}, 2, 0);
}

void dlc_grad_cross_entropy(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    (void)dy;
    prediction_grad(g, op, DLC_OP_CROSS_ENTROPY_GRAD);
}

void dlc_grad_mse(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    (void)dy;
    prediction_grad(g, op, DLC_OP_MSE_GRAD);
}
