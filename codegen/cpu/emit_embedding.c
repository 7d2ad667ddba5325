/* emit_embedding.c — the C of the embedding (torch.nn.Embedding): a copy of
 * each token's row of the weight, and the weight's gradient, each step's dy
 * added to its token's row.  The ids were checked against the vocabulary
 * by the API function that runs the network (cpu.c), before any op. */
#include "emit.h"

#define put dlc_cpu_put

/* The token ids of a batch: n times the steps of a sequence (1 for one id). */
static const char *ids(Emit *e, const DlcValue *tokens) {
    return tokens->type.rank ? dlc_arena_printf(e->arena, "n * %lld", (long long)tokens->type.dims[0])
                             : "n";
}

/* (tokens, @weight) */
void dlc_cpu_emit_embedding(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_embedding_forward(%s, %lld, %lld, a0, a1, r0);\n", ids(e, op->in[0]),
        (long long)dlc_attr_int(op, DLC_A_VOCAB), (long long)dlc_attr_int(op, DLC_A_DIM));
}

/* (dy, tokens) */
void dlc_cpu_emit_embedding_grad(Emit *e, Out *o, const DlcOp *op) {
    put(o, "    dlrt_embedding_backward(%s, %lld, %lld, a0, a1, r0);\n", ids(e, op->in[1]),
        (long long)dlc_attr_int(op, DLC_A_VOCAB), (long long)dlc_attr_int(op, DLC_A_DIM));
}
