/* emit.h — what the files of the GPU kernels (emit_*.c) share: the kernel
 * being built and its launch, the few shapes a kernel starts from (a map,
 * a row reduction), attribute accessors, and each op's nv_emit_x, the
 * function its row of ir/ops.def names in the ptx column.
 *
 *   emit.c              these helpers
 *   emit_elementwise.c  activations, add, their gradients, dropout, copies
 *   emit_layout.c       concat, slice
 *   emit_pool.c         max, average and global average pooling, gradients
 *   emit_norm.c         batch norm, channel sums, LRN, softmax
 *   emit_loss.c         cross_entropy, mse and their gradients
 *   emit_gemm.c         conv2d, dense and their gradients: tiled products
 *   emit_update.c       sgd_update, adam_update, param_grad, clip_norm, clip_scale
 *   emit_recurrent.c    rnn, rnn_relu, lstm, gru: their forms, their gradients
 *   emit_embedding.c    embedding and embedding_grad
 *   emit_quant.c        int8 inference: quantize, dequantize, qconv2d, qdense
 *
 * Every kernel is made with kb.h; kernels.c dispatches to nv_emit_x. */
#ifndef DLC_NVPTX_EMIT_H
#define DLC_NVPTX_EMIT_H

#include "nvptx.h"

#define MAP_THREADS 256 /* threads per block of a map */
#define ROW_THREADS 256 /* threads per block of a row reduction */

/* A kernel being built and its launch. */
typedef struct Build {
    NvKernels *nk;
    Kb *kb;
    const DlcOp *op;
    NvLaunch *l;
    LLVMValueRef p[NV_MAX_PTRS]; /* the pointer parameters, in launch order */
    LLVMValueRef n;              /* the batch, i32 */
    LLVMValueRef sc[4];          /* the scalar parameters */
} Build;

/* Elements of v: all of them, per sample (0 unless batched), fixed (0 if batched). */
static inline int64_t nv_numel(const DlcValue *v) { return dlc_type_numel(&v->type); }
static inline int64_t nv_per_n(const DlcValue *v) { return v->type.batched ? nv_numel(v) : 0; }
static inline int64_t nv_fixed(const DlcValue *v) { return v->type.batched ? 0 : nv_numel(v); }

/* Starts a kernel named TAG_suffix (TAG for suffix "") with the given
 * pointer slots and scalar slots (the batch is always the first scalar),
 * and appends its launch to nk, whose grid the kernel's shape sets
 * (nv_begin_map, nv_begin_rows, or the kernel itself). */
void nv_start(Build *b, NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
              const int *ptrs, int nptrs, const int *scalars, int nscalars, int block);
/* per_n * n + fixed, in the kernel. */
LLVMValueRef nv_count(Build *b, int64_t pn, int64_t fx);
/* A map over per_n * n + fixed items: returns the item's index, inside an
 * if that nv_end_map closes (ending the kernel). */
LLVMValueRef nv_begin_map(Build *b, int64_t pn, int64_t fx);
void nv_end_map(Build *b);
/* A row reduction over per_n * n + fixed rows (one block each): returns the row. */
LLVMValueRef nv_begin_rows(Build *b, int64_t pn, int64_t fx);
/* The tensor operands then the results, as pointer slots; returns their number. */
int nv_tensor_slots(const DlcOp *op, int *slots);
/* v, or max(v, 0) where relu (a fused ReLU), as the CPU code computes it. */
LLVMValueRef nv_relu_if(Kb *kb, bool relu, LLVMValueRef v);
/* Points pointer argument `ptr` of the kernel being built, an
 * NV_WORKSPACE slot, per_n floats per sample of the largest batch plus
 * `fixed` into the scratch memory. */
void nv_set_workspace(Build *b, int ptr, int64_t per_n, int64_t fixed);
/* The launches appended between nv_loop_begin (which returns where they
 * start) and nv_loop_end run `steps` times in a row, in order, with the
 * counter as scalar NV_SC_LOOP: a recurrent layer's time steps. */
int nv_loop_begin(NvKernels *nk);
void nv_loop_end(NvKernels *nk, int first, int64_t steps);
/* Element i of p read as an i32 (labels, token ids, lengths). */
LLVMValueRef nv_load_i32(Kb *kb, LLVMValueRef p, LLVMValueRef i);
/* 1 / (1 + exp(-a)), and sign(a) (1 - e) / (1 + e) with e = exp(-2|a|)
 * (no overflow): the sigmoid and tanh ops' and the recurrent cells'. */
LLVMValueRef nv_sigmoid(Kb *kb, LLVMValueRef a);
LLVMValueRef nv_tanh(Kb *kb, LLVMValueRef a);
/* An axis attribute counted from the end (-1: the last) made an index. */
int nv_norm_axis(int64_t axis, int rank);
/* The products of t's dimensions before and after `axis`. */
void nv_around_axis(const DlcType *t, int axis, int64_t *before, int64_t *after);

/* emit_norm.c: y = batchnorm(x) as a map, in each of its forms (see there);
 * emit_gemm.c's conv2d runs it after the product for a folded batchnorm. */
typedef enum NvBatchnormForm {
    NV_BN_RUNNING,   /* batchnorm: from the running statistics */
    NV_BN_FOLDED,    /* conv2d's folded batchnorm, over its own result in place */
    NV_BN_NORMALIZE, /* batchnorm_normalize: from the batch's statistics */
    NV_BN_TRAIN,     /* batchnorm_train's last kernel: from the statistics it computed */
} NvBatchnormForm;
void nv_batchnorm_map(NvKernels *nk, const DlcOp *op, const char *tag, NvBatchnormForm form);

/* emit_gemm.c: a product shaped as a dense layer's, for the kernels of
 * other families (the recurrent layers'):
 *   out[r][m] (+)= sum over k of x[r][k] w(m, k) (+ bias[m])
 * for rows r < rows * n, m < outs, k < ins, where w(m, k) is w[m][k]
 * (dense's W) or, with w_by_k, w[k][m] (dense_grad_input's).  Each
 * operand is a pointer slot (an operand, NV_RESULT + r, or NV_WORKSPACE
 * at ws_per_n * largest batch + ws_fixed floats); no bias: bias.slot < 0.
 * The kernel is named TAG_suffix. */
typedef struct NvOperand {
    int slot;
    int64_t ws_per_n, ws_fixed;
} NvOperand;
typedef struct NvProduct {
    NvOperand x, w, bias, out;
    int64_t rows, ins, outs;
    bool w_by_k;     /* w is [ins][outs] */
    bool accumulate; /* out += the product, rather than = */
} NvProduct;
void nv_product(NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                const NvProduct *p);

/* emit_quant.c: flatten and reshape of an int8 tensor (a byte copy), for
 * emit_elementwise.c; and whether op's kernels handle its int8 operands or
 * results (kernels.c refuses an op reading or writing int8 whose do not). */
void nv_copy_s8(NvKernels *nk, const DlcOp *op, const char *tag);
bool nv_int8_ready(const DlcOp *op);

/* The ops' kernels, as ops.def names them: each appends op's kernels to
 * the module and their launches to nk (none for an op that moves nothing),
 * naming them after `tag`.  The checks that refuse an op run before
 * (kernels.c), so these do not fail. */
#define PTX(x) void nv_emit_##x(NvKernels *nk, const DlcOp *op, const char *tag);
#define PTX_NONE(why)
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) ptx
#include "../../ir/ops.def"
#undef OP
#undef PTX_NONE
#undef PTX

#endif /* DLC_NVPTX_EMIT_H */
