/* grad_embedding.c — the gradient rule of the embedding (torch.nn.Embedding).
 *
 * Token ids have no gradient; the weight's is each step's dy added to its
 * token's row (embedding_grad), which reads the ids again. */
#include "grad.h"

void dlc_grad_embedding(DlcGrad *g, const DlcOp *op, DlcValue *dy) {
    DlcValue *tokens = op->in[0], *w = op->in[1];
    dlc_grad_term(g, op, w, DLC_OP_EMBEDDING_GRAD, (DlcValue *[]){dy, tokens}, 2, 0);
}
