/* grad_pool.c — the gradient rules of pooling (maxpool, its training form
 * maxpool_train, avgpool, globalavgpool).
 *
 * A max pooling's gradient sends each dy to its window's maximum: found
 * again in the input x (maxpool_grad), or read from the indices that
 * maxpool_train returned (maxpool_grad_argmax), which autodiff chooses for
 * the CPU when the pooling alone reads x, so that x need not be kept for
 * the backward pass.  The averages' gradients spread dy over their windows
 * and read nothing else.  Each gradient op takes the pooling's geometry. */
#include "grad.h"

void dlc_grad_maxpool(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0];
    dlc_grad_term(g, op, x, DLC_OP_MAXPOOL_GRAD, (DlcValue *[]){dy, x}, 2, 0);
}

void dlc_grad_maxpool_train(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_MAXPOOL_GRAD_ARGMAX, (DlcValue *[]){dy, op->out[1]},
                  2, 0);
}

void dlc_grad_avgpool(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_AVGPOOL_GRAD, &dy, 1, 0);
}

void dlc_grad_globalavgpool(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_GLOBALAVGPOOL_GRAD, &dy, 1, 0);
}
