/* grad_activation.c — the gradient rules of the activations (relu, sigmoid,
 * tanh, leaky_relu, elu), and of an activation fused into the op before it.
 *
 * Each activation's gradient is one elementwise op of dy and the
 * activation's result y, from which relu', sigmoid' and tanh' are computed
 * without its input: the input need not be kept for the backward pass, and
 * the activation may fuse into the op that computes it.  A leaky ReLU's
 * gradient reads y too where its slope is not negative (y > 0 exactly where
 * x > 0, the same bits), and x otherwise, where y's sign is not x's.  An
 * ELU's, whose alpha is not negative, reads y: alpha * exp(x) = y + alpha
 * where x <= 0, exactly where y <= 0.  The
 * table below maps each activation to its gradient op once, for the rules
 * and for the fused form (relu=true, ...), which autodiff applies to dy
 * before the rule of the op it is fused into. */
#include "grad.h"

/* The gradient op of each activation (dlc_op_is_activation). */
static const DlcOpKind grad_of[DLC_OP_COUNT] = {
    [DLC_OP_RELU] = DLC_OP_RELU_GRAD,
    [DLC_OP_SIGMOID] = DLC_OP_SIGMOID_GRAD,
    [DLC_OP_TANH] = DLC_OP_TANH_GRAD,
    [DLC_OP_LEAKY_RELU] = DLC_OP_LEAKY_RELU_GRAD,
    [DLC_OP_ELU] = DLC_OP_ELU_GRAD,
};

/* The input's gradient from dy and the result y. */
static void from_result(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], grad_of[op->kind], (DlcValue *[]){dy, op->out[0]}, 2, 0);
}

void dlc_grad_relu(DlcGrad *g, const DlcOp *op, DlcValue *dy) { from_result(g, op, dy); }
void dlc_grad_sigmoid(DlcGrad *g, const DlcOp *op, DlcValue *dy) { from_result(g, op, dy); }
void dlc_grad_tanh(DlcGrad *g, const DlcOp *op, DlcValue *dy) { from_result(g, op, dy); }
void dlc_grad_elu(DlcGrad *g, const DlcOp *op, DlcValue *dy) { from_result(g, op, dy); }

void dlc_grad_leaky_relu(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    /* from y where the slope is not negative, which leaves x free to die
       and the leaky ReLU free to fuse into the op computing x; from x
       otherwise */
    DlcValue *x = op->in[0], *y = op->out[0];
    double slope = dlc_attr_float(op, DLC_A_SLOPE);
    dlc_grad_term(g, op, x, grad_of[op->kind], (DlcValue *[]){dy, slope >= 0 ? y : x}, 2, 0);
}

DlcValue *dlc_grad_through_fused_activation(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act == DLC_OP_COUNT)
        return dy;
    DlcOpKind grad = grad_of[act];
    DlcValue *y = op->out[0];
    /* leaky_relu_grad and elu_grad from y, not x: the verifier allows no
       negative slope or alpha on a fused one, so y > 0 exactly where x > 0 */
    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_attrs_like(grad, op->kind, op->attrs, attrs); /* the slope or alpha */
    return dlc_grad_emit(g, grad, (DlcValue *[]){dy, y}, 2, 0, attrs, &y->type,
                         dlc_arena_printf(&g->m->arena, "%s.%s", y->name,
                                          dlc_op_info(grad)->name),
                         op->loc);
}
