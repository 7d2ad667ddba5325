/* verify.c — the IR verifier.
 *
 * Checks what every pass may assume: names are unique; every operand is an
 * input, a parameter or the result of an earlier op of the same network;
 * operands list the user's tensors first and the op's parameters last; each
 * op's result types and parameters are exactly what its shape rule computes
 * from its operands and attributes; no op reads a parameter after the
 * weight update that changes it (the update ends the parameter's step);
 * every network returns something, in the plain layout; each op reads its
 * operands in a layout it can read (docs/ir.md#layouts); train sections
 * name a network and pass the train schema.
 *
 * On IR text the problems are the user's and are reported at the op's
 * location; between passes the driver treats any as an internal error. */
#include "ir.h"

#include <string.h>

static bool verify_op(DlcCtx *ctx, const DlcNetwork *net, const DlcOp *op,
                      DlcMap *defined) {
    const DlcOpInfo *info = dlc_op_info(op->kind);
    char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
    int ntensors = op->nin - op->nparams;
    if (op->nparams < 0 || ntensors < 0) {
        dlc_error(ctx, op->loc, "%s: bad operand count", info->name);
        return false;
    }
    /* no fixed bound: clip_norm reads every gradient of a network */
    DlcType *in = dlc_arena_alloc(defined->arena, sizeof *in * (size_t)(ntensors + 1));
    for (int i = 0; i < op->nin; i++) {
        const DlcValue *v = op->in[i];
        if (dlc_map_get(&net->names, v->name) != v || !dlc_map_get(defined, v->name)) {
            dlc_error(ctx, op->loc, "%s: operand %c%s is used before it is defined",
                      info->name, v->kind == DLC_VAL_PARAM ? '@' : '%', v->name);
            return false;
        }
        bool want_param = i >= ntensors;
        if ((v->kind == DLC_VAL_PARAM) != want_param) {
            dlc_error(ctx, op->loc,
                      want_param ? "%s: operand %d must be a parameter (@name)"
                                 : "%s: operand %d must be a tensor (%%name), not a parameter",
                      info->name, i + 1);
            return false;
        }
        if (i < ntensors)
            in[i] = v->type;
    }
    DlcAttr attrs[DLC_MAX_ATTRS];
    memcpy(attrs, op->attrs, sizeof attrs);
    int missing = dlc_op_fill_defaults(op->kind, attrs);
    if (missing >= 0) {
        dlc_error(ctx, op->loc, "%s: attribute '%s' is required", info->name,
                  info->attrs[missing].name);
        return false;
    }
    DlcType declared[DLC_MAX_RESULTS];
    for (int i = 0; i < op->nout; i++)
        declared[i] = op->out[i]->type;
    DlcInfer inf = {.ctx = ctx, .loc = op->loc, .kind = op->kind, .in = in,
                    .nin = ntensors, .attrs = attrs, .declared = op->nout ? declared : NULL};
    if (!dlc_infer(&inf))
        return false;
    for (int i = 0; i < ntensors; i++) {
        const char *why = dlc_layout_mismatch(op, i);
        if (why) {
            dlc_error(ctx, op->loc, "%s: operand %%%s is in layout %lld: %s", info->name,
                      op->in[i]->name, (long long)dlc_value_layout(op->in[i]), why);
            return false;
        }
    }
    if (inf.nout != op->nout) {
        dlc_error(ctx, op->loc, "%s: has %d result%s, expected %d", info->name,
                  op->nout, op->nout == 1 ? "" : "s", inf.nout);
        return false;
    }
    for (int i = 0; i < op->nout; i++)
        if (!dlc_type_eq(&inf.out[i], &op->out[i]->type)) {
            dlc_error(ctx, op->loc, "%s: result %%%s has type %s, but the shape rule gives %s",
                      info->name, op->out[i]->name, dlc_type_str(&op->out[i]->type, a, sizeof a),
                      dlc_type_str(&inf.out[i], b, sizeof b));
            return false;
        }
    if (inf.nparams != op->nparams) {
        dlc_error(ctx, op->loc, "%s: takes %d parameter%s, got %d", info->name,
                  inf.nparams, inf.nparams == 1 ? "" : "s", op->nparams);
        return false;
    }
    for (int i = 0; i < op->nparams; i++) {
        const DlcValue *p = op->in[ntensors + i];
        if (!dlc_type_eq(&inf.params[i].type, &p->type)) {
            dlc_error(ctx, op->loc, "%s: parameter @%s (the %s) has type %s, but the shape rule gives %s",
                      info->name, p->name, inf.params[i].role,
                      dlc_type_str(&p->type, a, sizeof a),
                      dlc_type_str(&inf.params[i].type, b, sizeof b));
            return false;
        }
        if (p->trainable != inf.params[i].trainable) {
            dlc_error(ctx, op->loc, "%s: @%s (the %s) must be declared as a %s",
                      info->name, p->name, inf.params[i].role,
                      inf.params[i].trainable ? "param" : "buffer");
            return false;
        }
    }
    for (int i = 0; i < op->nout; i++)
        dlc_map_put(defined, op->out[i]->name, op->out[i]);
    return true;
}

/* Whether an op reads a parameter that an earlier weight update changed:
 * it would see the next step's value.  updated maps the parameters
 * updated so far to their update. */
static bool verify_reads_after_update(DlcCtx *ctx, const DlcOp *op, DlcMap *updated) {
    for (int j = op->nin - op->nparams; j < op->nin; j++) {
        const DlcOp *up = dlc_map_get(updated, op->in[j]->name);
        if (up) {
            dlc_error(ctx, op->loc, "%s: reads @%s after the weight update that changes it",
                      dlc_op_info(op->kind)->name, op->in[j]->name);
            dlc_note(ctx, up->loc, "the update is here");
            return false;
        }
    }
    if (dlc_op_is_update(op->kind))
        for (int j = op->nin - op->nparams; j < op->nin; j++)
            dlc_map_put(updated, op->in[j]->name, (void *)op);
    return true;
}

static bool verify_network(DlcCtx *ctx, DlcModule *scratch, const DlcNetwork *net) {
    bool ok = true;
    DlcMap defined;
    dlc_map_init(&defined, &scratch->arena);
    char b[DLC_TYPE_STR_MAX];
    for (int i = 0; i < net->ninputs; i++) {
        const DlcValue *v = net->inputs[i];
        if (!v->type.batched && v->type.rank != 0) {
            /* unbatched inputs are scalars: a learning rate, a step count */
            dlc_error(ctx, v->loc, "input %%%s must be per-sample (batched) or a scalar, got %s",
                      v->name, dlc_type_str(&v->type, b, sizeof b));
            ok = false;
        }
        dlc_map_put(&defined, v->name, (void *)v);
    }
    for (int i = 0; i < net->nparams; i++) {
        const DlcValue *p = net->params[i];
        if (p->type.batched) {
            dlc_error(ctx, p->loc, "parameter @%s cannot be batched", p->name);
            ok = false;
        }
        dlc_map_put(&defined, p->name, (void *)p);
    }
    DlcMap updated;
    dlc_map_init(&updated, &scratch->arena);
    for (int i = 0; i < net->nops && ok; i++)
        ok = verify_op(ctx, net, net->ops[i], &defined) &&
             verify_reads_after_update(ctx, net->ops[i], &updated);
    if (!ok)
        return false;
    if (net->noutputs == 0) {
        dlc_error(ctx, net->loc, "network '%s' returns nothing", net->name);
        return false;
    }
    for (int i = 0; i < net->noutputs; i++) {
        const DlcValue *v = net->outputs[i];
        if (v->kind == DLC_VAL_PARAM || !dlc_map_get(&defined, v->name)) {
            dlc_error(ctx, net->loc, "network '%s' returns %c%s, which is not a tensor it computes",
                      net->name, v->kind == DLC_VAL_PARAM ? '@' : '%', v->name);
            return false;
        }
        if (dlc_value_layout(v)) {
            dlc_error(ctx, net->loc, "network '%s' returns %%%s in layout %lld: %s", net->name,
                      v->name, (long long)dlc_value_layout(v), dlc_layout_mismatch(NULL, -1));
            return false;
        }
        if (v->type.dtype == DLC_I8) {
            dlc_error(ctx, net->loc, "network '%s' returns %%%s, an int8 tensor: a network "
                      "returns it dequantized", net->name, v->name);
            return false;
        }
    }
    return true;
}

bool dlc_verify(DlcCtx *ctx, const DlcModule *m) {
    DlcModule *scratch = dlc_module_new(ctx);
    bool ok = true;
    for (int i = 0; i < m->nnetworks; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(m->networks[i]->name, m->networks[j]->name) == 0) {
                dlc_error(ctx, m->networks[i]->loc, "network '%s' is defined twice",
                          m->networks[i]->name);
                ok = false;
            }
        ok &= verify_network(ctx, scratch, m->networks[i]);
    }
    for (int i = 0; i < m->ntrains; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(m->trains[i]->network, m->trains[j]->network) == 0) {
                dlc_error(ctx, m->trains[i]->loc, "second train section for network '%s'",
                          m->trains[i]->network);
                dlc_note(ctx, m->trains[j]->loc, "the first is here");
                ok = false;
            }
        ok &= dlc_train_check(ctx, m, m->trains[i]);
    }
    dlc_module_free(scratch);
    return ok;
}
