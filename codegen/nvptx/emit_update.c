/* emit_update.c — the GPU kernels of the weight update: sgd_update and
 * adam_update (torch.optim.SGD and Adam, as libdlrt's dlrt_sgd_update and
 * dlrt_adam_update compute them), each a map over the parameter's
 * elements that updates it and its optimizer state in place; param_grad,
 * which needs none; and gradient clipping before them: clip_norm, sums of
 * squares in f64 reduced in a fixed order (no atomics), and clip_scale, a
 * map.  The learning rate (and Adam's step, and clipping's largest norm)
 * are the kernels' scalar arguments, so one PTX serves every schedule. */
#include <math.h>

#include "emit.h"

/* The map both updates are: element i of the parameter, its value p, the
 * gradient with weight decay d, and the learning rate lr. */
typedef struct Update {
    Build b;
    LLVMValueRef i, lr, p, d;
} Update;

/* (g, lr[, step], @p, state...): the scalars lr (and step) after the batch */
static void begin_update(Update *u, NvKernels *nk, const DlcOp *op, const char *tag, int nscalars) {
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    int sc[2] = {NV_SCALAR + 1, NV_SCALAR + 2};
    nv_start(&u->b, nk, op, tag, "", slots, ns, sc, nscalars, MAP_THREADS);
    Kb *kb = u->b.kb;
    u->i = nv_begin_map(&u->b, 0, nv_numel(op->in[0]));
    LLVMValueRef g = kb_load(kb, u->b.p[0], u->i);
    u->lr = u->b.sc[1];
    u->p = kb_load(kb, u->b.p[1], u->i);
    double wd = dlc_attr_float(op, DLC_A_WEIGHT_DECAY);
    u->d = wd != 0 ? kb_fma(kb, kb_float(kb, (float)wd), u->p, g) : g;
}

/* (g, lr, @p[, @p.momentum_buffer]) */
void nv_emit_sgd_update(NvKernels *nk, const DlcOp *op, const char *tag) {
    Update u;
    begin_update(&u, nk, op, tag, 1);
    Kb *kb = u.b.kb;
    LLVMValueRef i = u.i, d = u.d, *p = u.b.p;
    double momentum = dlc_attr_float(op, DLC_A_MOMENTUM);
    if (op->nparams == 2 && momentum != 0) {
        LLVMValueRef buf = kb_fadd(kb, kb_fmul(kb, kb_load(kb, p[2], i), kb_float(kb, (float)momentum)), d);
        kb_store(kb, p[2], i, buf);
        d = dlc_attr_true(op->kind, op->attrs, DLC_A_NESTEROV) ? kb_fma(kb, kb_float(kb, (float)momentum), buf, d) : buf;
    }
    kb_store(kb, p[1], i, kb_fma(kb, kb_fneg(kb, u.lr), d, u.p));
    nv_end_map(&u.b);
}

/* (g, lr, step, @p, @p.exp_avg, @p.exp_avg_sq) */
void nv_emit_adam_update(NvKernels *nk, const DlcOp *op, const char *tag) {
    Update u;
    begin_update(&u, nk, op, tag, 2);
    Kb *kb = u.b.kb;
    LLVMValueRef i = u.i, d = u.d, *p = u.b.p;
    /* the bias corrections from the step, in f32 here (f64 on the CPU) */
    double beta1 = dlc_attr_float(op, DLC_A_BETA1), beta2 = dlc_attr_float(op, DLC_A_BETA2), eps = dlc_attr_float(op, DLC_A_EPS);
    LLVMValueRef t = kb_itof(kb, kb_max(kb, u.b.sc[2], kb_int(kb, 1)));
    LLVMValueRef bc1 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta1)))));
    LLVMValueRef bc2 = kb_fsub(kb, kb_float(kb, 1), kb_exp(kb, kb_fmul(kb, t, kb_float(kb, log(beta2)))));
    LLVMValueRef step_size = kb_fdiv(kb, u.lr, bc1), bc2_sqrt = kb_sqrt(kb, bc2);
    LLVMValueRef m = kb_fma(kb, kb_float(kb, (float)(1 - beta1)), d,
                            kb_fmul(kb, kb_load(kb, p[2], i), kb_float(kb, (float)beta1)));
    LLVMValueRef v = kb_fma(kb, kb_fmul(kb, kb_float(kb, (float)(1 - beta2)), d), d,
                            kb_fmul(kb, kb_load(kb, p[3], i), kb_float(kb, (float)beta2)));
    kb_store(kb, p[2], i, m);
    kb_store(kb, p[3], i, v);
    LLVMValueRef denom = kb_fadd(kb, kb_fdiv(kb, kb_sqrt(kb, v), bc2_sqrt), kb_float(kb, (float)eps));
    kb_store(kb, p[1], i, kb_fadd(kb, u.p, kb_fdiv(kb, kb_fmul(kb, kb_fneg(kb, step_size), m), denom)));
    nv_end_map(&u.b);
}

/* (g, @param): no kernel; the gradient stays where the memory plan put it */
void nv_emit_param_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    (void)nk, (void)op, (void)tag;
}

/* ---- gradient clipping ---------------------------------------------------------- */

/* f64 values in f32 arrays (the scratch memory, a shared array): the sums
 * of squares. */
static LLVMTypeRef f64_type(Kb *kb) { return LLVMDoubleTypeInContext(kb->c); }

static LLVMValueRef f64_at(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    return LLVMBuildInBoundsGEP2(kb->b, f64_type(kb), p, &i, 1, "");
}

static LLVMValueRef f64_load(Kb *kb, LLVMValueRef p, LLVMValueRef i) {
    LLVMValueRef v = LLVMBuildLoad2(kb->b, f64_type(kb), f64_at(kb, p, i), "");
    LLVMSetAlignment(v, 8);
    return v;
}

static void f64_store(Kb *kb, LLVMValueRef p, LLVMValueRef i, LLVMValueRef v) {
    LLVMSetAlignment(LLVMBuildStore(kb->b, v, f64_at(kb, p, i)), 8);
}

/* The block's sum of each thread's v (f64), as kb_block_sum: through a
 * shared array of 2 * threads floats, in a fixed tree; thread 0 gets it. */
static LLVMValueRef f64_block_sum(Kb *kb, LLVMValueRef v, int threads) {
    LLVMValueRef scratch = kb_shared(kb, 2 * (int64_t)threads), t = kb_tid(kb);
    f64_store(kb, scratch, t, v);
    kb_barrier(kb);
    for (int half = threads / 2; half > 0; half /= 2) {
        kb_if(kb, kb_lt(kb, t, kb_int(kb, half)));
        f64_store(kb, scratch, t, LLVMBuildFAdd(kb->b, f64_load(kb, scratch, t),
                                                f64_load(kb, scratch, kb_addi(kb, t, half)), ""));
        kb_endif(kb);
        kb_barrier(kb);
    }
    return f64_load(kb, scratch, kb_int(kb, 0));
}

/* The blocks that sum a gradient of `count` elements: one per 16 elements
 * of each thread, up to two per multiprocessor. */
static int64_t clip_parts(const NvKernels *nk, int64_t count) {
    int64_t parts = count / (ROW_THREADS * 16), most = 2 * (int64_t)nk->multiprocessors;
    return parts < 1 ? 1 : parts > most ? most : parts;
}

/* (g1, ..., gk, clip) -> coefficient: a kernel per gradient, whose blocks
 * each write the f64 sum of the squares of a part of it to scratch memory
 * (a kernel per gradient, since a kernel takes NV_MAX_PTRS pointers and a
 * network has more gradients), then one block that adds the parts in a
 * fixed order and writes the coefficient, as dlrt_clip_coefficient. */
void nv_emit_clip_norm(NvKernels *nk, const DlcOp *op, const char *tag) {
    int ngrads = op->nin - 1;
    int64_t total = 0;
    for (int k = 0; k < ngrads; k++)
        total += clip_parts(nk, nv_numel(op->in[k]));
    int64_t at = 0; /* the gradient's first part */
    for (int k = 0; k < ngrads; k++) {
        int64_t count = nv_numel(op->in[k]), parts = clip_parts(nk, count);
        int64_t chunk = (count + parts - 1) / parts;
        Build b;
        int slots[2] = {k, NV_WORKSPACE};
        char suffix[32];
        snprintf(suffix, sizeof suffix, "sum%d", k);
        nv_start(&b, nk, op, tag, suffix, slots, 2, NULL, 0, ROW_THREADS);
        b.l->workspace = 2 * total;
        Kb *kb = b.kb;
        LLVMValueRef part = nv_begin_rows(&b, 0, parts);
        LLVMValueRef lo = kb_muli(kb, part, chunk);
        LLVMValueRef hi = kb_min(kb, kb_addi(kb, lo, chunk), kb_int(kb, count));
        LLVMValueRef sum = kb_var(kb, f64_type(kb), LLVMConstReal(f64_type(kb), 0));
        LLVMValueRef i = kb_for(kb, kb_add(kb, lo, kb_tid(kb)), hi, kb_int(kb, ROW_THREADS));
        LLVMValueRef v = LLVMBuildFPExt(kb->b, kb_load(kb, b.p[0], kb_get(kb, i)), f64_type(kb), "");
        kb_set(kb, sum, LLVMBuildFAdd(kb->b, kb_get(kb, sum), LLVMBuildFMul(kb->b, v, v, ""), ""));
        kb_endfor(kb);
        LLVMValueRef s = f64_block_sum(kb, kb_get(kb, sum), ROW_THREADS);
        kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
        f64_store(kb, b.p[1], kb_addi(kb, part, at), s);
        kb_endif(kb);
        kb_end(kb);
        at += parts;
    }
    Build b;
    int slots[2] = {NV_WORKSPACE, NV_RESULT};
    int sc[1] = {NV_SCALAR + ngrads};
    nv_start(&b, nk, op, tag, "coef", slots, 2, sc, 1, ROW_THREADS);
    b.l->workspace = 2 * total;
    Kb *kb = b.kb;
    nv_begin_rows(&b, 0, 1);
    LLVMValueRef sum = kb_var(kb, f64_type(kb), LLVMConstReal(f64_type(kb), 0));
    LLVMValueRef i = kb_for(kb, kb_tid(kb), kb_int(kb, total), kb_int(kb, ROW_THREADS));
    kb_set(kb, sum, LLVMBuildFAdd(kb->b, kb_get(kb, sum), f64_load(kb, b.p[0], kb_get(kb, i)), ""));
    kb_endfor(kb);
    LLVMValueRef s = f64_block_sum(kb, kb_get(kb, sum), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    LLVMValueRef args[1] = {s};
    LLVMTypeRef sqrt_type = LLVMFunctionType(f64_type(kb), (LLVMTypeRef[]){f64_type(kb)}, 1, 0);
    LLVMValueRef sqrt_fn = LLVMGetNamedFunction(kb->m, "llvm.sqrt.f64");
    if (!sqrt_fn)
        sqrt_fn = LLVMAddFunction(kb->m, "llvm.sqrt.f64", sqrt_type);
    LLVMValueRef norm = LLVMBuildFPTrunc(kb->b, LLVMBuildCall2(kb->b, sqrt_type, sqrt_fn, args, 1, ""),
                                         kb->f32, "");
    /* (1 / (norm + 1e-6)) * clip, at most 1 (NaN stays), and 1 for clip <= 0 */
    LLVMValueRef max = b.sc[1];
    LLVMValueRef coef = kb_fmul(kb, kb_fdiv(kb, kb_float(kb, 1), kb_fadd(kb, norm, kb_float(kb, (float)1e-6))),
                                max);
    coef = kb_select(kb, kb_fgt(kb, coef, kb_float(kb, 1)), kb_float(kb, 1), coef);
    coef = kb_select(kb, kb_fgt(kb, max, kb_float(kb, 0)), coef, kb_float(kb, 1));
    kb_store(kb, b.p[1], kb_int(kb, 0), coef);
    kb_endif(kb);
    kb_end(kb);
}

/* (g, coefficient) -> g * coefficient, possibly in place */
void nv_emit_clip_scale(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[NV_MAX_PTRS], ns = nv_tensor_slots(op, slots);
    nv_start(&b, nk, op, tag, "", slots, ns, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    LLVMValueRef i = nv_begin_map(&b, 0, nv_numel(op->in[0]));
    kb_store(kb, b.p[2], i, kb_fmul(kb, kb_load(kb, b.p[0], i), kb_load(kb, b.p[1], kb_int(kb, 0))));
    nv_end_map(&b);
}
