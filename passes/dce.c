/* dce.c — dead-code elimination.
 *
 * Removes every op none of whose results reaches a network output (ops
 * without results, such as param_grad, are kept for their effect), then the
 * parameters that only removed ops used.  Walks the ops once backwards, so
 * it is linear in the size of the network.
 *
 * Preconditions: the module verifies.  The ops with effects are those
 * without results (param_grad, the weight updates), which stay, and
 * batchnorm_train, which also updates its running statistics and goes only
 * with its result, when nothing reads that. */
#include "passes.h"

static void dce_network(DlcModule *m, DlcNetwork *net) {
    DlcMap live;
    dlc_map_init(&live, &m->arena);
    for (int i = 0; i < net->noutputs; i++)
        dlc_map_put(&live, net->outputs[i]->name, (void *)1);
    int kept = net->nops;
    bool *keep = dlc_arena_alloc(&m->arena, (size_t)net->nops + 1);
    for (int i = net->nops - 1; i >= 0; i--) {
        const DlcOp *op = net->ops[i];
        keep[i] = op->nout == 0; /* an op without results is there for its effect */
        for (int r = 0; r < op->nout && !keep[i]; r++)
            keep[i] = dlc_map_get(&live, op->out[r]->name) != NULL;
        if (!keep[i]) {
            kept--;
            continue;
        }
        for (int j = 0; j < op->nin; j++)
            dlc_map_put(&live, op->in[j]->name, (void *)1);
    }
    if (kept == net->nops)
        return;
    int n = 0;
    for (int i = 0; i < net->nops; i++)
        if (keep[i])
            net->ops[n++] = net->ops[i];
    net->nops = n;
    n = 0;
    for (int i = 0; i < net->nparams; i++)
        if (dlc_map_get(&live, net->params[i]->name))
            net->params[n++] = net->params[i];
    net->nparams = n;
    dlc_network_reindex(m, net);
}

bool dlc_pass_dce(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)opt;
    (void)ctx;
    for (int i = 0; i < m->nnetworks; i++)
        dce_network(m, m->networks[i]);
    return true;
}
