/* grad.h — the gradient rules and the state they share with autodiff.
 *
 * Each differentiable row of ir/ops.def names its rule in the grad column:
 * GRAD(x) is dlc_grad_x, defined by the file of its op family (declared
 * below from the column), which appends the op's vector-Jacobian product
 * to the training network.  The autodiff pass (autodiff.c) builds its
 * dispatch table from that column, so a row naming a rule nobody wrote
 * does not link.  Rules
 * call no other rule: they reach the network being built through DlcGrad
 * and the helpers of autodiff.c below.  The gradient of an activation fused
 * into an op (relu=true, ...) is grad_activation.c's, beside the
 * activations' own, and autodiff applies it to dy before the op's rule, so
 * that no rule handles it. */
#ifndef DLC_GRAD_H
#define DLC_GRAD_H

#include "../ir/ir.h"

/* The autodiff pass's state while it builds one network's training step. */
typedef struct DlcGrad {
    DlcCtx *ctx;
    DlcModule *m;
    DlcNetwork *net; /* NAME.train, being built */
    DlcMap grads;    /* value name -> its gradient (DlcValue *) so far */
    DlcMap needs;    /* value name -> (void*)1 when it depends on a trainable param */
    bool gpu;        /* the GPU code generator reads the result: no maxpool_train */
    bool ok;         /* no error reported yet */
} DlcGrad;

/* A gradient rule: appends the vector-Jacobian product of op (of the
 * training network), whose result's gradient is dy, adding to the gradient
 * of each operand that needs one.  A loss's rule starts the backward graph
 * and gets dy NULL. */
typedef void (*DlcGradRule)(DlcGrad *g, const DlcOp *op, DlcValue *dy);

/* ---- autodiff.c: what rules build with ---------------------------------- */

/* Appends a one-result op of kind to the training network (attrs, indexed
 * by kind's schema, may be NULL: the defaults); its result is named after
 * base, made unique.  A NULL type appends an op without results. */
DlcValue *dlc_grad_emit(DlcGrad *g, DlcOpKind kind, DlcValue **in, int nin, int nparams,
                        const DlcAttr *attrs, const DlcType *type, const char *base,
                        DlcLoc loc);
/* Adds grad to the gradient of v (a value of the training network): the
 * first term is the gradient, each later one an add. */
void dlc_grad_accumulate(DlcGrad *g, DlcValue *v, DlcValue *grad, DlcLoc loc);
/* Appends kind(in...) as one term of v's gradient (v's type, named
 * v.grad) and accumulates it.  The op takes the attributes of the forward
 * op `op` that kind also has (a gradient op keeps its forward op's, but for
 * the tile pass's choices) and op's location. */
void dlc_grad_term(DlcGrad *g, const DlcOp *op, DlcValue *v, DlcOpKind kind, DlcValue **in,
                   int nin, int nparams);
/* Whether v depends on a trainable parameter, and so needs a gradient. */
bool dlc_grad_needs(const DlcGrad *g, const DlcValue *v);
/* The name of v's gradient: v.grad. */
const char *dlc_grad_name(DlcGrad *g, const DlcValue *v);
/* Reports a user error at loc; the pass then fails. */
void dlc_grad_error(DlcGrad *g, DlcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the rules, by op family (one file each) ---------------------------- */

/* Every rule ops.def names, void dlc_grad_<op>(DlcGrad *, const DlcOp *,
 * DlcValue *dy), in grad_<family>.c: the loss rules' dy is NULL. */
#define GRAD(x) void dlc_grad_##x(DlcGrad *g, const DlcOp *op, DlcValue *dy);
#define TRAINED_AS(id)
#define NO_GRAD
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) grad
#include "../ir/ops.def"
#undef OP
#undef NO_GRAD
#undef TRAINED_AS
#undef GRAD

/* grad_activation.c: dy through the activation fused into op (relu=true,
 * sigmoid=true, ...), which comes after the op proper; dy itself when
 * there is none. */
DlcValue *dlc_grad_through_fused_activation(DlcGrad *g, const DlcOp *op, DlcValue *dy);

#endif /* DLC_GRAD_H */
