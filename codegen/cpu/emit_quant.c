/* emit_quant.c — the C of the quantize pass's int8 ops (passes/quantize.c,
 * docs/quantization.md): quantize and dequantize (libdlrt's, for the
 * element type), and qconv2d and qdense, which call libdlrt's int8
 * convolution (runtime/kernels/int8_conv.c; a dense layer is a 1x1
 * convolution of [in,1,1]).  Each call first computes every filter's
 * requantization (an int32 bias, multiplier and shift) from the scales as
 * they are then, in double, as a folded batchnorm's scale and shift are
 * computed: a checkpoint loaded or calibrated since changes them.  qadd,
 * qconcat and qglobalavgpool do the same with their own few multipliers
 * (runtime/kernels/int8.c).  The integer kernels are written
 * `(dlrt_qconv_s8)(...)`: f64 code calls the same ones.  vnni=true (the
 * quantize pass's choice, from --target-cpu) takes the AVX-512 VNNI path,
 * whose integers are the portable path's; its weights are packed by
 * NAME_freeze (dlrt_qconv_s8_pack), as dlc's own f32 convolutions' are,
 * and at each call before a freeze. */
#include "emit.h"

#define put dlc_cpu_put

void dlc_cpu_emit_quantize(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_quantize_s8(%s%lld, a0, a1[0], r0);\n", dlc_cpu_count(op->in[0]),
        (long long)dlc_cpu_numel(op->in[0]));
}

void dlc_cpu_emit_dequantize(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    dlrt_dequantize_s8(%s%lld, a0, a1[0], r0);\n", dlc_cpu_count(op->in[0]),
        (long long)dlc_cpu_numel(op->in[0]));
}

/* The DlrtQConv of a qconv2d or qdense, as an initializer's fields. */
static const char *qconv_fields(const Emit *e, const DlcOp *op) {
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    bool relu = dlc_attr_bool(op, DLC_A_RELU), vnni = dlc_attr_bool(op, DLC_A_VNNI);
    if (op->kind == DLC_OP_QDENSE)
        return dlc_arena_printf(e->arena, ".c = %lld, .h = 1, .w = 1, .f = %lld, .oh = 1, "
                                ".ow = 1, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1, "
                                ".groups = 1, .relu = %d, .vnni = %d, .avx2 = %d",
                                (long long)dlc_type_numel(x), (long long)y->dims[0], relu, vnni,
                                !vnni);
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD), *d = dlc_attr_pair(op, DLC_A_DILATION);
    return dlc_arena_printf(
        e->arena, ".c = %lld, .h = %lld, .w = %lld, .f = %lld, .oh = %lld, .ow = %lld, "
        ".kh = %lld, .kw = %lld, .sh = %lld, .sw = %lld, .ph = %lld, .pw = %lld, .dh = %lld, "
        ".dw = %lld, .groups = %lld, .relu = %d, .vnni = %d, .avx2 = %d",
        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
        (long long)y->dims[0], (long long)y->dims[1], (long long)y->dims[2], (long long)k[0],
        (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
        (long long)d[0], (long long)d[1], (long long)dlc_attr_int(op, DLC_A_GROUPS), relu, vnni,
        !vnni);
}

/* The bytes of op's packed weights (dlrt_qconv_s8_packed's, computed here
 * since dlc does not link libdlrt: the filters' sums in whole cache lines,
 * then for a convolution the filters in 4-channel groups). */
static int64_t packed_bytes(const DlcOp *op) {
    const DlcType *x = &op->in[0]->type;
    int64_t f = op->out[0]->type.dims[0], sums = (f * 4 + 63) / 64 * 64;
    if (op->kind == DLC_OP_QDENSE)
        return sums;
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL);
    const DlcType *y = &op->out[0]->type;
    int64_t groups = dlc_attr_int(op, DLC_A_GROUPS), c4 = (x->dims[0] / groups + 3) / 4;
    if (x->dims[1] == 1 && x->dims[2] == 1 && k[0] == 1 && k[1] == 1 && y->dims[1] == 1 &&
        y->dims[2] == 1 && groups == 1)
        return sums; /* read as a dense layer's */
    return sums + (f * c4 * k[0] * k[1] * 4 + 63) / 64 * 64;
}

/* After the weights, a requantized layer's packing holds its filters'
 * requantizations (12 bytes each), computed from the scales at the freeze. */
static int64_t requant_bytes(const DlcOp *op) {
    return dlc_attr_bool(op, DLC_A_FLOAT_OUT) ? 0 : (op->out[0]->type.dims[0] * 12 + 63) / 64 * 64;
}

int64_t dlc_cpu_quant_packed(const Emit *e, const DlcOp *op) {
    int64_t real = e->f64 ? 8 : 4;
    return (packed_bytes(op) + requant_bytes(op) + real - 1) / real;
}

/* The packing, where libdlrt's size agrees with the space reserved (else
 * the op packs at each call, as before a freeze), and the requantizations. */
void dlc_cpu_quant_pack(const Emit *e, Out *o, const DlcOp *op, const char *name) {
    bool requant = !dlc_attr_bool(op, DLC_A_FLOAT_OUT);
    put(o, "\n/* %s's weights as the VNNI path reads them (dlrt_qconv_s8_pack)%s */\n"
           "static void %s(const int8_t *restrict w, const %s *restrict ws, const %s *restrict bias,\n"
           "               const %s *restrict in_scale, %s%s%s%s *restrict wt, int me, int t) {\n"
           "    static const DlrtQConv conv = {%s};\n"
           "    (void)t;\n"
           "    if (me != 0 || (dlrt_qconv_s8_packed)(&conv) > %lld)\n"
           "        return;\n"
           "    (dlrt_qconv_s8_pack)(&conv, w, wt);\n",
        op->out[0]->name, requant ? ", then the filters' requantizations" : "", name, e->real,
        e->real, e->real, requant ? "const " : "", requant ? e->real : "",
        requant ? " *restrict out_scale, " : "", e->real, qconv_fields(e, op),
        (long long)packed_bytes(op));
    if (requant)
        put(o, "    DlrtRequant *rq = (DlrtRequant *)(void *)((char *)wt + %lld);\n"
               "    for (int64_t f = 0; f < %lld; f++)\n"
               "        (dlrt_requant_init)((double)in_scale[0] * (double)ws[f], (double)bias[f], (double)out_scale[0], &rq[f]);\n",
            (long long)packed_bytes(op), (long long)op->out[0]->type.dims[0]);
    else
        put(o, "    (void)ws, (void)bias, (void)in_scale;\n");
    put(o, "}\n");
}

/* (x, @weight, @weight_scale, @bias, @input_scale[, @output_scale]): the
 * scratch holds the requantizations (or, for float_out, the int32 sums of
 * the whole batch), then the kernel's own */
static void put_qlayer(Emit *e, Out *o, const DlcOp *op) {
    const char *fields = qconv_fields(e, op);
    bool float_out = dlc_attr_bool(op, DLC_A_FLOAT_OUT);
    int64_t f = op->out[0]->type.dims[0], per = dlc_type_numel(&op->out[0]->type);
    /* the first part: the requantizations, or the sums */
    const char *head = float_out ? dlc_arena_printf(e->arena, "max_batch * %lld * 4", (long long)per)
                                 : dlc_arena_printf(e->arena, "%lld", (long long)(f * 12));
    e->scratch = dlc_arena_printf(
        e->arena,
        "    int64_t w = (int64_t)((((size_t)(%s) + 63) / 64 * 64 + "
        "(dlrt_qconv_s8_work)(&(DlrtQConv){%s}, threads)) / sizeof(%s)) + 1;\n",
        head, fields, e->real);
    put(o, "    static const DlrtQConv conv = {%s};\n", fields);
    put(o, "    enum { F = %lld, PER = %lld };\n", (long long)f, (long long)(per / f));
    /* a multiply-add of int8 is a quarter of an f32 one's work (64 to a
       vpdpbusd, 16 to an FMA): LeNet-5's layers run on one worker */
    put(o, "    int t = (dlrt_workers)(threads, n * F, n * %lld / 4);\n",
        (long long)(dlc_type_numel(&op->in[1]->type) * (per / f)));
    put(o, "    char *scratch = (char *)work;\n");
    put(o, "    const void *pk = packed && (dlrt_qconv_s8_packed)(&conv) <= %lld ? (const void *)packed : NULL;\n",
        (long long)packed_bytes(op));
    if (float_out) {
        put(o, "    int32_t *acc = (int32_t *)scratch;\n"
               "    (dlrt_qconv_s8)(&conv, n, a0, a1, NULL, NULL, acc, pk, scratch + ((size_t)n * F * PER * 4 + 63) / 64 * 64, t);\n"
               "    for (int64_t s = 0; s < n; s++)\n"
               "        for (int64_t f = 0; f < F; f++) {\n"
               "            double scale = (double)a4[0] * (double)a2[f];\n"
               "            for (int64_t p = 0; p < PER; p++) {\n"
               "                double v = (double)acc[(s * F + f) * PER + p] * scale + (double)a3[f];\n"
               "                r0[(s * F + f) * PER + p] = (%s)(%sv);\n"
               "            }\n"
               "        }\n",
            e->real, dlc_attr_bool(op, DLC_A_RELU) ? "v < 0 ? 0 : " : "");
        return;
    }
    /* the requantizations: packed with the weights at the freeze, or now */
    put(o, "    const DlrtRequant *rq = pk ? (const DlrtRequant *)(const void *)((const char *)pk + %lld) : NULL;\n"
           "    if (!rq) {\n"
           "        DlrtRequant *now = (DlrtRequant *)(void *)scratch;\n"
           "        for (int64_t f = 0; f < F; f++)\n"
           "            (dlrt_requant_init)((double)a4[0] * (double)a2[f], (double)a3[f], (double)a5[0], &now[f]);\n"
           "        rq = now;\n"
           "    }\n"
           "    (dlrt_qconv_s8)(&conv, n, a0, a1, rq, r0, NULL, pk, scratch + (F * sizeof *rq + 63) / 64 * 64, t);\n",
        (long long)packed_bytes(op));
}

void dlc_cpu_emit_qconv2d(Emit *e, Out *o, const DlcOp *op) { put_qlayer(e, o, op); }

void dlc_cpu_emit_qdense(Emit *e, Out *o, const DlcOp *op) { put_qlayer(e, o, op); }

/* (a, b, @a_scale, @b_scale, @output_scale) */
void dlc_cpu_emit_qadd(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put(o, "    DlrtQAdd r;\n"
           "    (dlrt_qadd_init)((double)a2[0], (double)a3[0], (double)a4[0], &r);\n"
           "    (dlrt_qadd_s8)(n * %lld, a0, a1, &r, %s, r0);\n",
        (long long)dlc_type_numel(&op->out[0]->type),
        dlc_attr_bool(op, DLC_A_RELU) ? "true" : "false");
}

/* (x1, ..., xk, @scale_1, ..., @scale_k, @output_scale): each operand's rows
 * into the result's, requantized to its scale (copied where the scales are
 * equal) */
void dlc_cpu_emit_qconcat(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const DlcType *y = &op->out[0]->type;
    int k = op->nin - op->nparams;
    int64_t before, after, offset = 0;
    int axis = dlc_cpu_axis(op, y, &before, &after);
    int64_t row_y = y->dims[axis] * after;
    put(o, "    DlrtRequant rq;\n");
    for (int i = 0; i < k; i++) {
        int64_t row = op->in[i]->type.dims[axis] * after;
        put(o, "    (dlrt_requant_init)((double)a%d[0], 0, (double)a%d[0], &rq);\n"
               "    (dlrt_requantize_rows_s8)(n * %lld, %lld, a%d, &rq, r0 + %lld, %lld);\n",
            k + i, 2 * k, (long long)before, (long long)row, i, (long long)offset,
            (long long)row_y);
        offset += row;
    }
}

/* (x, @input_scale, @output_scale): the mean's 1 / (H W) in the multiplier */
void dlc_cpu_emit_qglobalavgpool(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    const int64_t *d = op->in[0]->type.dims;
    put(o, "    DlrtRequant rq;\n"
           "    (dlrt_requant_init)((double)a1[0] / %lld, 0, (double)a2[0], &rq);\n"
           "    (dlrt_qglobalavgpool_s8)(n * %lld, %lld, a0, &rq, r0);\n",
        (long long)(d[1] * d[2]), (long long)d[0], (long long)(d[1] * d[2]));
}
