/* step.c — NAME.step: a sequence network at one step, for generating.
 *
 * A language model is trained on T steps at a time, but generates one
 * token at a time: each new token is read, the recurrent layers advance
 * their state by one step, and the scores of the next token come out.
 * Running the T-step network over a window per token costs T steps for
 * one; NAME.step costs one.  It is NAME with its input's T set to 1 and
 * every result's shape inferred again, its recurrent layers stateful
 * (each call goes on from the state the last ended in: net->state, which
 * NAME's own stateful layers share, being keyed by the same parameters),
 * and the same parameters, by name.
 *
 * Only a network whose every op treats each step on its own, or carries
 * state forwards, has such a form: one input whose first dimension is the
 * steps (T > 1) and one output of scores at every step, made of
 * embeddings, elementwise ops, per-step dense layers, concatenations along
 * the features and forward recurrent layers that read every step and
 * return every step (no reverse direction, no last=true, no lengths).
 * Any other network is left as it is.
 *
 * Preconditions: the module verifies; autodiff and optimizer have run
 * (the CPU's pipeline puts this pass after them), so that NAME.train is
 * NAME's alone.  The passes after it (cse, dce, fuse, tile) treat NAME.step
 * as an inference network. */
#include "passes.h"

#include <string.h>

/* Whether op computes each step from that step's operands alone, or
 * carries state forwards only. */
static bool per_step(const DlcOp *op) {
    if (dlc_op_info(op->kind)->flags & DLC_OPF_ELEMWISE)
        return true;
    if (dlc_op_is_recurrent(op->kind))
        return !dlc_attr_bool(op, DLC_A_REVERSE) && !dlc_attr_bool(op, DLC_A_LAST) &&
               !dlc_attr_bool(op, DLC_A_LENGTHS);
    switch (op->kind) {
    case DLC_OP_EMBEDDING:
        return true;
    case DLC_OP_DENSE:
        return dlc_attr_bool(op, DLC_A_PER_STEP);
    case DLC_OP_CONCAT:
    case DLC_OP_SOFTMAX: { /* along the features, the last dimension */
        int64_t axis = dlc_attr_int(op, DLC_A_AXIS), rank = op->out[0]->type.rank;
        return rank == 2 && (axis == 1 || axis == -1);
    }
    default:
        return false;
    }
}

/* Whether net has a step form: one sequence in, scores at every step out,
 * and only per-step ops between. */
static bool steps_alone(const DlcNetwork *net) {
    if (net->ninputs != 1 || net->noutputs != 1 || net->nops == 0)
        return false;
    const DlcType *in = &net->inputs[0]->type, *out = &net->outputs[0]->type;
    if (!in->batched || in->rank < 1 || in->dims[0] < 2 || out->rank != 2 ||
        out->dims[0] != in->dims[0])
        return false;
    for (int i = 0; i < net->nops; i++)
        if (!per_step(net->ops[i]))
            return false;
    return true;
}

/* NAME.step from net: the same values, by name, at one step. */
static void make_step(DlcCtx *ctx, DlcModule *m, const DlcNetwork *net, const char *name) {
    DlcNetwork *s = dlc_network_new(m, name, net->loc);
    const DlcValue *x = net->inputs[0];
    DlcType one = x->type;
    one.dims[0] = 1;
    dlc_network_add_input(m, s, x->name, one, x->loc);
    for (int i = 0; i < net->nparams; i++) {
        const DlcValue *p = net->params[i];
        dlc_network_add_param(m, s, p->name, p->type, p->init, p->trainable, p->loc)->fan_in =
            p->fan_in;
    }
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        DlcValue *in[64 + DLC_MAX_PARAMS_PER_OP];
        DlcType tensors[64];
        int ntensors = op->nin - op->nparams;
        if (op->nin > 64 + DLC_MAX_PARAMS_PER_OP || ntensors > 64)
            dlc_unreachable("step: %s has %d operands", dlc_op_info(op->kind)->name, op->nin);
        for (int j = 0; j < op->nin; j++) {
            in[j] = dlc_map_get(&s->names, op->in[j]->name);
            if (!in[j])
                dlc_unreachable("step: %s reads %s, which comes after it", op->out[0]->name,
                                op->in[j]->name);
            if (j < ntensors)
                tensors[j] = in[j]->type;
        }
        DlcAttr attrs[DLC_MAX_ATTRS];
        memcpy(attrs, op->attrs, sizeof attrs);
        if (dlc_op_is_recurrent(op->kind)) /* each call goes on from the last */
            dlc_attrs_at(op->kind, attrs, DLC_A_STATEFUL)->b = true;
        DlcInfer inf = {.ctx = ctx, .loc = op->loc, .kind = op->kind, .in = tensors,
                        .nin = ntensors, .attrs = attrs};
        if (!dlc_infer(&inf) || inf.nout != op->nout)
            dlc_unreachable("step: %s does not take one step", dlc_op_info(op->kind)->name);
        const char *names[DLC_MAX_RESULTS];
        for (int r = 0; r < op->nout; r++)
            names[r] = op->out[r]->name;
        if (!dlc_network_add_op(m, s, op->kind, in, op->nin, op->nparams, attrs, inf.out, names,
                                op->nout, op->loc))
            dlc_unreachable("step: a name defined twice");
    }
    dlc_network_add_output(m, s, dlc_map_get(&s->names, net->outputs[0]->name));
}

bool dlc_pass_step(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)opt;
    int n = m->nnetworks;
    for (int i = 0; i < n; i++) {
        const DlcNetwork *net = m->networks[i];
        if (dlc_is_derived_network(net->name) || !steps_alone(net))
            continue;
        const char *name = dlc_arena_printf(&m->arena, "%s.step", net->name);
        if (!dlc_module_find_network(m, name))
            make_step(ctx, m, net, name);
    }
    return true;
}
