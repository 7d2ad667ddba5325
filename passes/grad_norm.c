/* grad_norm.c — the gradient rules of the normalizations (batchnorm's
 * training form batchnorm_train, lrn, softmax).
 *
 * batchnorm has no rule of its own: autodiff trains it as batchnorm_train
 * (its row's TRAINED_AS), which returns the batch's mean and 1/sqrt(var +
 * eps) for the rule here, so that the backward pass need not compute them
 * again.  Its gradient is the input's (which reads x, the statistics and
 * the weight), the weight's and the bias's.  lrn's gradient reads both x
 * and y, softmax's y alone; each takes its forward op's attributes. */
#include "grad.h"

void dlc_grad_batchnorm_train(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0], *w = op->in[1], *b = op->in[2];
    DlcValue *mean = op->out[1], *invstd = op->out[2];
    if (dlc_grad_needs(g, x))
        dlc_grad_term(g, op, x, DLC_OP_BATCHNORM_GRAD_INPUT,
                      (DlcValue *[]){dy, x, mean, invstd, w}, 5, 1);
    dlc_grad_term(g, op, w, DLC_OP_BATCHNORM_GRAD_WEIGHT, (DlcValue *[]){dy, x, mean, invstd},
                  4, 0);
    dlc_grad_term(g, op, b, DLC_OP_BIAS_GRAD, &dy, 1, 0);
}

void dlc_grad_lrn(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *x = op->in[0];
    dlc_grad_term(g, op, x, DLC_OP_LRN_GRAD, (DlcValue *[]){dy, x, op->out[0]}, 3, 0);
}

void dlc_grad_softmax(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_SOFTMAX_GRAD, (DlcValue *[]){dy, op->out[0]}, 2, 0);
}
