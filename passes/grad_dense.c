/* grad_dense.c — the gradient rule of the fully connected layer (dense).
 *
 * As a convolution's: the input's gradient (dy by the weights), the
 * weights' (dy transposed by the input) and the bias's (dy summed over
 * the batch).  A fused activation has been applied to dy already
 * (autodiff.c). */
#include "grad.h"

void dlc_grad_dense(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0], *w = op->in[1];
    if (dlc_grad_needs(g, x))
        dlc_grad_term(g, op, x, DLC_OP_DENSE_GRAD_INPUT, (DlcValue *[]){dy, w}, 2, 1);
    dlc_grad_term(g, op, w, DLC_OP_DENSE_GRAD_WEIGHT, (DlcValue *[]){dy, x}, 2, 0);
    if (op->nparams == 2)
        dlc_grad_term(g, op, op->in[2], DLC_OP_BIAS_GRAD, &dy, 1, 0);
}
