/* emit.h — the C target's emission of ops, inside codegen/cpu.
 *
 * cpu.c writes the program's structure (one static function per op, the
 * functions that run them, the API); the body of each op's function comes
 * from the op's emission function, dlc_cpu_emit_<op>, which the cpu column
 * of ir/ops.def names and cpu.c's table calls.  The emission functions sit
 * by op family in emit_<family>.c; what several families share is here,
 * implemented in emit.c.  direct_conv.c (direct_conv.h) uses the same
 * helpers for the convolutions the tile pass gave a register block.
 *
 * An op's function takes its operands as a0, a1, ... (parameters after the
 * tensors), its results as r0, r1, ... and the batch as n.  A body names
 * libdlrt's f32 kernels (dlrt_relu_forward); cpu.c appends the kernels'
 * suffix of the element type (Emit.k) to every call of a body that does
 * not end with it already. */
#ifndef DLC_CPU_EMIT_H
#define DLC_CPU_EMIT_H

#include "../../ir/ir.h"
#include "out.h"

/* ---- emit.c: the state an emission function reads, and shared helpers ---- */

/* What an op's emission function reads, and what it says of the function
 * whose body it writes.  cpu.c clears the last three before each call. */
typedef struct Emit {
    DlcArena *arena;     /* the literals and names a body makes (cpu.c's, freed
                            with the network's) */
    const char *real;    /* the element type in C: float, double */
    const char *k;       /* the kernels' suffix for it: "", "_f64" */
    bool f64;            /* the element type is double */
    /* set by the emission function: what the op's function takes besides
       its operands and results */
    const char *scratch; /* statements that set `int64_t w` to the scratch
                            elements `threads` workers need on batches of up
                            to `max_batch` samples: the function takes
                            `real *restrict work, int threads`; NULL for none */
    bool seed;           /* it takes `uint64_t seed`: it draws random numbers
                            (derived from the network's seed, the step and the
                            op's position) */
    int written;         /* its last `written` operands are written in place
                            (not const): an update's parameter and state */
    int state;           /* a stateful recurrent layer's (stateful=true): 1
                            takes `real *state_h, real *state_c`, the states
                            its chunk starts from (state_c NULL but for an
                            LSTM), 2 also `real *next_h, real *next_c`, where
                            a training step leaves the ones it ends in */
} Emit;

/* Elements per sample of v (all of them for an unbatched value), as its
 * layout stores them (dlc_value_numel). */
int64_t dlc_cpu_numel(const DlcValue *v);
/* "n * " for a batched value, "": the multiplier of an elementwise count. */
const char *dlc_cpu_count(const DlcValue *v);
/* x as a literal of the element type (dlc_cpu_literal), in e's arena. */
const char *dlc_cpu_cfloat(Emit *e, double x);

/* Op's axis attribute, normalized (a negative axis counts from the end of
 * t's dimensions), with the elements of t before and after it. */
int dlc_cpu_axis(const DlcOp *op, const DlcType *t, int64_t *before, int64_t *after);

/* The DlrtActivation that applies op's fused activation (conv2d, dense):
 * DLRT_ACT_ and the activation's name in capitals, DLRT_ACT_NONE without
 * one. */
const char *dlc_cpu_activation(Emit *e, const DlcOp *op);
/* The parameter of op's fused activation (its one attribute: a leaky
 * ReLU's slope) as a literal of the element type, the one the separate
 * op's kernel gets; "0" without one.  Its name, the DlrtConv field that
 * holds it, or NULL. */
const char *dlc_cpu_activation_param(Emit *e, const DlcOp *op);
const char *dlc_cpu_activation_param_name(const DlcOp *op);
/* The operand that holds the ReLU result whose gradient op applies
 * (relu_grad=true), "NULL" without one. */
const char *dlc_cpu_relu_y(Emit *e, const DlcOp *op);
/* The operand of op's first parameter (its weight), after the tensors. */
const char *dlc_cpu_weight(Emit *e, const DlcOp *op);
/* The operand of a conv2d's or dense's bias (the parameter after the
 * weight), "NULL" without one (bias=false). */
const char *dlc_cpu_bias(Emit *e, const DlcOp *op);
/* A conv2d with a batchnorm folded in (batchnorm=true) starts with the
 * batchnorm's per-channel scale and shift (bn_scale, bn_shift), from its
 * parameters as they are at this call (training may have changed them
 * since the last); nothing for any other op.  Written with e->k, for the
 * library's convolution and dlc's own loops alike. */
void dlc_cpu_put_batchnorm_fold(Emit *e, Out *o, const DlcOp *op);

/* The elements of op's weights packed beforehand for its loops (by
 * NAME_freeze, for inference): a convolution of dlc's own loops
 * (direct_conv.h) or an int8 layer on the VNNI path (emit_quant.c); 0 for
 * an op that reads them as they are.  Such an op's function takes `const
 * real *restrict packed` (NULL: pack them at the call) after its scratch. */
int64_t dlc_cpu_packed(const Emit *e, const DlcOp *op);
/* The packing function `name` of such an op:
 *   static void name(const W *restrict w, [the op's next parameters,]
 *                    real *restrict wt, int me, int t)
 * (W the weight's element type) packs worker me of t's share of w into wt
 * (me = 0, t = 1: all of it); it reads dlc_cpu_pack_operands(op) of the
 * op's parameters, from the weight on. */
void dlc_cpu_pack(const Emit *e, Out *o, const DlcOp *op, const char *name);
int dlc_cpu_pack_operands(const DlcOp *op);

/* ---- emit_quant.c: the int8 layers' packed weights -------------------- */

/* dlc_cpu_packed and dlc_cpu_pack of a qconv2d or qdense. */
int64_t dlc_cpu_quant_packed(const Emit *e, const DlcOp *op);
void dlc_cpu_quant_pack(const Emit *e, Out *o, const DlcOp *op, const char *name);

/* ---- cpu.c: one op's function alone, for autotune.c ------------------- */

/* Writes op's function (and its packing function, if it has one) into o,
 * f32, exactly as NAME.c has it but named after tag instead of the
 * network's ("infer": infer_opK_NAME); returns the name, in arena, and in
 * *scratch the statements that set its scratch `w` (Emit.scratch), or
 * NULL where it takes none. */
const char *dlc_cpu_op_function(DlcCtx *ctx, DlcArena *arena, Out *o, const DlcOp *op, int k,
                                const char *tag, const char **scratch);

/* ---- emit_*.c: one emission function per op, from ir/ops.def ---------- */

/* dlc_cpu_emit_<op> writes the body of op's function into o. */
#define CPU(x) void dlc_cpu_emit_##x(Emit *e, Out *o, const DlcOp *op);
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) cpu
#include "../../ir/ops.def"
#undef OP
#undef CPU

#endif /* DLC_CPU_EMIT_H */
