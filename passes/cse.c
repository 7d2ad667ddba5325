/* cse.c — common-subexpression elimination.
 *
 * Two ops of the same kind with the same operands and attributes compute
 * the same values, so the later one is dropped and its uses read the
 * earlier one's results (`a = relu(x)` and `b = relu(x)`).  Ops with
 * parameters are never merged: each owns its weights.  Stochastic ops
 * (dropout) are never merged: two draws differ.
 *
 * Preconditions: the module verifies.  Dropped ops are left for nothing:
 * this pass removes them itself; run dce afterwards for ops made dead. */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A key that equal ops share: kind, operand names and attribute bytes. */
static const char *op_key(DlcModule *m, const DlcOp *op) {
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        dlc_unreachable("open_memstream failed");
    fprintf(f, "%d", (int)op->kind);
    for (int i = 0; i < op->nin; i++)
        fprintf(f, " %s", op->in[i]->name);
    const DlcOpInfo *info = dlc_op_info(op->kind);
    for (int i = 0; i < info->nattrs; i++) {
        const DlcAttr *a = &op->attrs[i];
        switch (a->type) {
        case DLC_ATTR_INT: fprintf(f, " %lld", (long long)a->i); break;
        case DLC_ATTR_FLOAT: fprintf(f, " %a", a->f); break;
        case DLC_ATTR_BOOL: fprintf(f, " %d", a->b); break;
        case DLC_ATTR_PAIR:
            fprintf(f, " %lld,%lld", (long long)a->pair[0], (long long)a->pair[1]);
            break;
        }
    }
    fclose(f);
    const char *key = dlc_arena_strdup(&m->arena, buf);
    free(buf);
    return key;
}

static DlcValue *resolve(DlcMap *repl, DlcValue *v) {
    DlcValue *r = dlc_map_get(repl, v->name);
    return r ? r : v;
}

static void cse_network(DlcModule *m, DlcNetwork *net) {
    DlcMap seen, repl;
    dlc_map_init(&seen, &m->arena);
    dlc_map_init(&repl, &m->arena);
    int n = 0;
    for (int i = 0; i < net->nops; i++) {
        DlcOp *op = net->ops[i];
        for (int j = 0; j < op->nin; j++)
            op->in[j] = resolve(&repl, op->in[j]);
        bool mergeable = op->nparams == 0 &&
                         !(dlc_op_info(op->kind)->flags & DLC_OPF_STOCHASTIC);
        if (mergeable) {
            const char *key = op_key(m, op);
            DlcOp *prev = dlc_map_get(&seen, key);
            if (prev) {
                for (int r = 0; r < op->nout; r++)
                    dlc_map_put(&repl, op->out[r]->name, prev->out[r]);
                continue;
            }
            dlc_map_put(&seen, key, op);
        }
        net->ops[n++] = op;
    }
    if (n == net->nops)
        return;
    net->nops = n;
    for (int i = 0; i < net->noutputs; i++)
        net->outputs[i] = resolve(&repl, net->outputs[i]);
    dlc_network_reindex(m, net);
}

bool dlc_pass_cse(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)opt;
    (void)ctx;
    for (int i = 0; i < m->nnetworks; i++)
        cse_network(m, m->networks[i]);
    return true;
}
