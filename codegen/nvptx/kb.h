/* kb.h — a kernel builder: the few shapes of code the GPU kernels are made
 * of (an index per thread, if, counted loops, shared-memory arrays, block
 * reductions), over the LLVM C API, so that each op's kernel in kernels.c
 * reads as the loop nest it is rather than as a list of LLVMBuild* calls.
 *
 * Variables are allocas in the kernel's entry block; the O3 pipeline that
 * nvptx.c runs before asking for PTX turns them into registers (mem2reg).
 * Index arithmetic is 32-bit: nvptx.c refuses networks whose tensors have
 * 2^31 elements or more at the largest batch (it checks at create time).
 * Tensors are f32 in global memory (address space 1). */
#ifndef DLC_NVPTX_KB_H
#define DLC_NVPTX_KB_H

#include <llvm-c/Core.h>
#include <stdbool.h>
#include <stdint.h>

#define KB_MAX_NEST 32

/* An open if or loop. */
typedef struct KbNest {
    LLVMBasicBlockRef a, b; /* if: else, end; loop: header, end */
    LLVMValueRef var, step; /* loop: the counter and its step */
    bool loop, has_else;
} KbNest;

typedef struct Kb {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;        /* where the kernel's code goes */
    LLVMBuilderRef alloca_b; /* the entry block, for variables */
    LLVMValueRef fn;         /* the kernel being built */
    LLVMBasicBlockRef entry, body;
    LLVMTypeRef f32, i32, i64, i1, vd, gptr, sptr; /* gptr: global, sptr: shared */
    KbNest nest[KB_MAX_NEST]; /* the open ifs and loops, innermost last */
    int depth;
    int shared_count;        /* shared arrays made, for unique names */
} Kb;

/* A builder for module m (in context c). */
void kb_init(Kb *kb, LLVMContextRef c, LLVMModuleRef m);
void kb_dispose(Kb *kb);

/* Starts kernel `name` whose parameters are `nparams` pointers to f32
 * (global memory) followed by `nscalars` scalars of the given types; marks
 * it a kernel for NVVM (nvvm.annotations) with at most max_threads
 * threads per block (maxntid). */
void kb_begin(Kb *kb, const char *name, int nptrs, int nscalars, const LLVMTypeRef *scalar_types,
              int max_threads);
/* Asks the backend to fit `blocks` blocks of max_threads on a
 * multiprocessor (minctasm, CUDA's __launch_bounds__ second argument),
 * capping the kernel's registers accordingly. */
void kb_min_blocks(Kb *kb, int blocks);
/* Ends the kernel (a ret void where control still flows). */
void kb_end(Kb *kb);
LLVMValueRef kb_param(Kb *kb, int i);

/* Constants. */
LLVMValueRef kb_int(Kb *kb, int64_t v);   /* i32 */
LLVMValueRef kb_float(Kb *kb, double v);  /* f32 */
/* A call of the intrinsic `name` on n arguments (declared at its first use). */
LLVMValueRef kb_call(Kb *kb, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n);

/* Thread geometry (i32): threadIdx.x, blockIdx.{x,y,z}, blockDim.x, gridDim.x. */
LLVMValueRef kb_tid(Kb *kb);
LLVMValueRef kb_ctaid(Kb *kb, char axis);
LLVMValueRef kb_ntid(Kb *kb);
LLVMValueRef kb_nctaid(Kb *kb, char axis);
void kb_barrier(Kb *kb);

/* Variables: a mutable i32 or f32 with an initial value. */
LLVMValueRef kb_var(Kb *kb, LLVMTypeRef type, LLVMValueRef init);
LLVMValueRef kb_get(Kb *kb, LLVMValueRef var);
void kb_set(Kb *kb, LLVMValueRef var, LLVMValueRef value);

/* Integer (i32) arithmetic; division and remainder are signed. */
LLVMValueRef kb_add(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_sub(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_mul(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_div(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_rem(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_muli(Kb *kb, LLVMValueRef a, int64_t b);
LLVMValueRef kb_addi(Kb *kb, LLVMValueRef a, int64_t b);
LLVMValueRef kb_divi(Kb *kb, LLVMValueRef a, int64_t b);
LLVMValueRef kb_remi(Kb *kb, LLVMValueRef a, int64_t b);
LLVMValueRef kb_min(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_max(Kb *kb, LLVMValueRef a, LLVMValueRef b);
/* Comparisons (signed for integers, ordered for floats unless said). */
LLVMValueRef kb_lt(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_le(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_eq(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_and(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_or(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_not(Kb *kb, LLVMValueRef a);
LLVMValueRef kb_select(Kb *kb, LLVMValueRef cond, LLVMValueRef a, LLVMValueRef b);
/* Whether 0 <= a < limit. */
LLVMValueRef kb_in_range(Kb *kb, LLVMValueRef a, int64_t limit);

/* Float (f32) arithmetic. */
LLVMValueRef kb_fadd(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fsub(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fmul(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fdiv(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fma(Kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
LLVMValueRef kb_fneg(Kb *kb, LLVMValueRef a);
LLVMValueRef kb_fgt(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_flt(Kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_isnan(Kb *kb, LLVMValueRef a);
LLVMValueRef kb_fmax(Kb *kb, LLVMValueRef a, LLVMValueRef b); /* a > b ? a : b */
LLVMValueRef kb_sqrt(Kb *kb, LLVMValueRef a);                 /* correctly rounded */
LLVMValueRef kb_exp(Kb *kb, LLVMValueRef a);  /* ex2.approx of a log2(e): a few ulp */
LLVMValueRef kb_log(Kb *kb, LLVMValueRef a);  /* lg2.approx times ln 2 */
LLVMValueRef kb_pow(Kb *kb, LLVMValueRef a, double b); /* a > 0 */
LLVMValueRef kb_itof(Kb *kb, LLVMValueRef a);

/* Tensor cores (sm_80 and later).  kb_tf32 rounds a to TF32 (10 bits of
 * mantissa, to nearest, ties away: cvt.rna.tf32.f32) and keeps it in an f32.
 * kb_mma_tf32 is one warp's mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32:
 * acc (a 16x8 tile of f32, 4 per thread) += A (16x8, 4 TF32 values per
 * thread) B (8x8, 2 per thread), in the fragment layouts of the PTX ISA
 * ("Matrix Fragments for mma.m16n8k8", .tf32); with g = lane / 4 and
 * t = lane % 4: a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];
 * b = B[t][g], B[t+4][g]; acc = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]. */
LLVMValueRef kb_tf32(Kb *kb, LLVMValueRef a);
void kb_mma_tf32(Kb *kb, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef acc[4]);
/* bf16 (sm_80 and later).  kb_bf16x2 rounds lo and hi to bf16 (to nearest,
 * ties to even: cvt.rn.bf16x2.f32) and packs them in 32 bits, lo in the
 * lower half, held in an f32 variable.  kb_mma_bf16 is one warp's
 * mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: acc (16x8 of f32) += A
 * (16x16) B (16x8), each fragment register a pair of bf16 along k, lower
 * k in the lower half ("Matrix Fragments for mma.m16n8k16 with floating
 * point type"): a = A[g][2t,2t+1], A[g+8][2t,2t+1], A[g][2t+8,2t+9],
 * A[g+8][2t+8,2t+9]; b = B[2t,2t+1][g], B[2t+8,2t+9][g]; acc as above. */
LLVMValueRef kb_bf16x2(Kb *kb, LLVMValueRef lo, LLVMValueRef hi);
void kb_mma_bf16(Kb *kb, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef acc[4]);
/* Global memory: element i (i32) of pointer p. */
LLVMValueRef kb_load(Kb *kb, LLVMValueRef p, LLVMValueRef i);
void kb_store(Kb *kb, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v);
/* A load of element i of p where cond holds, else 0 (no access). */
LLVMValueRef kb_load_if(Kb *kb, LLVMValueRef cond, LLVMValueRef p, LLVMValueRef i);

/* Shared memory: an array of `count` floats, per block. */
LLVMValueRef kb_shared(Kb *kb, int64_t count);
LLVMValueRef kb_sload(Kb *kb, LLVMValueRef s, LLVMValueRef i);
void kb_sstore(Kb *kb, LLVMValueRef s, LLVMValueRef i, LLVMValueRef v);

/* Structured control flow. */
void kb_if(Kb *kb, LLVMValueRef cond);
void kb_else(Kb *kb);
void kb_endif(Kb *kb);
/* for (var = start; var < end; var += step): returns the counter variable
 * (read it with kb_get).  step > 0. */
LLVMValueRef kb_for(Kb *kb, LLVMValueRef start, LLVMValueRef end, LLVMValueRef step);
void kb_endfor(Kb *kb);

/* The sum over the block's threads (blockDim.x = threads, a power of two)
 * of each thread's v, through shared memory `scratch` of `threads` floats;
 * every thread gets it.  Ends with a barrier, so scratch is free again. */
LLVMValueRef kb_block_sum(Kb *kb, LLVMValueRef scratch, LLVMValueRef v, int threads);

#endif /* DLC_NVPTX_KB_H */
