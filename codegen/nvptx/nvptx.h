/* nvptx.h — what the NVPTX target's files share.
 *
 *   kb.c       the kernel builder (kb.h): LLVM IR for loops, ifs, shared memory
 *   kernels.c  the kernels of each op, and how the host launches them: the
 *              op table's ptx column, dispatching to nv_emit_x in emit_*.c
 *              (emit.h lists them by op family)
 *   nvptx.c    the target: a module per network pair, PTX from LLVM's NVPTX
 *              backend, and the C that embeds the PTX and drives the GPU
 */
#ifndef DLC_NVPTX_H
#define DLC_NVPTX_H

#include "../../ir/ir.h"
#include "../codegen.h"
#include "kb.h"

/* Where a launch's pointer arguments come from: operand i of the op (i),
 * result r (NV_RESULT + r), or the network's scratch memory.  Operands
 * may number hundreds: clip_norm reads every gradient of a network, one
 * kernel each. */
enum { NV_RESULT = 1 << 16, NV_WORKSPACE = 1 << 17 };
/* Its scalar arguments, after the pointers: the batch n (i32), the op's
 * seed for random numbers (i64), the counter of the loop the launch is in
 * (i32: a recurrent layer's step, NvLaunch.loop_steps), or a scalar
 * operand i such as the learning rate or the step (NV_SCALAR + i, of the
 * operand's type).  The seed and the operands change from step to step:
 * they are read from the step values in device memory, the kernel taking
 * a pointer to its slot (nv_step_scalar), so that a recorded graph of a
 * step's launches stays right; n and the loop counter are the launch's. */
enum { NV_SC_N = 0, NV_SC_SEED = 1, NV_SC_LOOP = 2, NV_SCALAR = 100 };
static inline bool nv_step_scalar(int sc) { return sc == NV_SC_SEED || sc >= NV_SCALAR; }

#define NV_MAX_PTRS 24

/* One kernel launch of an op: the host code (nvptx.c) makes them in order. */
typedef struct NvLaunch {
    const DlcOp *op;
    const char *kernel;            /* its name in the PTX */
    int ptrs[NV_MAX_PTRS], nptrs;  /* pointer arguments */
    int scalars[4], nscalars;      /* then scalar arguments */
    /* grid.x = ceil((per_n * n + fixed) / div); grid.y, grid.z fixed */
    int64_t gx_per_n, gx_fixed, gx_div;
    int64_t gy, gz;
    int block;                     /* threads per block (1-d) */
    int64_t workspace;             /* floats of scratch it uses (NV_WORKSPACE), */
    int64_t workspace_per_n;       /* and per sample of the largest batch */
    /* where a pointer argument NV_WORKSPACE points: ws_per_n[i] times the
       largest batch plus ws_fixed[i] floats into the scratch memory (0: its
       start), so that an op's kernels can share several buffers there */
    int64_t ws_per_n[NV_MAX_PTRS], ws_fixed[NV_MAX_PTRS];
    /* > 0: this launch and the loop_len - 1 after it are run loop_steps
       times in a row, in order, the counter (NV_SC_LOOP) going from 0: a
       recurrent layer's steps, each waiting for the one before */
    int64_t loop_steps;
    int loop_len;
} NvLaunch;

/* The kernels of a module being built. */
typedef struct NvKernels {
    Kb kb;
    DlcArena *arena;
    DlcCtx *ctx;
    NvLaunch *launches;
    int nlaunches, caplaunches;
    int multiprocessors;           /* the machine the grids are shaped for */
    DlcGpuMath math;               /* the products' arithmetic (--gpu-math) */
    bool big_tiles;                /* DLC_NVPTX_TILE=128: the tensor cores' large products
                                      in tiles of 128, to compare with 64 (emit_gemm.c) */
    int sm;                        /* the architecture, 80 for sm_80 (int8's dp4a needs 61) */
} NvKernels;

/* kernels.c: appends op's kernels to the module and their launches to nk
 * (none for ops that move nothing: param_grad, or an in-place copy);
 * `tag` names them uniquely ("train_op12").  Reports an unsupported op
 * through nk->ctx and returns false. */
bool nv_op_kernels(NvKernels *nk, const DlcOp *op, const char *tag);

#endif /* DLC_NVPTX_H */
