/* direct_conv.h — the convolutions computed by dlc's own loops
 * (direct_conv.c), for cpu.c: the ops the tile pass gave a register block
 * (vector > 0), whose functions cpu.c writes around these bodies instead
 * of asking the table's emission function (emit_conv.c) for a call of
 * libdlrt's. */
#ifndef DLC_CPU_DIRECT_CONV_H
#define DLC_CPU_DIRECT_CONV_H

#include "emit.h"

/* Whether op is such a convolution. */
bool dlc_cpu_is_direct_conv(const DlcOp *op);
/* The body of its function, whose operands are a0, a1 (, a2), its result
 * r0, scratch `work` and `threads` (and `packed`, below); `pack` names its
 * packing function, if it has one.  Sets e->scratch. */
void dlc_cpu_direct_conv(Emit *e, Out *o, const DlcOp *op, const char *pack);
/* The elements of op's weights in the blocked order its loops read them
 * (a forward convolution in filter lanes), or 0 for an op that reads them
 * as they are.  Such an op's function takes `const real *restrict packed`:
 * the weights packed beforehand (by NAME_freeze), or NULL to pack them into
 * its scratch on every call. */
int64_t dlc_cpu_direct_conv_packed(const Emit *e, const DlcOp *op);
/* The packing function `name` of such an op:
 *   static void name(const real *restrict w, real *restrict wt, int me, int t)
 * packs worker me of t's share of w into wt (me = 0, t = 1: all of it). */
void dlc_cpu_direct_conv_pack(const Emit *e, Out *o, const DlcOp *op, const char *name);
/* The lines before (begin) and after its function that let GCC fuse the
 * loops' multiply-adds into FMA instructions. */
void dlc_cpu_direct_conv_contract(Out *o, bool begin);
/* The definition of IN_REGISTER(v) for vectors of `bytes`: the loaded
 * vector v stays in a register (direct_conv.c says why). */
void dlc_cpu_direct_conv_in_register(Out *o, int64_t bytes);
/* The definition of PREFETCH(p): a hint to bring p's line into the caches
 * (nothing where the compiler has no such builtin). */
void dlc_cpu_direct_conv_prefetch(Out *o);
/* The value a convolution stores for its sum v after its fused activation,
 * as a C expression of v (and of `slope` or `alpha`, which the body
 * declares): "v" without one. */
const char *dlc_cpu_conv_activation(const DlcOp *op, const char *real);
/* The opening of a parallel region of t workers for n samples of `units`
 * parts and `macs` multiply-adds each (C expressions), up to the worker's
 * index `me`; one worker where the generated code is compiled without
 * OpenMP.  The caller closes its block. */
void dlc_cpu_direct_conv_region(Out *o, const char *units, const char *macs);
/* The declaration of `slope` or `alpha` that expression reads, if any. */
void dlc_cpu_conv_activation_param(Emit *e, Out *o, const DlcOp *op);

/* ---- blocked_conv.c: conv2d in a blocked layout (layout=B) ----------------
 * The same protocol as above, which dispatches to these: its function
 * takes `packed` and scratch, and its weights are always packed. */
bool dlc_cpu_is_blocked_conv(const DlcOp *op);
void dlc_cpu_blocked_conv(Emit *e, Out *o, const DlcOp *op, const char *pack);
int64_t dlc_cpu_blocked_conv_packed(const DlcOp *op);
void dlc_cpu_blocked_conv_pack(const Emit *e, Out *o, const DlcOp *op, const char *name);

#endif /* DLC_CPU_DIRECT_CONV_H */
