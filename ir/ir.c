/* ir.c — the module and its builder.
 *
 * A module owns its networks, their values and ops, and its train sections,
 * all in one arena.  The builder keeps each network's name map current so
 * that names stay unique; it does not check types (the frontend's shape
 * rules and the verifier do). */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

DlcModule *dlc_module_new(DlcCtx *ctx) {
    DlcModule *m = calloc(1, sizeof *m);
    if (!m)
        dlc_unreachable("out of memory");
    m->ctx = ctx;
    return m;
}

void dlc_module_free(DlcModule *m) {
    if (!m)
        return;
    dlc_arena_free(&m->arena);
    free(m);
}

DlcNetwork *dlc_module_find_network(const DlcModule *m, const char *name) {
    for (int i = 0; i < m->nnetworks; i++)
        if (strcmp(m->networks[i]->name, name) == 0)
            return m->networks[i];
    return NULL;
}

/* Whether name is NAME followed by suffix, with NAME's length in *base_len. */
static bool has_suffix(const char *name, const char *suffix, size_t *base_len) {
    size_t len = strlen(name), n = strlen(suffix);
    if (len <= n || strcmp(name + len - n, suffix) != 0)
        return false;
    if (base_len)
        *base_len = len - n;
    return true;
}

bool dlc_is_train_network(const char *name, size_t *base_len) {
    return has_suffix(name, ".train", base_len);
}

bool dlc_is_step_network(const char *name, size_t *base_len) {
    return has_suffix(name, ".step", base_len);
}

bool dlc_is_calib_network(const char *name, size_t *base_len) {
    return has_suffix(name, ".calib", base_len);
}

bool dlc_is_derived_network(const char *name) {
    return dlc_is_train_network(name, NULL) || dlc_is_step_network(name, NULL) ||
           dlc_is_calib_network(name, NULL);
}

DlcNetwork *dlc_network_new(DlcModule *m, const char *name, DlcLoc loc) {
    DlcNetwork *net = dlc_arena_alloc(&m->arena, sizeof *net);
    net->name = dlc_arena_strdup(&m->arena, name);
    net->loc = loc;
    dlc_map_init(&net->names, &m->arena);
    dlc_map_init(&net->suffixes, &m->arena);
    DLC_PUSH(&m->arena, m->networks, m->nnetworks, m->capnetworks, net);
    return net;
}

const char *dlc_network_unique_name(DlcModule *m, DlcNetwork *net,
                                    const char *base) {
    if (!dlc_map_get(&net->names, base))
        return dlc_arena_strdup(&m->arena, base);
    /* remember where numbering stopped so n rebindings cost O(n) */
    intptr_t next = (intptr_t)dlc_map_get(&net->suffixes, base);
    if (next == 0)
        next = 1;
    const char *name;
    do
        name = dlc_arena_printf(&m->arena, "%s.%ld", base, (long)next++);
    while (dlc_map_get(&net->names, name));
    dlc_map_put(&net->suffixes, dlc_arena_strdup(&m->arena, base), (void *)next);
    return name;
}

static DlcValue *new_value(DlcModule *m, DlcNetwork *net, DlcValueKind kind,
                           const char *name, DlcType type, DlcLoc loc) {
    if (dlc_map_get(&net->names, name))
        return NULL;
    DlcValue *v = dlc_arena_alloc(&m->arena, sizeof *v);
    v->kind = kind;
    v->name = dlc_arena_strdup(&m->arena, name);
    v->type = type;
    v->loc = loc;
    dlc_map_put(&net->names, v->name, v);
    return v;
}

DlcValue *dlc_network_add_input(DlcModule *m, DlcNetwork *net,
                                const char *name, DlcType type, DlcLoc loc) {
    DlcValue *v = new_value(m, net, DLC_VAL_INPUT, name, type, loc);
    if (v)
        DLC_PUSH(&m->arena, net->inputs, net->ninputs, net->capinputs, v);
    return v;
}

DlcValue *dlc_network_add_param(DlcModule *m, DlcNetwork *net,
                                const char *name, DlcType type, DlcInit init,
                                bool trainable, DlcLoc loc) {
    DlcValue *v = new_value(m, net, DLC_VAL_PARAM, name, type, loc);
    if (!v)
        return NULL;
    v->init = init;
    v->trainable = trainable;
    DLC_PUSH(&m->arena, net->params, net->nparams, net->capparams, v);
    return v;
}

DlcOp *dlc_network_add_op(DlcModule *m, DlcNetwork *net, DlcOpKind kind,
                          DlcValue **in, int nin, int nparams,
                          const DlcAttr *attrs, const DlcType *out_types,
                          const char *const *out_names, int nout, DlcLoc loc) {
    if (nout > DLC_MAX_RESULTS)
        dlc_unreachable("op with %d results", nout);
    DlcOp *op = dlc_arena_alloc(&m->arena, sizeof *op);
    op->kind = kind;
    op->in = dlc_arena_alloc(&m->arena, (size_t)(nin ? nin : 1) * sizeof *op->in);
    if (nin)
        memcpy(op->in, in, (size_t)nin * sizeof *in);
    op->nin = nin;
    op->nparams = nparams;
    if (attrs)
        memcpy(op->attrs, attrs, sizeof op->attrs);
    op->loc = loc;
    for (int i = 0; i < nout; i++) {
        DlcValue *v = new_value(m, net, DLC_VAL_OP, out_names[i], out_types[i], loc);
        if (!v)
            return NULL;
        v->def = op;
        v->result = i;
        op->out[i] = v;
    }
    op->nout = nout;
    DLC_PUSH(&m->arena, net->ops, net->nops, net->capops, op);
    return op;
}

void dlc_network_add_output(DlcModule *m, DlcNetwork *net, DlcValue *v) {
    DLC_PUSH(&m->arena, net->outputs, net->noutputs, net->capoutputs, v);
}

void dlc_network_reindex(DlcModule *m, DlcNetwork *net) {
    dlc_map_init(&net->names, &m->arena);
    for (int i = 0; i < net->ninputs; i++)
        dlc_map_put(&net->names, net->inputs[i]->name, net->inputs[i]);
    for (int i = 0; i < net->nparams; i++)
        dlc_map_put(&net->names, net->params[i]->name, net->params[i]);
    for (int i = 0; i < net->nops; i++)
        for (int j = 0; j < net->ops[i]->nout; j++)
            dlc_map_put(&net->names, net->ops[i]->out[j]->name, net->ops[i]->out[j]);
}
