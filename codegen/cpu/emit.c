/* emit.c — what the C target's emission functions share (emit.h): element
 * counts, literals, attributes, and the operands and options that several
 * op families pass to libdlrt the same way (a fused activation, a fused
 * ReLU gradient, the weight, a folded batchnorm). */
#include "emit.h"
#include "direct_conv.h"

#define put dlc_cpu_put

int64_t dlc_cpu_numel(const DlcValue *v) { return dlc_value_numel(v); }

const char *dlc_cpu_count(const DlcValue *v) { return v->type.batched ? "n * " : ""; }

const char *dlc_cpu_cfloat(Emit *e, double x) {
    char buf[DLC_CPU_LITERAL_MAX];
    dlc_cpu_literal(buf, x, e->f64);
    return dlc_arena_printf(e->arena, "%s", buf);
}

int dlc_cpu_axis(const DlcOp *op, const DlcType *t, int64_t *before, int64_t *after) {
    int64_t a = dlc_attr_int(op, DLC_A_AXIS);
    int axis = (int)(a < 0 ? a + t->rank : a);
    *before = *after = 1;
    for (int i = 0; i < t->rank; i++) {
        if (i < axis)
            *before *= t->dims[i];
        if (i > axis)
            *after *= t->dims[i];
    }
    return axis;
}

/* libdlrt names each DlrtActivation after the op (as the fused attribute
 * is named after it), so a new activation needs no entry here. */
const char *dlc_cpu_activation(Emit *e, const DlcOp *op) {
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act == DLC_OP_COUNT)
        return "DLRT_ACT_NONE";
    char *s = dlc_arena_printf(e->arena, "DLRT_ACT_%s", dlc_op_info(act)->name);
    for (char *p = s; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    return s;
}

/* the fused activation's own attribute (ops.def gives an activation one
   at most: a leaky ReLU's slope), or NULL */
static const DlcAttrSpec *activation_param(const DlcOp *op) {
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act == DLC_OP_COUNT || dlc_op_info(act)->nattrs == 0)
        return NULL;
    return &dlc_op_info(act)->attrs[0];
}

const char *dlc_cpu_activation_param(Emit *e, const DlcOp *op) {
    const DlcAttrSpec *p = activation_param(op);
    return p ? dlc_cpu_cfloat(e, dlc_attr_float(op, p->id)) : "0";
}

const char *dlc_cpu_activation_param_name(const DlcOp *op) {
    const DlcAttrSpec *p = activation_param(op);
    return p ? p->name : NULL;
}

const char *dlc_cpu_relu_y(Emit *e, const DlcOp *op) {
    int k = dlc_op_relu_grad_mask(op);
    return k < 0 ? "NULL" : dlc_arena_printf(e->arena, "a%d", k);
}

const char *dlc_cpu_weight(Emit *e, const DlcOp *op) {
    return dlc_arena_printf(e->arena, "a%d", op->nin - op->nparams);
}

const char *dlc_cpu_bias(Emit *e, const DlcOp *op) {
    return dlc_op_bias(op) ? dlc_arena_printf(e->arena, "a%d", op->nin - op->nparams + 1) : "NULL";
}

void dlc_cpu_put_batchnorm_fold(Emit *e, Out *o, const DlcOp *op) {
    int k = dlc_op_folded_batchnorm(op);
    if (k < 0)
        return;
    long long f = (long long)op->out[0]->type.dims[0];
    put(o, "    /* the folded batchnorm: y = conv * bn_scale + bn_shift per channel */\n"
           "    %s bn_scale[%lld], bn_shift[%lld];\n"
           "    dlrt_batchnorm_fold%s(%lld, %s, %s, a%d, a%d, a%d, a%d, bn_scale, bn_shift);\n",
        e->real, f, f, e->k, f, dlc_cpu_cfloat(e, dlc_attr_float(op, DLC_A_BN_EPS)),
        dlc_cpu_bias(e, op), k, k + 1, k + 2, k + 3);
}

int64_t dlc_cpu_packed(const Emit *e, const DlcOp *op) {
    if (op->kind == DLC_OP_QCONV2D || op->kind == DLC_OP_QDENSE)
        return dlc_cpu_quant_packed(e, op);
    return dlc_cpu_direct_conv_packed(e, op);
}

/* an int8 layer's packing also computes its requantization from the scales */
int dlc_cpu_pack_operands(const DlcOp *op) {
    return op->kind == DLC_OP_QCONV2D || op->kind == DLC_OP_QDENSE ? op->nparams : 1;
}

void dlc_cpu_pack(const Emit *e, Out *o, const DlcOp *op, const char *name) {
    if (op->kind == DLC_OP_QCONV2D || op->kind == DLC_OP_QDENSE)
        dlc_cpu_quant_pack(e, o, op, name);
    else
        dlc_cpu_direct_conv_pack(e, o, op, name);
}
