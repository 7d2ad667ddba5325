/* emit_quant.c — the GPU kernels of int8 inference (dlc --quantize=int8,
 * docs/quantization.md): quantize, dequantize, qconv2d and qdense, the
 * joins between the layers (qadd, qconcat, qglobalavgpool), and the byte
 * copy that flatten and reshape of an int8 tensor are (emit_pool.c has
 * int8 max pooling beside the f32 one).
 *
 * They compute what the CPU's kernels (runtime/kernels/int8.c,
 * int8_conv.c) compute, bit for bit where the arithmetic is integer:
 *   - quantize: x / s in f32 (div.rn), rint (half to even), NaN to 0,
 *     clamped to -128..127; dequantize: q * s in f32;
 *   - qconv2d, qdense: a thread per result, its int32 sum four products
 *     at a time with dp4a.s32.s32 (signed by signed bytes: no bias of 128
 *     as the CPU's VNNI path needs), which is exact in any order
 *     (|sum| < 2^31), so the sums are the CPU's;
 *   - the requantization, dlrt_requant_init's and dlrt_requantize's: a
 *     small kernel first computes each filter's int32 bias, multiplier and
 *     shift from the scales in f64 (div.rn, rint, frexp from the exponent
 *     bits: each step IEEE-exact, as the host's libm) into the scratch
 *     memory, then each result is (acc + bias) mult / 2^shift in int64,
 *     rounded half to even, clamped to -128 (0 with relu) .. 127;
 *   - float_out=true: acc (s_x s_w[f]) + bias in f64, mul.rn then add.rn
 *     (never fused: the CPU's C is built with -std=c11, no contraction),
 *     the ReLU, rounded to f32.
 * dp4a needs sm_61 or later (kernels.c refuses older architectures). */
#include <stdio.h>

#include "emit.h"

/* dp4a as inline PTX: LLVM 16 has no intrinsic for it (llvm.nvvm.idp4a
 * came later).  tests/gpu/Inputs/emu/ll_to_host.py maps this exact string
 * to the emulator's emu_dp4a. */
#define DP4A_PTX "dp4a.s32.s32 $0, $1, $2, $3;"

static LLVMTypeRef i8_type(Kb *kb) { return LLVMInt8TypeInContext(kb->c); }
static LLVMTypeRef f64_type(Kb *kb) { return LLVMDoubleTypeInContext(kb->c); }
static LLVMValueRef i64c(Kb *kb, int64_t v) { return LLVMConstInt(kb->i64, (unsigned long long)v, 1); }

/* Byte i of p (an int8 tensor), as an i8. */
static LLVMValueRef load_s8(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(kb->b, i8_type(kb), p, &i, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(kb->b, i8_type(kb), at, "");
    LLVMSetAlignment(v, 1);
    return v;
}

static void store_s8(Kb *kb, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) {
    LLVMValueRef at = LLVMBuildInBoundsGEP2(kb->b, i8_type(kb), p, &i, 1, "");
    LLVMSetAlignment(LLVMBuildStore(kb->b, v, at), 1);
}

/* acc + the sum of the four products of a's and b's signed bytes. */
static LLVMValueRef dp4a(Kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
    LLVMTypeRef types[3] = {kb->i32, kb->i32, kb->i32};
    LLVMTypeRef type = LLVMFunctionType(kb->i32, types, 3, 0);
    LLVMValueRef asm_ = LLVMGetInlineAsm(type, (char *)DP4A_PTX, sizeof DP4A_PTX - 1, (char *)"=r,r,r,r", 8,
                                         0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef args[3] = {a, b, acc};
    return LLVMBuildCall2(kb->b, type, asm_, args, 3, "");
}

/* Byte v (i8) at byte `lane` of an i32. */
static LLVMValueRef lane(Kb *kb, LLVMValueRef v, int lane) {
    LLVMValueRef z = LLVMBuildZExt(kb->b, v, kb->i32, "");
    return lane ? LLVMBuildShl(kb->b, z, kb_int(kb, 8 * lane), "") : z;
}

/* ---- quantize, dequantize ------------------------------------------------------ */

/* (x, @scale) -> i8: q = clamp(rint(x / s)), NaN to 0, as dlrt_quantize_s8. */
void nv_emit_quantize(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    nv_start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    LLVMValueRef i = nv_begin_map(&b, nv_per_n(y), nv_fixed(y));
    LLVMValueRef q = kb_fdiv(kb, kb_load(kb, b.p[0], i), kb_load(kb, b.p[1], kb_int(kb, 0)));
    LLVMValueRef t = kb_call(kb, "llvm.rint.f32", kb->f32, &q, 1);
    LLVMValueRef hi = kb_float(kb, 127), lo = kb_float(kb, -128);
    t = kb_select(kb, LLVMBuildFCmp(kb->b, LLVMRealOGE, t, hi, ""), hi,
                  kb_select(kb, LLVMBuildFCmp(kb->b, LLVMRealOLE, t, lo, ""), lo, t));
    t = kb_select(kb, kb_isnan(kb, t), kb_float(kb, 0), t);
    store_s8(kb, b.p[ns - 1], i, LLVMBuildFPToSI(kb->b, t, i8_type(kb), ""));
    nv_end_map(&b);
}

/* (q, @scale) -> f32: q * s, as dlrt_dequantize_s8. */
void nv_emit_dequantize(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    nv_start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    LLVMValueRef i = nv_begin_map(&b, nv_per_n(y), nv_fixed(y));
    LLVMValueRef q = LLVMBuildSIToFP(kb->b, load_s8(kb, b.p[0], i), kb->f32, "");
    kb_store(kb, b.p[ns - 1], i, kb_fmul(kb, q, kb_load(kb, b.p[1], kb_int(kb, 0))));
    nv_end_map(&b);
}

/* flatten and reshape of an int8 tensor: its bytes (emit_elementwise.c's
 * copies move floats). */
void nv_copy_s8(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[2] = {0, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    const DlcValue *y = op->out[0];
    LLVMValueRef i = nv_begin_map(&b, nv_per_n(y), nv_fixed(y));
    store_s8(kb, b.p[1], i, load_s8(kb, b.p[0], i));
    nv_end_map(&b);
}

/* ---- qconv2d, qdense ---------------------------------------------------------- */

/* A layer's geometry; a dense layer is a 1x1 convolution of [in,1,1]. */
typedef struct QLayer {
    int64_t c, h, w, f, oh, ow;     /* the operand's and the result's shapes */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    int64_t taps;                   /* a filter's weights: c / groups * kh * kw */
    bool relu, float_out;
} QLayer;

static QLayer qlayer_of(const DlcOp *op) {
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    QLayer q = {.relu = dlc_attr_bool(op, DLC_A_RELU), .float_out = dlc_attr_bool(op, DLC_A_FLOAT_OUT)};
    if (op->kind == DLC_OP_QDENSE) {
        q.c = dlc_type_numel(x), q.h = q.w = 1, q.f = y->dims[0], q.oh = q.ow = 1;
        q.kh = q.kw = q.sh = q.sw = q.dh = q.dw = q.groups = 1;
    } else {
        const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                      *p = dlc_attr_pair(op, DLC_A_PAD), *d = dlc_attr_pair(op, DLC_A_DILATION);
        q.c = x->dims[0], q.h = x->dims[1], q.w = x->dims[2];
        q.f = y->dims[0], q.oh = y->dims[1], q.ow = y->dims[2];
        q.kh = k[0], q.kw = k[1], q.sh = s[0], q.sw = s[1], q.ph = p[0], q.pw = p[1];
        q.dh = d[0], q.dw = d[1], q.groups = dlc_attr_int(op, DLC_A_GROUPS);
    }
    q.taps = q.c / q.groups * q.kh * q.kw;
    return q;
}

/* A scale parameter (f32[], pointer p) as a double. */
static LLVMValueRef scale_f64(Kb *kb, LLVMValueRef p) {
    return LLVMBuildFPExt(kb->b, kb_load(kb, p, kb_int(kb, 0)), f64_type(kb), "");
}

/* frexp's exponent of x, a positive normal double, from its bits: the
 * exponent field less 1022 (for positive finite f32 scales, their ratios
 * are normal doubles: 1e-128 < x < 1e122). */
static LLVMValueRef frexp_exp(Kb *kb, LLVMValueRef x) {
    LLVMBuilderRef B = kb->b;
    LLVMValueRef bits = LLVMBuildBitCast(B, x, kb->i64, "");
    LLVMValueRef field = LLVMBuildAnd(B, LLVMBuildLShr(B, bits, i64c(kb, 52), ""), i64c(kb, 0x7ff), "");
    return LLVMBuildSub(B, LLVMBuildTrunc(B, field, kb->i32, ""), kb_int(kb, 1022), "");
}

/* 2^k as a double, k (i32) in 0..62: its bits. */
static LLVMValueRef pow2(Kb *kb, LLVMValueRef k) {
    LLVMValueRef e = LLVMBuildZExt(kb->b, kb_addi(kb, k, 1023), kb->i64, "");
    return LLVMBuildBitCast(kb->b, LLVMBuildShl(kb->b, e, i64c(kb, 52), ""), f64_type(kb), "");
}

/* A multiplier m (a positive normal double) as mult / 2^shift, as
 * dlrt_requant_init makes it: mult = rint(mant 2^31) of frexp's mantissa
 * (2^30 and one more in the exponent where that rounds up to 2^31), shift
 * = 31 - exponent; below 2^-32 (shift > 62) 0 and 0, 2^31 or more (shift
 * < 0) INT32_MAX and 0. */
static void requant_multiplier(Kb *kb, LLVMValueRef m, LLVMValueRef *mult, LLVMValueRef *shift) {
    LLVMBuilderRef B = kb->b;
    LLVMTypeRef f64 = f64_type(kb);
    LLVMValueRef bits = LLVMBuildBitCast(B, m, kb->i64, "");
    LLVMValueRef e = frexp_exp(kb, m);
    LLVMValueRef mant_bits = LLVMBuildOr(B, LLVMBuildAnd(B, bits, i64c(kb, ~(INT64_C(0x7ff) << 52)), ""),
                                         i64c(kb, INT64_C(1022) << 52), "");
    LLVMValueRef mant = LLVMBuildBitCast(B, mant_bits, f64, ""); /* 0.5 <= mant < 1 */
    LLVMValueRef scaled = LLVMBuildFMul(B, mant, LLVMConstReal(f64, 2147483648.0), "");
    LLVMValueRef mi = LLVMBuildFPToSI(B, kb_call(kb, "llvm.rint.f64", f64, &scaled, 1), kb->i64, "");
    LLVMValueRef up = LLVMBuildICmp(B, LLVMIntEQ, mi, i64c(kb, INT64_C(1) << 31), ""); /* rounded up to 1.0 */
    mi = kb_select(kb, up, i64c(kb, INT64_C(1) << 30), mi);
    e = kb_select(kb, up, kb_addi(kb, e, 1), e);
    LLVMValueRef s = kb_sub(kb, kb_int(kb, 31), e);
    LLVMValueRef tiny = kb_lt(kb, kb_int(kb, 62), s), huge = kb_lt(kb, s, kb_int(kb, 0));
    LLVMValueRef mt = LLVMBuildTrunc(B, mi, kb->i32, "");
    *mult = kb_select(kb, tiny, kb_int(kb, 0), kb_select(kb, huge, kb_int(kb, INT32_MAX), mt));
    *shift = kb_select(kb, kb_or(kb, tiny, huge), kb_int(kb, 0), s);
}

/* The requantization of filter f (a thread each), as dlrt_requant_init:
 * (bias, mult, shift) as three i32 at 3f of the scratch memory.
 * Operands: (@input_scale, @weight_scale, @bias, @output_scale). */
static void requant_kernel(NvKernels *nk, const DlcOp *op, const char *tag, const QLayer *q) {
    Build b;
    int slots[5] = {4, 2, 3, 5, NV_WORKSPACE};
    nv_start(&b, nk, op, tag, "requant", slots, 5, NULL, 0, MAP_THREADS);
    b.l->workspace = 3 * q->f;
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    LLVMTypeRef f64 = f64_type(kb);
    LLVMValueRef f = nv_begin_map(&b, 0, q->f);
    LLVMValueRef sx = scale_f64(kb, b.p[0]);
    LLVMValueRef sw = LLVMBuildFPExt(B, kb_load(kb, b.p[1], f), f64, "");
    LLVMValueRef bias = LLVMBuildFPExt(B, kb_load(kb, b.p[2], f), f64, "");
    LLVMValueRef sy = scale_f64(kb, b.p[3]);
    LLVMValueRef acc_scale = LLVMBuildFMul(B, sx, sw, "");
    /* the bias in units of the sums, rounded half to even, within +-2^30 */
    LLVMValueRef r = LLVMBuildFDiv(B, bias, acc_scale, "");
    r = kb_call(kb, "llvm.rint.f64", f64, &r, 1);
    LLVMValueRef lim = LLVMConstReal(f64, 1 << 30), nlim = LLVMConstReal(f64, -(1 << 30));
    r = kb_select(kb, LLVMBuildFCmp(B, LLVMRealOGT, r, lim, ""), lim,
                  kb_select(kb, LLVMBuildFCmp(B, LLVMRealOLT, r, nlim, ""), nlim, r));
    LLVMValueRef ibias = LLVMBuildFPToSI(B, r, kb->i32, "");
    LLVMValueRef mult, shift;
    requant_multiplier(kb, LLVMBuildFDiv(B, acc_scale, sy, ""), &mult, &shift);
    LLVMValueRef at = kb_muli(kb, f, 3);
    LLVMValueRef out = b.p[4];
    LLVMValueRef vals[3] = {ibias, mult, shift};
    for (int k = 0; k < 3; k++) {
        LLVMValueRef idx = kb_addi(kb, at, k);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(B, kb->i32, out, &idx, 1, "");
        LLVMSetAlignment(LLVMBuildStore(B, vals[k], p), 4);
    }
    nv_end_map(&b);
}

/* p (i64) / 2^shift (i32, 0..62) rounded half to even, clamped to
 * -128 (0 with relu) .. 127, as an i8: round_shift and clamp_s8 of
 * runtime/kernels/int8.c. */
static LLVMValueRef round_shift_s8(Kb *kb, LLVMValueRef p, LLVMValueRef shift, bool relu) {
    LLVMBuilderRef B = kb->b;
    /* shift 0 takes p as it is; the rest computed with a shift of at least 1 */
    LLVMValueRef s = LLVMBuildZExt(B, kb_max(kb, shift, kb_int(kb, 1)), kb->i64, "");
    LLVMValueRef q = LLVMBuildAShr(B, p, s, ""); /* floor */
    LLVMValueRef rem = LLVMBuildSub(B, p, LLVMBuildShl(B, q, s, ""), "");
    LLVMValueRef half = LLVMBuildShl(B, i64c(kb, 1), LLVMBuildSub(B, s, i64c(kb, 1), ""), "");
    LLVMValueRef odd = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, q, i64c(kb, 1), ""), i64c(kb, 0), "");
    LLVMValueRef inc = kb_or(kb, LLVMBuildICmp(B, LLVMIntSGT, rem, half, ""),
                             kb_and(kb, LLVMBuildICmp(B, LLVMIntEQ, rem, half, ""), odd));
    q = LLVMBuildAdd(B, q, LLVMBuildZExt(B, inc, kb->i64, ""), "");
    q = kb_select(kb, LLVMBuildICmp(B, LLVMIntSGT, shift, kb_int(kb, 0), ""), q, p);
    LLVMValueRef lo = i64c(kb, relu ? 0 : -128), hi = i64c(kb, 127);
    q = kb_select(kb, LLVMBuildICmp(B, LLVMIntSLT, q, lo, ""), lo,
                  kb_select(kb, LLVMBuildICmp(B, LLVMIntSGT, q, hi, ""), hi, q));
    return LLVMBuildTrunc(B, q, i8_type(kb), "");
}

/* (acc + bias) mult / 2^shift rounded half to even, clamped: dlrt_requantize. */
static LLVMValueRef requantize(Kb *kb, LLVMValueRef acc, LLVMValueRef bias, LLVMValueRef mult,
                               LLVMValueRef shift, bool relu) {
    LLVMBuilderRef B = kb->b;
    LLVMValueRef p = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildSExt(B, acc, kb->i64, ""),
                                                  LLVMBuildSExt(B, bias, kb->i64, ""), ""),
                                  LLVMBuildSExt(B, mult, kb->i64, ""), "");
    return round_shift_s8(kb, p, shift, relu);
}

/* acc += the products of `count` bytes of x and w, at x[xoff + j xstep]
 * and w[woff + j wstep] for j < count, four at a time by dp4a (the last
 * four padded with zeros). */
static void dot_bytes(Kb *kb, LLVMValueRef acc, LLVMValueRef x, LLVMValueRef xoff, int64_t xstep,
                      LLVMValueRef w, LLVMValueRef woff, int64_t wstep, int64_t count) {
    LLVMBuilderRef B = kb->b;
    LLVMValueRef k4 = kb_for(kb, kb_int(kb, 0), kb_int(kb, (count + 3) / 4), kb_int(kb, 1));
    LLVMValueRef xw = kb_int(kb, 0), ww = kb_int(kb, 0), zero8 = LLVMConstInt(i8_type(kb), 0, 0);
    for (int j = 0; j < 4; j++) {
        LLVMValueRef k = kb_addi(kb, kb_muli(kb, kb_get(kb, k4), 4), j);
        LLVMValueRef valid = count % 4 ? kb_lt(kb, k, kb_int(kb, count)) : NULL;
        if (valid) /* the padding reads the last byte, then counts 0 */
            k = kb_min(kb, k, kb_int(kb, count - 1));
        LLVMValueRef xv = load_s8(kb, x, kb_add(kb, xoff, kb_muli(kb, k, xstep)));
        LLVMValueRef wv = load_s8(kb, w, kb_add(kb, woff, kb_muli(kb, k, wstep)));
        if (valid) {
            xv = kb_select(kb, valid, xv, zero8);
            wv = kb_select(kb, valid, wv, zero8);
        }
        xw = LLVMBuildOr(B, xw, lane(kb, xv, j), "");
        ww = LLVMBuildOr(B, ww, lane(kb, wv, j), "");
    }
    kb_set(kb, acc, dp4a(kb, xw, ww, kb_get(kb, acc)));
    kb_endfor(kb);
}

/* A thread per result: its int32 sum by dp4a, then the requantization or
 * the f32 epilogue.  A dense layer whose rows are whole words reads them
 * as words; otherwise four bytes are gathered per dp4a: a convolution's
 * four channels at one tap, over the taps inside the image (the padding
 * adds nothing), so no index is divided in the loops.  The sums' order
 * differs from the CPU's, their values do not (exact in int32).
 * Operands: (x, @weight, @weight_scale, @bias, @input_scale[, @output_scale]). */
static void qlayer(NvKernels *nk, const DlcOp *op, const char *tag) {
    QLayer q = qlayer_of(op);
    if (!q.float_out)
        requant_kernel(nk, op, tag, &q);
    Build b;
    int rq[4] = {0, 1, NV_WORKSPACE, NV_RESULT}, fo[6] = {0, 1, 2, 3, 4, NV_RESULT};
    if (q.float_out)
        nv_start(&b, nk, op, tag, "", fo, 6, NULL, 0, MAP_THREADS);
    else
        nv_start(&b, nk, op, tag, "", rq, 4, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    int64_t plane = q.oh * q.ow, cg = q.c / q.groups, fg = q.f / q.groups;
    LLVMValueRef i = nv_begin_map(&b, q.f * plane, 0);
    LLVMValueRef s = kb_divi(kb, i, q.f * plane), r = kb_remi(kb, i, q.f * plane);
    LLVMValueRef f = kb_divi(kb, r, plane), pix = kb_remi(kb, r, plane);
    LLVMValueRef acc = kb_var(kb, kb->i32, kb_int(kb, 0));
    if (op->kind == DLC_OP_QDENSE && q.taps % 4 == 0) {
        LLVMValueRef xw = kb_muli(kb, s, q.taps / 4), ww = kb_muli(kb, f, q.taps / 4);
        LLVMValueRef k = kb_for(kb, kb_int(kb, 0), kb_int(kb, q.taps / 4), kb_int(kb, 1));
        LLVMValueRef a = nv_load_i32(kb, b.p[0], kb_add(kb, xw, kb_get(kb, k)));
        LLVMValueRef w = nv_load_i32(kb, b.p[1], kb_add(kb, ww, kb_get(kb, k)));
        kb_set(kb, acc, dp4a(kb, a, w, kb_get(kb, acc)));
        kb_endfor(kb);
    } else if (op->kind == DLC_OP_QDENSE) {
        dot_bytes(kb, acc, b.p[0], kb_muli(kb, s, q.taps), 1, b.p[1], kb_muli(kb, f, q.taps), 1, q.taps);
    } else {
        LLVMValueRef oy = kb_divi(kb, pix, q.ow), ox = kb_remi(kb, pix, q.ow);
        /* the sample's planes of the filter's group, and the filter's weights */
        LLVMValueRef xbase = kb_add(kb, kb_muli(kb, s, q.c * q.h * q.w),
                                    kb_muli(kb, kb_divi(kb, f, fg), cg * q.h * q.w));
        LLVMValueRef wbase = kb_muli(kb, f, q.taps);
        LLVMValueRef y0 = kb_addi(kb, kb_muli(kb, oy, q.sh), -q.ph), x0 = kb_addi(kb, kb_muli(kb, ox, q.sw), -q.pw);
        LLVMValueRef ky = kb_for(kb, kb_int(kb, 0), kb_int(kb, q.kh), kb_int(kb, 1));
        LLVMValueRef iy = kb_add(kb, y0, kb_muli(kb, kb_get(kb, ky), q.dh));
        kb_if(kb, kb_in_range(kb, iy, q.h));
        LLVMValueRef kx = kb_for(kb, kb_int(kb, 0), kb_int(kb, q.kw), kb_int(kb, 1));
        LLVMValueRef ix = kb_add(kb, x0, kb_muli(kb, kb_get(kb, kx), q.dw));
        kb_if(kb, kb_in_range(kb, ix, q.w));
        LLVMValueRef xoff = kb_add(kb, xbase, kb_add(kb, kb_muli(kb, iy, q.w), ix));
        LLVMValueRef woff = kb_add(kb, wbase, kb_add(kb, kb_muli(kb, kb_get(kb, ky), q.kw), kb_get(kb, kx)));
        dot_bytes(kb, acc, b.p[0], xoff, q.h * q.w, b.p[1], woff, q.kh * q.kw, cg);
        kb_endif(kb);
        kb_endfor(kb);
        kb_endif(kb);
        kb_endfor(kb);
    }
    LLVMValueRef sum = kb_get(kb, acc);
    if (q.float_out) {
        LLVMTypeRef f64 = f64_type(kb);
        LLVMValueRef scale = LLVMBuildFMul(B, LLVMBuildFPExt(B, kb_load(kb, b.p[4], kb_int(kb, 0)), f64, ""),
                                           LLVMBuildFPExt(B, kb_load(kb, b.p[2], f), f64, ""), "");
        LLVMValueRef v = LLVMBuildFAdd(B, LLVMBuildFMul(B, LLVMBuildSIToFP(B, sum, f64, ""), scale, ""),
                                       LLVMBuildFPExt(B, kb_load(kb, b.p[3], f), f64, ""), "");
        if (q.relu)
            v = kb_select(kb, LLVMBuildFCmp(B, LLVMRealOLT, v, LLVMConstReal(f64, 0), ""),
                          LLVMConstReal(f64, 0), v);
        kb_store(kb, b.p[5], i, LLVMBuildFPTrunc(B, v, kb->f32, ""));
    } else {
        LLVMValueRef at = kb_muli(kb, f, 3);
        LLVMValueRef bias = nv_load_i32(kb, b.p[2], at), mult = nv_load_i32(kb, b.p[2], kb_addi(kb, at, 1));
        LLVMValueRef shift = nv_load_i32(kb, b.p[2], kb_addi(kb, at, 2));
        store_s8(kb, b.p[3], i, requantize(kb, sum, bias, mult, shift, q.relu));
    }
    nv_end_map(&b);
}

void nv_emit_qconv2d(NvKernels *nk, const DlcOp *op, const char *tag) { qlayer(nk, op, tag); }

void nv_emit_qdense(NvKernels *nk, const DlcOp *op, const char *tag) { qlayer(nk, op, tag); }

/* ---- int8 between the layers: qadd, qconcat, qglobalavgpool ------------------- */

/* (a, b, @a_scale, @b_scale, @output_scale) -> y: a thread per element.
 * Each thread makes dlrt_qadd_init's multipliers itself from the three
 * scales (a few f64 operations, each IEEE-exact as the host's): the shift
 * from frexp of the larger ratio, one less where that ratio rounds to
 * 2^31, each multiplier rint(ratio 2^shift), saturated.  The sum
 * a mult_a + b mult_b in int64 is then rounded by 2^shift half to even,
 * the integers the CPU's doubles give. */
void nv_emit_qadd(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    nv_start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    LLVMTypeRef f64 = f64_type(kb);
    const DlcValue *y = op->out[0];
    LLVMValueRef i = nv_begin_map(&b, nv_per_n(y), nv_fixed(y));
    LLVMValueRef sy = scale_f64(kb, b.p[4]);
    LLVMValueRef ma = LLVMBuildFDiv(B, scale_f64(kb, b.p[2]), sy, ""), mb = LLVMBuildFDiv(B, scale_f64(kb, b.p[3]), sy, "");
    LLVMValueRef top = kb_select(kb, LLVMBuildFCmp(B, LLVMRealOGT, ma, mb, ""), ma, mb);
    LLVMValueRef shift = kb_sub(kb, kb_int(kb, 31), frexp_exp(kb, top));
    LLVMValueRef in62 = kb_and(kb, kb_le(kb, kb_int(kb, 0), shift), kb_le(kb, shift, kb_int(kb, 62)));
    LLVMValueRef s62 = kb_max(kb, kb_min(kb, shift, kb_int(kb, 62)), kb_int(kb, 0));
    LLVMValueRef t = LLVMBuildFMul(B, top, pow2(kb, s62), "");
    t = kb_call(kb, "llvm.rint.f64", f64, &t, 1);
    LLVMValueRef over = kb_and(kb, in62, LLVMBuildFCmp(B, LLVMRealOGE, t, LLVMConstReal(f64, 2147483648.0), ""));
    shift = kb_sub(kb, shift, LLVMBuildZExt(B, over, kb->i32, ""));
    LLVMValueRef tiny = kb_lt(kb, kb_int(kb, 62), shift); /* both below 2^-32: 0 */
    shift = kb_max(kb, kb_min(kb, shift, kb_int(kb, 62)), kb_int(kb, 0));
    LLVMValueRef scale = pow2(kb, shift), mult[2], ratio[2] = {ma, mb};
    for (int k = 0; k < 2; k++) {
        LLVMValueRef v = LLVMBuildFMul(B, ratio[k], scale, "");
        v = kb_call(kb, "llvm.rint.f64", f64, &v, 1);
        LLVMValueRef most = LLVMConstReal(f64, 2147483647.0);
        v = kb_select(kb, LLVMBuildFCmp(B, LLVMRealOGT, v, most, ""), most, v);
        mult[k] = kb_select(kb, tiny, i64c(kb, 0), LLVMBuildFPToSI(B, v, kb->i64, ""));
    }
    shift = kb_select(kb, tiny, kb_int(kb, 0), shift);
    LLVMValueRef p = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildSExt(B, load_s8(kb, b.p[0], i), kb->i64, ""), mult[0], ""),
                                  LLVMBuildMul(B, LLVMBuildSExt(B, load_s8(kb, b.p[1], i), kb->i64, ""), mult[1], ""), "");
    store_s8(kb, b.p[5], i, round_shift_s8(kb, p, shift, dlc_attr_bool(op, DLC_A_RELU)));
    nv_end_map(&b);
}

/* (x1, ..., xk, @scale_1, ..., @scale_k, @output_scale) -> y: a kernel per
 * operand (TAG_partI), a thread per element of it, requantized from its
 * scale to the result's as dlrt_requantize_rows_s8 (dlrt_requant_init's
 * multiplier of scale_i / scale_y, no bias; equal scales give a
 * multiplier of exactly 1, so the bytes as they are, as the CPU's copy). */
void nv_emit_qconcat(NvKernels *nk, const DlcOp *op, const char *tag) {
    const DlcValue *y = op->out[0];
    int k = op->nin - op->nparams;
    int axis = nv_norm_axis(dlc_attr_int(op, DLC_A_AXIS), y->type.rank);
    int64_t before, after, offset = 0;
    nv_around_axis(&y->type, axis, &before, &after);
    int64_t row_y = y->type.dims[axis] * after;
    for (int i = 0; i < k; i++) {
        int64_t row = op->in[i]->type.dims[axis] * after;
        char suffix[16];
        snprintf(suffix, sizeof suffix, "part%d", i);
        Build b;
        int slots[4] = {i, k + i, 2 * k, NV_RESULT};
        nv_start(&b, nk, op, tag, suffix, slots, 4, NULL, 0, MAP_THREADS);
        Kb *kb = b.kb;
        LLVMValueRef e = nv_begin_map(&b, before * row, 0);
        LLVMValueRef mult, shift;
        requant_multiplier(kb, LLVMBuildFDiv(kb->b, scale_f64(kb, b.p[1]), scale_f64(kb, b.p[2]), ""), &mult, &shift);
        LLVMValueRef v = requantize(kb, LLVMBuildSExt(kb->b, load_s8(kb, b.p[0], e), kb->i32, ""), kb_int(kb, 0),
                                    mult, shift, false);
        LLVMValueRef r = kb_divi(kb, e, row), j = kb_remi(kb, e, row);
        store_s8(kb, b.p[3], kb_add(kb, kb_muli(kb, r, row_y), kb_addi(kb, j, offset)), v);
        nv_end_map(&b);
        offset += row;
    }
}

/* (x, @input_scale, @output_scale) -> y [C]: a thread per plane, its sum
 * in int32, requantized by dlrt_requant_init(scale_x / (H W), 0, scale_y)'s
 * multiplier (the mean's division in it), as dlrt_qglobalavgpool_s8. */
void nv_emit_qglobalavgpool(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[4] = {0, 1, 2, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 4, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMBuilderRef B = kb->b;
    const int64_t *d = op->in[0]->type.dims;
    int64_t hw = d[1] * d[2];
    LLVMValueRef plane = nv_begin_map(&b, d[0], 0);
    LLVMValueRef acc_scale = LLVMBuildFDiv(B, scale_f64(kb, b.p[1]), LLVMConstReal(f64_type(kb), (double)hw), "");
    LLVMValueRef mult, shift;
    requant_multiplier(kb, LLVMBuildFDiv(B, acc_scale, scale_f64(kb, b.p[2]), ""), &mult, &shift);
    LLVMValueRef sum = kb_var(kb, kb->i32, kb_int(kb, 0)), base = kb_muli(kb, plane, hw);
    LLVMValueRef j = kb_for(kb, kb_int(kb, 0), kb_int(kb, hw), kb_int(kb, 1));
    kb_set(kb, sum, kb_add(kb, kb_get(kb, sum),
                           LLVMBuildSExt(B, load_s8(kb, b.p[0], kb_add(kb, base, kb_get(kb, j))), kb->i32, "")));
    kb_endfor(kb);
    store_s8(kb, b.p[3], plane, requantize(kb, kb_get(kb, sum), kb_int(kb, 0), mult, shift, false));
    nv_end_map(&b);
}

/* The ops whose kernels take int8 tensors: this file's, and max pooling,
 * flatten and reshape, which dispatch on the element type to theirs. */
bool nv_int8_ready(const DlcOp *op) {
    switch (op->kind) {
    case DLC_OP_QUANTIZE: case DLC_OP_DEQUANTIZE: case DLC_OP_QCONV2D: case DLC_OP_QDENSE:
    case DLC_OP_QADD: case DLC_OP_QCONCAT: case DLC_OP_QGLOBALAVGPOOL:
    case DLC_OP_MAXPOOL: case DLC_OP_FLATTEN: case DLC_OP_RESHAPE:
        return true;
    default:
        return false;
    }
}
