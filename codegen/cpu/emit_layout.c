/* emit_layout.c — the C of the ops that move elements without computing:
 * flatten and reshape (a copy, or nothing where the memory plan put the
 * result on the operand), concat and slice (rows copied along an axis;
 * slice may apply a fused ReLU gradient on the way), and reorder (into or
 * out of a blocked layout).  A concat in a blocked layout is the plain
 * one: its operands are whole blocks of channels, each sample's blocks
 * one after another as its planes are. */
#include "emit.h"

#define put dlc_cpu_put

/* nothing to copy in place */
static void put_copy(Out *o, const DlcOp *op) {
    put(o, "    if (r0 != a0)\n        memcpy(r0, a0, sizeof *r0 * n * %lld);\n",
        (long long)dlc_cpu_numel(op->in[0]));
}

void dlc_cpu_emit_flatten(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_copy(o, op);
}

void dlc_cpu_emit_reshape(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_copy(o, op);
}

/* each operand's rows, side by side in each row of the result */
void dlc_cpu_emit_concat(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcType *y = &op->out[0]->type;
    int64_t before, after_y, offset = 0;
    int axis = dlc_cpu_axis(op, y, &before, &after_y);
    int64_t row_y = y->dims[axis] * after_y;
    for (int i = 0; i < op->nin; i++) {
        int64_t row = op->in[i]->type.dims[axis] * after_y;
        put(o, "    dlrt_copy_rows(n * %lld, %lld, a%d, %lld, 0, r0, %lld, %lld);\n",
            (long long)before, (long long)row, i, (long long)row, (long long)row_y,
            (long long)offset);
        offset += row;
    }
}

/* (x), or (x, y) with a fused ReLU gradient */
void dlc_cpu_emit_slice(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    int64_t before, after;
    int axis = dlc_cpu_axis(op, x, &before, &after);
    int64_t row_x = x->dims[axis] * after, row_y = y->dims[axis] * after;
    int64_t offset = dlc_attr_int(op, DLC_A_BEGIN) * after;
    int mask = dlc_op_relu_grad_mask(op);
    if (mask >= 0) {
        /* the ReLU's result, or the concatenation it went into (laid out as x) */
        bool whole = dlc_type_eq(&op->in[mask]->type, x);
        put(o, "    dlrt_copy_rows_relu_grad(n * %lld, %lld, a0, %lld, %lld, a1, %lld, %lld, "
            "r0);\n", (long long)before, (long long)row_y, (long long)row_x, (long long)offset,
            (long long)(whole ? row_x : row_y), (long long)(whole ? offset : 0));
    } else
        put(o, "    dlrt_copy_rows(n * %lld, %lld, a0, %lld, %lld, r0, %lld, 0);\n",
            (long long)before, (long long)row_y, (long long)row_x, (long long)offset,
            (long long)row_y);
}

/* (x [C,H,W]) into its result's layout: plain to blocked or back (the
 * layout pass puts no other) */
void dlc_cpu_emit_reorder(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const int64_t *d = op->in[0]->type.dims;
    int64_t to = dlc_attr_int(op, DLC_A_LAYOUT), from = dlc_value_layout(op->in[0]);
    if (to && from)
        dlc_unreachable("cpu: a reorder between two blocked layouts");
    put(o, "    dlrt_%s_blocked(n, %lld, %lld, %lld, a0, r0);\n", to ? "to" : "from",
        (long long)d[0], (long long)(d[1] * d[2]), (long long)(to ? to : from));
}
