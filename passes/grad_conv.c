/* grad_conv.c — the gradient rule of convolution (conv2d).
 *
 * A convolution's vector-Jacobian product is three ops: the input's
 * gradient (a transposed convolution of dy by the weights), the weights'
 * (dy correlated with the input) and the bias's (dy summed over all but
 * the channels).  The gradient ops take the convolution's geometry; the
 * tile pass chooses their tiles afresh.  A fused activation has been
 * applied to dy already, and a folded batchnorm refused (autodiff.c). */
#include "grad.h"

void dlc_grad_conv2d(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0], *w = op->in[1];
    if (dlc_grad_needs(g, x))
        dlc_grad_term(g, op, x, DLC_OP_CONV2D_GRAD_INPUT, (DlcValue *[]){dy, w}, 2, 1);
    dlc_grad_term(g, op, w, DLC_OP_CONV2D_GRAD_WEIGHT, (DlcValue *[]){dy, x}, 2, 0);
    if (op->nparams == 2)
        dlc_grad_term(g, op, op->in[2], DLC_OP_BIAS_GRAD, &dy, 1, 0);
}
