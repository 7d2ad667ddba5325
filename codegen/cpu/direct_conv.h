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

#endif /* DLC_CPU_DIRECT_CONV_H */
