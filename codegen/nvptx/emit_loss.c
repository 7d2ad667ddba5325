/* emit_loss.c — the GPU kernels of the losses, cross_entropy and mse, and
 * of their gradients.
 *
 * A loss is one block of ROW_THREADS threads, a term per sample (or
 * element) summed through shared memory in a fixed order, then divided by
 * the count: the same mean on every run.  A gradient is a map.  The
 * cross-entropy is computed stably (log-sum-exp), NaN for a label out of
 * range, as the CPU kernels (runtime/kernels/) compute it. */
#include <math.h>

#include "emit.h"

/* a row's max and sum of exp(x - max), from logits row pointer */
static void row_lse(Kb *kb, LLVMValueRef row, int64_t classes, LLVMValueRef *max, LLVMValueRef *sum) {
    LLVMValueRef m = kb_var(kb, kb->f32, kb_load(kb, row, kb_int(kb, 0)));
    LLVMValueRef j = kb_for(kb, kb_int(kb, 1), kb_int(kb, classes), kb_int(kb, 1));
    kb_set(kb, m, kb_fmax(kb, kb_load(kb, row, kb_get(kb, j)), kb_get(kb, m)));
    kb_endfor(kb);
    LLVMValueRef s = kb_var(kb, kb->f32, kb_float(kb, 0));
    j = kb_for(kb, kb_int(kb, 0), kb_int(kb, classes), kb_int(kb, 1));
    kb_set(kb, s, kb_fadd(kb, kb_get(kb, s), kb_exp(kb, kb_fsub(kb, kb_load(kb, row, kb_get(kb, j)), kb_get(kb, m)))));
    kb_endfor(kb);
    *max = kb_get(kb, m);
    *sum = kb_get(kb, s);
}

static LLVMValueRef nan_f(Kb *kb) { return kb_float(kb, NAN); }

/* (logits, labels) -> the mean loss, or its gradient (grad).  A row is a
 * sample, or with logits [T, classes] and labels i32[T] (a language
 * model's) a step of one: the mean is then over the n T rows. */
static void cross_entropy(NvKernels *nk, const DlcOp *op, const char *tag, bool grad) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 3, NULL, 0, grad ? MAP_THREADS : ROW_THREADS);
    Kb *kb = b.kb;
    const DlcType *t = &op->in[0]->type;
    int64_t classes = t->dims[t->rank - 1], per_n = nv_numel(op->in[0]) / classes;
    LLVMValueRef rows = nv_count(&b, per_n, 0);
    if (grad) { /* one thread per row: (softmax - onehot) / rows */
        LLVMValueRef i = nv_begin_map(&b, per_n, 0);
        LLVMValueRef row = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, i, classes)}, 1, "");
        LLVMValueRef out = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[2], (LLVMValueRef[]){kb_muli(kb, i, classes)}, 1, "");
        LLVMValueRef label = nv_load_i32(kb, b.p[1], i), max, sum;
        row_lse(kb, row, classes, &max, &sum);
        LLVMValueRef scale = kb_fdiv(kb, kb_float(kb, 1), kb_itof(kb, rows));
        LLVMValueRef j = kb_for(kb, kb_int(kb, 0), kb_int(kb, classes), kb_int(kb, 1));
        LLVMValueRef jj = kb_get(kb, j);
        LLVMValueRef p = kb_fdiv(kb, kb_exp(kb, kb_fsub(kb, kb_load(kb, row, jj), max)), sum);
        p = kb_fsub(kb, p, kb_select(kb, kb_eq(kb, jj, label), kb_float(kb, 1), kb_float(kb, 0)));
        kb_store(kb, out, jj, kb_fmul(kb, p, scale));
        kb_endfor(kb);
        nv_end_map(&b);
        return;
    }
    /* the loss: one block, a term per sample, their mean */
    nv_begin_rows(&b, 0, 1);
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef total = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = kb_for(kb, kb_tid(kb), rows, kb_int(kb, ROW_THREADS));
    LLVMValueRef ii = kb_get(kb, i);
    LLVMValueRef row = LLVMBuildInBoundsGEP2(kb->b, kb->f32, b.p[0], (LLVMValueRef[]){kb_muli(kb, ii, classes)}, 1, "");
    LLVMValueRef label = nv_load_i32(kb, b.p[1], ii), max, sum;
    row_lse(kb, row, classes, &max, &sum);
    LLVMValueRef ok = kb_in_range(kb, label, classes);
    LLVMValueRef xl = kb_load_if(kb, ok, row, kb_select(kb, ok, label, kb_int(kb, 0)));
    LLVMValueRef term = kb_fadd(kb, kb_log(kb, sum), kb_fsub(kb, max, xl));
    kb_set(kb, total, kb_fadd(kb, kb_get(kb, total), kb_select(kb, ok, term, nan_f(kb))));
    kb_endfor(kb);
    LLVMValueRef all = kb_block_sum(kb, scratch, kb_get(kb, total), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[2], kb_int(kb, 0), kb_fdiv(kb, all, kb_itof(kb, rows)));
    kb_endif(kb);
    kb_end(kb);
}

/* (pred, target) -> the mean squared error, or its gradient (grad) */
static void mse(NvKernels *nk, const DlcOp *op, const char *tag, bool grad) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 3, NULL, 0, grad ? MAP_THREADS : ROW_THREADS);
    Kb *kb = b.kb;
    int64_t size = nv_numel(op->in[0]);
    LLVMValueRef cnt = nv_count(&b, size, 0);
    if (grad) {
        LLVMValueRef i = nv_begin_map(&b, size, 0);
        LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], i), kb_load(kb, b.p[1], i));
        kb_store(kb, b.p[2], i, kb_fdiv(kb, kb_fmul(kb, d, kb_float(kb, 2)), kb_itof(kb, cnt)));
        nv_end_map(&b);
        return;
    }
    nv_begin_rows(&b, 0, 1);
    LLVMValueRef scratch = kb_shared(kb, ROW_THREADS);
    LLVMValueRef total = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef i = kb_for(kb, kb_tid(kb), cnt, kb_int(kb, ROW_THREADS));
    LLVMValueRef d = kb_fsub(kb, kb_load(kb, b.p[0], kb_get(kb, i)), kb_load(kb, b.p[1], kb_get(kb, i)));
    kb_set(kb, total, kb_fma(kb, d, d, kb_get(kb, total)));
    kb_endfor(kb);
    LLVMValueRef all = kb_block_sum(kb, scratch, kb_get(kb, total), ROW_THREADS);
    kb_if(kb, kb_eq(kb, kb_tid(kb), kb_int(kb, 0)));
    kb_store(kb, b.p[2], kb_int(kb, 0), kb_fdiv(kb, all, kb_itof(kb, cnt)));
    kb_endif(kb);
    kb_end(kb);
}

void nv_emit_cross_entropy(NvKernels *nk, const DlcOp *op, const char *tag) {
    cross_entropy(nk, op, tag, false);
}

void nv_emit_cross_entropy_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    cross_entropy(nk, op, tag, true);
}

void nv_emit_mse(NvKernels *nk, const DlcOp *op, const char *tag) {
    mse(nk, op, tag, false);
}

void nv_emit_mse_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    mse(nk, op, tag, true);
}
