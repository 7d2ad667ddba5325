/* kernels.c — the GPU kernels of each op: the checks that refuse an op,
 * then the op's emitter, from a table that ir/ops.def's ptx column fills
 * (PTX(x) names nv_emit_x, whose file emit.h lists; PTX_NONE("why") is an
 * op the GPU target refuses, and why).  A row naming a function that no
 * emit_*.c defines does not link.
 *
 * Three shapes of kernel cover every op:
 *   - a map: one thread per output element (activations, their gradients,
 *     optimizer updates, pooling and its gradient, LRN, copies);
 *   - a row reduction: one block of ROW_THREADS threads per row (losses)
 *     or per part of a channel (bias gradients, batch-norm statistics and
 *     gradients), summing through shared memory in a fixed order, the
 *     parts then added in order by a small kernel, so that results do not
 *     depend on timing: no atomics anywhere;
 *   - a tiled matrix product (emit_gemm.c): the dense layers and, as an
 *     implicit GEMM that gathers its operands straight from the tensors,
 *     the convolutions and their two gradients, on the CUDA cores or on
 *     the tensor cores (--gpu-math=tf32 or bf16).
 * A recurrent layer (emit_recurrent.c) is made of the last two: products
 * and a map per time step, launched in a loop (NvLaunch.loop_steps).
 *
 * Semantics follow the CPU kernels (runtime/kernels/) op for op; exp and
 * log use the GPU's approximate units, sums run in f32. */
#include "emit.h"

/* An op's entry: its emitter, or NULL and the reason the GPU refuses it. */
typedef struct NvEmitter {
    void (*emit)(NvKernels *nk, const DlcOp *op, const char *tag);
    const char *refused;
} NvEmitter;

static const NvEmitter emitters[DLC_OP_COUNT] = {
#define PTX(x) {nv_emit_##x, NULL}
#define PTX_NONE(why) {NULL, why}
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) [DLC_OP_##id] = ptx,
#include "../../ir/ops.def"
#undef OP
#undef PTX_NONE
#undef PTX
};

bool nv_op_kernels(NvKernels *nk, const DlcOp *op, const char *tag) {
    const char *name = dlc_op_info(op->kind)->name;
    if (op->nin + op->nout > NV_MAX_PTRS && op->kind != DLC_OP_CLIP_NORM) {
        /* a kernel's pointer arguments: an add or concat of many operands
           (clip_norm reads its operands a kernel each) */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with %d operands has no GPU kernel (at most %d)",
                  name, op->nin, NV_MAX_PTRS - op->nout);
        return false;
    }
    if (op->kind != DLC_OP_MAXPOOL_GRAD && dlc_op_relu_grad_mask(op) >= 0) {
        /* the fuse pass merges relu_grad into maxpool_grad only for a GPU target */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with a fused relu_grad has no GPU kernel yet", name);
        return false;
    }
    if (dlc_attr_true(op->kind, op->attrs, DLC_A_RESIDUAL)) {
        /* the CPU's fuse_residual pass sets it, in blocked layouts only */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with residual=true (an addition fused in by the "
                  "CPU's fuse-residual pass) has no GPU kernel; write add(%s(...), r)", name, name);
        return false;
    }
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act != DLC_OP_COUNT && act != DLC_OP_RELU) {
        /* the fuse pass merges only a ReLU for a GPU target */
        dlc_error(nk->ctx, op->loc, "nvptx: %s with a fused %s has no GPU kernel yet", name,
                  dlc_op_info(act)->name);
        return false;
    }
    if (dlc_recurrent_cell(op->kind) != DLC_OP_COUNT && dlc_attr_bool(op, DLC_A_STATEFUL)) {
        /* the state the last call ended in lives in the CPU code's net->state */
        dlc_error(nk->ctx, op->loc, "nvptx: a stateful %s has no GPU kernel yet: the GPU code "
                  "keeps no state from one call to the next", name);
        return false;
    }
    bool int8 = false;
    for (int i = 0; i < op->nin + op->nout; i++)
        int8 |= (i < op->nin ? op->in[i] : op->out[i - op->nin])->type.dtype == DLC_I8;
    if (int8 && emitters[op->kind].emit && !nv_int8_ready(op)) {
        /* an op whose kernel reads and writes floats, given int8 (int8 inference) */
        dlc_error(nk->ctx, op->loc, "nvptx: %s of int8 tensors has no GPU kernel yet "
                  "(dlc --quantize=int8 for the CPU alone: --target=cpu)", name);
        return false;
    }
    if (int8 && nk->sm < 61) {
        dlc_error(nk->ctx, op->loc, "nvptx: int8 inference needs sm_61 or later (dp4a); "
                  "--gpu-arch=sm_%d has no int8 dot product", nk->sm);
        return false;
    }
    const NvEmitter *e = &emitters[op->kind];
    if (!e->emit) {
        dlc_error(nk->ctx, op->loc, "nvptx: %s has no GPU kernel: %s", name, e->refused);
        return false;
    }
    e->emit(nk, op, tag);
    return true;
}
