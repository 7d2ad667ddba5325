/* kb.c — the kernel builder of kb.h, over the LLVM C API (LLVM 16). */
#include "kb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what) {
    fprintf(stderr, "dlc: internal error: nvptx kernel builder: %s\n", what);
    abort();
}

void kb_init(Kb *kb, LLVMContextRef c, LLVMModuleRef m) {
    *kb = (Kb){.c = c, .m = m};
    kb->b = LLVMCreateBuilderInContext(c);
    kb->alloca_b = LLVMCreateBuilderInContext(c);
    kb->f32 = LLVMFloatTypeInContext(c);
    kb->i32 = LLVMInt32TypeInContext(c);
    kb->i64 = LLVMInt64TypeInContext(c);
    kb->i1 = LLVMInt1TypeInContext(c);
    kb->vd = LLVMVoidTypeInContext(c);
    kb->gptr = LLVMPointerTypeInContext(c, 1);
    kb->sptr = LLVMPointerTypeInContext(c, 3);
}

void kb_dispose(Kb *kb) {
    LLVMDisposeBuilder(kb->b);
    LLVMDisposeBuilder(kb->alloca_b);
}

/* ---- kernels ---------------------------------------------------------------- */

static void annotate(Kb *kb, const char *key, int value) {
    LLVMMetadataRef md[3] = {
        LLVMValueAsMetadata(kb->fn),
        LLVMMDStringInContext2(kb->c, key, strlen(key)),
        LLVMValueAsMetadata(LLVMConstInt(kb->i32, (unsigned long long)value, 0)),
    };
    LLVMAddNamedMetadataOperand(kb->m, "nvvm.annotations",
                                LLVMMetadataAsValue(kb->c, LLVMMDNodeInContext2(kb->c, md, 3)));
}

void kb_begin(Kb *kb, const char *name, int nptrs, int nscalars, const LLVMTypeRef *scalar_types,
              int max_threads) {
    LLVMTypeRef params[64];
    if (nptrs + nscalars > 64)
        die("too many kernel parameters");
    for (int i = 0; i < nptrs; i++)
        params[i] = kb->gptr;
    for (int i = 0; i < nscalars; i++)
        params[nptrs + i] = scalar_types[i];
    LLVMTypeRef type = LLVMFunctionType(kb->vd, params, (unsigned)(nptrs + nscalars), 0);
    kb->fn = LLVMAddFunction(kb->m, name, type);
    for (int i = 0; i < nptrs; i++) /* distinct tensors, or the same one read and written */
        LLVMAddAttributeAtIndex(kb->fn, (unsigned)(i + 1),
                                LLVMCreateEnumAttribute(kb->c, LLVMGetEnumAttributeKindForName("nocapture", 9), 0));
    annotate(kb, "kernel", 1);
    if (max_threads > 0)
        annotate(kb, "maxntidx", max_threads);
    kb->entry = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "entry");
    kb->body = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "body");
    LLVMPositionBuilderAtEnd(kb->alloca_b, kb->entry);
    LLVMPositionBuilderAtEnd(kb->b, kb->body);
    kb->depth = 0;
}

void kb_min_blocks(Kb *kb, int blocks) { annotate(kb, "minctasm", blocks); }

void kb_end(Kb *kb) {
    if (kb->depth != 0)
        die("an if or a loop is still open at the end of a kernel");
    LLVMBuildRetVoid(kb->b);
    LLVMBuildBr(kb->alloca_b, kb->body);
}

LLVMValueRef kb_param(Kb *kb, int i) { return LLVMGetParam(kb->fn, (unsigned)i); }

LLVMValueRef kb_int(Kb *kb, int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX)
        die("an index constant does not fit 32 bits");
    return LLVMConstInt(kb->i32, (unsigned long long)v, 1);
}

LLVMValueRef kb_float(Kb *kb, double v) { return LLVMConstReal(kb->f32, v); }

/* ---- intrinsics ------------------------------------------------------------- */

LLVMValueRef kb_call(Kb *kb, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int n) {
    LLVMTypeRef types[12];
    for (int i = 0; i < n; i++)
        types[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef type = LLVMFunctionType(ret, types, (unsigned)n, 0);
    LLVMValueRef f = LLVMGetNamedFunction(kb->m, name);
    if (!f)
        f = LLVMAddFunction(kb->m, name, type);
    return LLVMBuildCall2(kb->b, type, f, args, (unsigned)n, "");
}

static LLVMValueRef sreg(Kb *kb, const char *reg, char axis) {
    char name[64];
    snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", reg, axis);
    return kb_call(kb, name, kb->i32, NULL, 0);
}

LLVMValueRef kb_tid(Kb *kb) { return sreg(kb, "tid", 'x'); }
LLVMValueRef kb_ctaid(Kb *kb, char axis) { return sreg(kb, "ctaid", axis); }
LLVMValueRef kb_ntid(Kb *kb) { return sreg(kb, "ntid", 'x'); }
LLVMValueRef kb_nctaid(Kb *kb, char axis) { return sreg(kb, "nctaid", axis); }
void kb_barrier(Kb *kb) { kb_call(kb, "llvm.nvvm.barrier0", kb->vd, NULL, 0); }

/* ---- variables -------------------------------------------------------------- */

LLVMValueRef kb_var(Kb *kb, LLVMTypeRef type, LLVMValueRef init) {
    LLVMValueRef v = LLVMBuildAlloca(kb->alloca_b, type, "");
    LLVMBuildStore(kb->b, init, v);
    return v;
}

LLVMValueRef kb_get(Kb *kb, LLVMValueRef var) {
    return LLVMBuildLoad2(kb->b, LLVMGetAllocatedType(var), var, "");
}

void kb_set(Kb *kb, LLVMValueRef var, LLVMValueRef value) { LLVMBuildStore(kb->b, value, var); }

/* ---- integers --------------------------------------------------------------- */

LLVMValueRef kb_add(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(kb->b, a, b, ""); }
LLVMValueRef kb_sub(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(kb->b, a, b, ""); }
LLVMValueRef kb_mul(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(kb->b, a, b, ""); }
LLVMValueRef kb_div(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSDiv(kb->b, a, b, ""); }
LLVMValueRef kb_rem(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSRem(kb->b, a, b, ""); }
LLVMValueRef kb_muli(Kb *kb, LLVMValueRef a, int64_t b) { return kb_mul(kb, a, kb_int(kb, b)); }
LLVMValueRef kb_addi(Kb *kb, LLVMValueRef a, int64_t b) { return kb_add(kb, a, kb_int(kb, b)); }
LLVMValueRef kb_divi(Kb *kb, LLVMValueRef a, int64_t b) { return kb_div(kb, a, kb_int(kb, b)); }
LLVMValueRef kb_remi(Kb *kb, LLVMValueRef a, int64_t b) { return kb_rem(kb, a, kb_int(kb, b)); }
LLVMValueRef kb_min(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return kb_select(kb, kb_lt(kb, a, b), a, b); }
LLVMValueRef kb_max(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return kb_select(kb, kb_lt(kb, a, b), b, a); }

static bool is_float(Kb *kb, LLVMValueRef a) { return LLVMTypeOf(a) == kb->f32; }

LLVMValueRef kb_lt(Kb *kb, LLVMValueRef a, LLVMValueRef b) {
    return is_float(kb, a) ? LLVMBuildFCmp(kb->b, LLVMRealOLT, a, b, "")
                           : LLVMBuildICmp(kb->b, LLVMIntSLT, a, b, "");
}
LLVMValueRef kb_le(Kb *kb, LLVMValueRef a, LLVMValueRef b) {
    return is_float(kb, a) ? LLVMBuildFCmp(kb->b, LLVMRealOLE, a, b, "")
                           : LLVMBuildICmp(kb->b, LLVMIntSLE, a, b, "");
}
LLVMValueRef kb_eq(Kb *kb, LLVMValueRef a, LLVMValueRef b) {
    return is_float(kb, a) ? LLVMBuildFCmp(kb->b, LLVMRealOEQ, a, b, "")
                           : LLVMBuildICmp(kb->b, LLVMIntEQ, a, b, "");
}
LLVMValueRef kb_and(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(kb->b, a, b, ""); }
LLVMValueRef kb_or(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildOr(kb->b, a, b, ""); }
LLVMValueRef kb_not(Kb *kb, LLVMValueRef a) { return LLVMBuildNot(kb->b, a, ""); }
LLVMValueRef kb_select(Kb *kb, LLVMValueRef cond, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(kb->b, cond, a, b, "");
}
LLVMValueRef kb_in_range(Kb *kb, LLVMValueRef a, int64_t limit) {
    /* one unsigned comparison: negative values wrap above any limit */
    return LLVMBuildICmp(kb->b, LLVMIntULT, a, kb_int(kb, limit), "");
}

/* ---- floats ----------------------------------------------------------------- */

LLVMValueRef kb_fadd(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(kb->b, a, b, ""); }
LLVMValueRef kb_fsub(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(kb->b, a, b, ""); }
LLVMValueRef kb_fmul(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(kb->b, a, b, ""); }
LLVMValueRef kb_fdiv(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(kb->b, a, b, ""); }
LLVMValueRef kb_fneg(Kb *kb, LLVMValueRef a) { return LLVMBuildFNeg(kb->b, a, ""); }
LLVMValueRef kb_fma(Kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMValueRef args[3] = {a, b, c};
    return kb_call(kb, "llvm.fma.f32", kb->f32, args, 3);
}
LLVMValueRef kb_fgt(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(kb->b, LLVMRealOGT, a, b, ""); }

/* ---- tensor cores (sm_80 and later) ---------------------------------------------- */

LLVMValueRef kb_tf32(Kb *kb, LLVMValueRef a) {
    LLVMValueRef bits = kb_call(kb, "llvm.nvvm.f2tf32.rna", kb->i32, &a, 1);
    return LLVMBuildBitCast(kb->b, bits, kb->f32, "");
}

LLVMValueRef kb_bf16x2(Kb *kb, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMValueRef args[2] = {hi, lo}; /* cvt.rn.bf16x2.f32 d, a, b puts a in d's upper half */
    LLVMValueRef bits = kb_call(kb, "llvm.nvvm.ff2bf16x2.rn", kb->i32, args, 2);
    return LLVMBuildBitCast(kb->b, bits, kb->f32, "");
}

/* One mma.sync of fragments held in f32 variables (their bits are the
   operands'), as `intrinsic` takes them: 4 of A, 2 of B, 4 of C. */
static void mma(Kb *kb, const char *intrinsic, const LLVMValueRef a[4], const LLVMValueRef b[2],
                LLVMValueRef acc[4]) {
    LLVMValueRef args[10];
    for (int i = 0; i < 4; i++)
        args[i] = LLVMBuildBitCast(kb->b, a[i], kb->i32, "");
    for (int i = 0; i < 2; i++)
        args[4 + i] = LLVMBuildBitCast(kb->b, b[i], kb->i32, "");
    for (int i = 0; i < 4; i++)
        args[6 + i] = acc[i];
    LLVMTypeRef four[4] = {kb->f32, kb->f32, kb->f32, kb->f32};
    LLVMTypeRef ret = LLVMStructTypeInContext(kb->c, four, 4, 0);
    LLVMValueRef d = kb_call(kb, intrinsic, ret, args, 10);
    for (int i = 0; i < 4; i++)
        acc[i] = LLVMBuildExtractValue(kb->b, d, (unsigned)i, "");
}

void kb_mma_tf32(Kb *kb, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef acc[4]) {
    mma(kb, "llvm.nvvm.mma.m16n8k8.row.col.tf32", a, b, acc);
}

void kb_mma_bf16(Kb *kb, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef acc[4]) {
    mma(kb, "llvm.nvvm.mma.m16n8k16.row.col.bf16", a, b, acc);
}
LLVMValueRef kb_flt(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(kb->b, LLVMRealOLT, a, b, ""); }
LLVMValueRef kb_isnan(Kb *kb, LLVMValueRef a) { return LLVMBuildFCmp(kb->b, LLVMRealUNO, a, a, ""); }
LLVMValueRef kb_fmax(Kb *kb, LLVMValueRef a, LLVMValueRef b) { return kb_select(kb, kb_fgt(kb, a, b), a, b); }
LLVMValueRef kb_sqrt(Kb *kb, LLVMValueRef a) {
    return kb_call(kb, "llvm.sqrt.f32", kb->f32, &a, 1);
}
LLVMValueRef kb_exp(Kb *kb, LLVMValueRef a) {
    LLVMValueRef x = kb_fmul(kb, a, kb_float(kb, 1.4426950408889634));
    return kb_call(kb, "llvm.nvvm.ex2.approx.f", kb->f32, &x, 1);
}
LLVMValueRef kb_log(Kb *kb, LLVMValueRef a) {
    LLVMValueRef l2 = kb_call(kb, "llvm.nvvm.lg2.approx.f", kb->f32, &a, 1);
    return kb_fmul(kb, l2, kb_float(kb, 0.6931471805599453));
}
LLVMValueRef kb_pow(Kb *kb, LLVMValueRef a, double b) {
    LLVMValueRef l2 = kb_call(kb, "llvm.nvvm.lg2.approx.f", kb->f32, &a, 1);
    LLVMValueRef x = kb_fmul(kb, l2, kb_float(kb, b));
    return kb_call(kb, "llvm.nvvm.ex2.approx.f", kb->f32, &x, 1);
}
LLVMValueRef kb_itof(Kb *kb, LLVMValueRef a) { return LLVMBuildSIToFP(kb->b, a, kb->f32, ""); }

/* ---- memory ----------------------------------------------------------------- */

static LLVMValueRef element(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    return LLVMBuildInBoundsGEP2(kb->b, kb->f32, p, &i, 1, "");
}

LLVMValueRef kb_load(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef v = LLVMBuildLoad2(kb->b, kb->f32, element(kb, p, i), "");
    LLVMSetAlignment(v, 4);
    return v;
}

void kb_store(Kb *kb, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) {
    LLVMValueRef s = LLVMBuildStore(kb->b, v, element(kb, p, i));
    LLVMSetAlignment(s, 4);
}

LLVMValueRef kb_load_if(Kb *kb, LLVMValueRef cond, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef v = kb_var(kb, kb->f32, kb_float(kb, 0));
    kb_if(kb, cond);
    kb_set(kb, v, kb_load(kb, p, i));
    kb_endif(kb);
    return kb_get(kb, v);
}

LLVMValueRef kb_shared(Kb *kb, int64_t count) {
    char name[32];
    snprintf(name, sizeof name, "shared%d", kb->shared_count++);
    LLVMTypeRef type = LLVMArrayType(kb->f32, (unsigned)count);
    LLVMValueRef g = LLVMAddGlobalInAddressSpace(kb->m, type, name, 3);
    LLVMSetInitializer(g, LLVMGetUndef(type));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, 16);
    return g;
}

LLVMValueRef kb_sload(Kb *kb, LLVMValueRef s, LLVMValueRef i) {
    return LLVMBuildLoad2(kb->b, kb->f32, LLVMBuildInBoundsGEP2(kb->b, kb->f32, s, &i, 1, ""), "");
}

void kb_sstore(Kb *kb, LLVMValueRef s, LLVMValueRef i, LLVMValueRef v) {
    LLVMBuildStore(kb->b, v, LLVMBuildInBoundsGEP2(kb->b, kb->f32, s, &i, 1, ""));
}

/* ---- control flow ----------------------------------------------------------- */

void kb_if(Kb *kb, LLVMValueRef cond) {
    if (kb->depth == KB_MAX_NEST)
        die("ifs and loops nested too deep");
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "then");
    LLVMBasicBlockRef els = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "else");
    LLVMBasicBlockRef end = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "endif");
    LLVMBuildCondBr(kb->b, cond, then, els);
    LLVMPositionBuilderAtEnd(kb->b, then);
    kb->nest[kb->depth++] = (KbNest){.a = els, .b = end};
}

void kb_else(Kb *kb) {
    if (kb->depth == 0 || kb->nest[kb->depth - 1].loop || kb->nest[kb->depth - 1].has_else)
        die("else without an if");
    KbNest *n = &kb->nest[kb->depth - 1];
    LLVMBuildBr(kb->b, n->b);
    LLVMPositionBuilderAtEnd(kb->b, n->a);
    n->has_else = true;
}

void kb_endif(Kb *kb) {
    if (kb->depth == 0 || kb->nest[kb->depth - 1].loop)
        die("endif without an if");
    KbNest *n = &kb->nest[--kb->depth];
    LLVMBuildBr(kb->b, n->b);
    if (!n->has_else) {
        LLVMPositionBuilderAtEnd(kb->b, n->a);
        LLVMBuildBr(kb->b, n->b);
    }
    LLVMPositionBuilderAtEnd(kb->b, n->b);
}

LLVMValueRef kb_for(Kb *kb, LLVMValueRef start, LLVMValueRef end, LLVMValueRef step) {
    if (kb->depth == KB_MAX_NEST)
        die("ifs and loops nested too deep");
    LLVMValueRef var = kb_var(kb, kb->i32, start);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "loop.body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "loop.end");
    LLVMBuildBr(kb->b, head);
    LLVMPositionBuilderAtEnd(kb->b, head);
    LLVMBuildCondBr(kb->b, kb_lt(kb, kb_get(kb, var), end), body, done);
    LLVMPositionBuilderAtEnd(kb->b, body);
    kb->nest[kb->depth++] = (KbNest){.a = head, .b = done, .var = var, .step = step,
                                                   .loop = true};
    return var;
}

void kb_endfor(Kb *kb) {
    if (kb->depth == 0 || !kb->nest[kb->depth - 1].loop)
        die("endfor without a for");
    KbNest *n = &kb->nest[--kb->depth];
    kb_set(kb, n->var, kb_add(kb, kb_get(kb, n->var), n->step));
    LLVMBuildBr(kb->b, n->a);
    LLVMPositionBuilderAtEnd(kb->b, n->b);
}

LLVMValueRef kb_block_sum(Kb *kb, LLVMValueRef scratch, LLVMValueRef v, int threads) {
    LLVMValueRef t = kb_tid(kb);
    kb_sstore(kb, scratch, t, v);
    kb_barrier(kb);
    for (int half = threads / 2; half > 0; half /= 2) {
        kb_if(kb, kb_lt(kb, t, kb_int(kb, half)));
        kb_sstore(kb, scratch, t,
                  kb_fadd(kb, kb_sload(kb, scratch, t),
                          kb_sload(kb, scratch, kb_addi(kb, t, half))));
        kb_endif(kb);
        kb_barrier(kb);
    }
    LLVMValueRef sum = kb_sload(kb, scratch, kb_int(kb, 0));
    kb_barrier(kb);
    return sum;
}
