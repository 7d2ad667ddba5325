/* out.h — the C target's output, shared by its files (cpu.c, direct_conv.c). */
#ifndef DLC_CPU_OUT_H
#define DLC_CPU_OUT_H

#include <stdio.h>

#include "../../ir/ir.h"

/* A file being written, with its lines counted for #line directives. */
typedef struct Out {
    FILE *f;
    char *buf;
    size_t len;
    int line;         /* lines written so far */
    const char *name; /* the file's name, for #line back to it */
} Out;

/* printf to o (a line of at most 4 KiB). */
__attribute__((format(printf, 2, 3))) void dlc_cpu_put(Out *o, const char *fmt, ...);

/* cpu.c: a C literal of the element type for x into buf: "0.9f", "1e-08f",
 * "0.0f" (f32); "0.9", "1e-08", "0.0" (f64).  Every constant of the
 * generated code is written so, so that an op fused into another gets the
 * very value it would get as an op of its own. */
enum { DLC_CPU_LITERAL_MAX = 64 };
void dlc_cpu_literal(char buf[DLC_CPU_LITERAL_MAX], double x, bool f64);

/* direct_conv.c: a convolution op the tile pass gave a tile (vector > 0),
 * computed by dlc's own loops.  The body of its function, whose operands
 * are a0, a1 (, a2), its result r0, scratch `work` and `threads` (and
 * `packed`, below), for elements of C type `real` (float or double); `pack`
 * names its packing function, if it has one. */
void dlc_cpu_direct_conv(Out *o, const DlcOp *op, const char *real, const char *pack);
/* The elements of op's weights in the blocked order its loops read them
 * (a forward convolution in filter lanes), or 0 for an op that reads them
 * as they are.  Such an op's function takes `const real *restrict packed`:
 * the weights packed beforehand (by NAME_freeze), or NULL to pack them into
 * its scratch on every call. */
int64_t dlc_cpu_direct_conv_packed(const DlcOp *op, const char *real);
/* The packing function `name` of such an op:
 *   static void name(const real *restrict w, real *restrict wt, int me, int t)
 * packs worker me of t's share of w into wt (me = 0, t = 1: all of it). */
void dlc_cpu_direct_conv_pack(Out *o, const DlcOp *op, const char *real, const char *name);
/* The index of op's weight operand. */
int dlc_cpu_direct_conv_weight(const DlcOp *op);
/* The scratch it needs, in elements of `real`: `shared` once, then `slice`
 * for each worker. */
void dlc_cpu_direct_conv_work(const DlcOp *op, const char *real, int64_t *shared, int64_t *slice);
/* Whether op is such a convolution. */
bool dlc_cpu_is_direct_conv(const DlcOp *op);
/* The lines before (begin) and after its function that let GCC fuse the
 * loops' multiply-adds into FMA instructions. */
void dlc_cpu_direct_conv_contract(Out *o, bool begin);

#endif /* DLC_CPU_OUT_H */
