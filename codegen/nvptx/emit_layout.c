/* emit_layout.c — the GPU kernels of the ops that move rows of a tensor
 * without computing: concat (a copy per operand into its place in the
 * result) and slice (the rows of a range of one axis).  Each copy is a
 * map over the elements it moves. */
#include <stdio.h>

#include "emit.h"

/* rows of `len` floats from src (rows `src_row` apart, starting at
 * src_off) to dst (rows dst_row apart, from dst_off) */
static void copy_rows(NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                      int src, int64_t rows, int64_t len, int64_t src_row, int64_t src_off,
                      int64_t dst_row, int64_t dst_off) {
    Build b;
    int slots[2] = {src, NV_RESULT};
    nv_start(&b, nk, op, tag, suffix, slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMValueRef i = nv_begin_map(&b, rows * len, 0);
    LLVMValueRef r = kb_divi(kb, i, len), j = kb_remi(kb, i, len);
    kb_store(kb, b.p[1], kb_add(kb, kb_muli(kb, r, dst_row), kb_addi(kb, j, dst_off)),
             kb_load(kb, b.p[0], kb_add(kb, kb_muli(kb, r, src_row), kb_addi(kb, j, src_off))));
    nv_end_map(&b);
}

/* a kernel per operand, TAG_partI */
void nv_emit_concat(NvKernels *nk, const DlcOp *op, const char *tag) {
    const DlcValue *y = op->out[0];
    int axis = nv_norm_axis(dlc_attr_int(op, DLC_A_AXIS), y->type.rank);
    int64_t before, after, offset = 0;
    nv_around_axis(&y->type, axis, &before, &after);
    int64_t row_y = y->type.dims[axis] * after;
    for (int i = 0; i < op->nin; i++) {
        int64_t row = op->in[i]->type.dims[axis] * after;
        char suffix[16];
        snprintf(suffix, sizeof suffix, "part%d", i);
        copy_rows(nk, op, tag, suffix, i, before, row, row, 0, row_y, offset);
        offset += row;
    }
}

void nv_emit_slice(NvKernels *nk, const DlcOp *op, const char *tag) {
    const DlcValue *x = op->in[0], *y = op->out[0];
    int axis = nv_norm_axis(dlc_attr_int(op, DLC_A_AXIS), x->type.rank);
    int64_t before, after;
    nv_around_axis(&x->type, axis, &before, &after);
    int64_t row_x = x->type.dims[axis] * after, row_y = y->type.dims[axis] * after;
    copy_rows(nk, op, tag, "", 0, before, row_y, row_x, dlc_attr_int(op, DLC_A_BEGIN) * after, row_y, 0);
}
