/* grad_layout.c — the gradient rules of the layout ops (flatten, concat).
 *
 * They move elements without computing: flatten's gradient is dy reshaped
 * to the input's shape, and concat's gives each operand that needs one the
 * slice of dy at the operand's place along the axis. */
#include "grad.h"

#include <string.h>

void dlc_grad_flatten(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    dlc_grad_term(g, op, op->in[0], DLC_OP_RESHAPE, &dy, 1, 0);
}

void dlc_grad_concat(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    int rank = op->out[0]->type.rank;
    int64_t axis = dlc_attr_int(op, DLC_A_AXIS);
    if (axis < 0)
        axis += rank;
    int64_t begin = 0;
    for (int i = 0; i < op->nin; i++) {
        DlcValue *xi = op->in[i];
        if (dlc_grad_needs(g, xi)) {
            /* the slice's own attributes, not concat's: its axis counted
               from the front */
            DlcAttr attrs[DLC_MAX_ATTRS];
            memset(attrs, 0, sizeof attrs);
            *dlc_attrs_at(DLC_OP_SLICE, attrs, DLC_A_AXIS) =
                (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = axis};
            *dlc_attrs_at(DLC_OP_SLICE, attrs, DLC_A_BEGIN) =
                (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = begin};
            dlc_grad_accumulate(g, xi, dlc_grad_emit(g, DLC_OP_SLICE, &dy, 1, 0, attrs, &xi->type,
                                                     dlc_grad_name(g, xi), op->loc),
                                op->loc);
        }
        begin += xi->type.dims[axis];
    }
}
