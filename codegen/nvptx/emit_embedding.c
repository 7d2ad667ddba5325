/* emit_embedding.c — the GPU kernels of the embedding (torch.nn.Embedding):
 * each token's row of the weight, and the weight's gradient.
 *
 * The host code checks the ids against the vocabulary before it uploads
 * them (dlrt_check_tokens, as the CPU's API functions do), so an id out of
 * range never reaches a kernel from a program; the kernels still read no
 * row for one (a zero row forward, nothing backward), as the CPU kernels
 * (runtime/kernels/embedding.inc) do.
 *
 * The gradient is a map over the weight's [vocab, dim] elements: each
 * thread adds the dy of every step whose token is its row, in the order of
 * the batch's steps.  That is the CPU's sum, term for term, so the two
 * devices agree bit for bit, and no atomics are needed.  Each thread reads
 * all n T token ids (the same ones across a warp: cached), which costs
 * vocab dim n T reads: fine for a character model's vocabulary, slow for
 * a word model's of 50,000 (a sort of the ids would then pay). */
#include "emit.h"

/* The token ids per sample: the steps of a sequence i32[T], or 1 for i32[]. */
static int64_t token_steps(const DlcValue *tokens) { return tokens->type.rank ? nv_numel(tokens) : 1; }

/* (tokens, @weight) -> y: a thread per element of y */
void nv_emit_embedding(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 3, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    int64_t vocab = dlc_attr_int(op, DLC_A_VOCAB), dim = dlc_attr_int(op, DLC_A_DIM);
    LLVMValueRef i = nv_begin_map(&b, token_steps(op->in[0]) * dim, 0);
    LLVMValueRef id = nv_load_i32(kb, b.p[0], kb_divi(kb, i, dim));
    LLVMValueRef ok = kb_in_range(kb, id, vocab);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_select(kb, ok, id, kb_int(kb, 0)), dim), kb_remi(kb, i, dim));
    kb_store(kb, b.p[2], i, kb_load_if(kb, ok, b.p[1], at));
    nv_end_map(&b);
}

/* (dy, tokens) -> dW [vocab, dim]: a thread per element of dW */
void nv_emit_embedding_grad(NvKernels *nk, const DlcOp *op, const char *tag) {
    Build b;
    int slots[3] = {0, 1, NV_RESULT};
    nv_start(&b, nk, op, tag, "", slots, 3, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    int64_t vocab = dlc_attr_int(op, DLC_A_VOCAB), dim = dlc_attr_int(op, DLC_A_DIM);
    LLVMValueRef i = nv_begin_map(&b, 0, vocab * dim);
    LLVMValueRef v = kb_divi(kb, i, dim), k = kb_remi(kb, i, dim);
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef r = kb_for(kb, kb_int(kb, 0), nv_count(&b, token_steps(op->in[1]), 0), kb_int(kb, 1));
    LLVMValueRef rr = kb_get(kb, r);
    kb_if(kb, kb_eq(kb, nv_load_i32(kb, b.p[1], rr), v));
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum), kb_load(kb, b.p[0], kb_add(kb, kb_muli(kb, rr, dim), k))));
    kb_endif(kb);
    kb_endfor(kb);
    kb_store(kb, b.p[2], i, kb_get(kb, sum));
    nv_end_map(&b);
}
