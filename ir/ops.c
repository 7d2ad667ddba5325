/* ops.c — the op table, generated from ops.def, and attribute schemas.
 *
 * Each op's schema string is parsed once, the first time the table is used,
 * into DlcAttrSpec entries; a malformed schema is a bug in ops.def and
 * aborts.  The compiler is single-threaded, so the lazily filled table is
 * its one piece of static state, and it never changes after it is filled. */
#include "ir.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

static DlcOpInfo op_table[DLC_OP_COUNT] = {
#define OP(id, name_, arity_, flags_, schema_, infer_, grad, cpu, ptx)         \
    [DLC_OP_##id] = {.name = name_, .arity = arity_, .flags = flags_,         \
                     .schema = schema_, .infer = infer_},
#include "ops.def"
#undef OP
};

static const char *op_names[DLC_OP_COUNT + 1];
static bool table_ready;

/* attrs.def: each attribute's spelling and type */
static const struct {
    const char *name;
    DlcAttrType type;
} attr_names[DLC_A_COUNT] = {
#define ATTR(id, name_, type_) [DLC_A_##id] = {.name = name_, .type = DLC_ATTR_##type_},
#include "attrs.def"
#undef ATTR
};
/* The attrs.def entry spelt name, or DLC_A_COUNT. */
static int attr_named(const char *name) {
    int a = 0;
    while (a < DLC_A_COUNT && strcmp(attr_names[a].name, name) != 0)
        a++;
    return a;
}

/* slot[k][a]: attribute a's index in op k's schema + 1; 0 for none */
static signed char slot[DLC_OP_COUNT][DLC_A_COUNT];

static void parse_default(DlcOpInfo *op, DlcAttrSpec *spec, const char *text) {
    char *end;
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, text) == 0) {
            spec->default_from = i;
            return;
        }
    spec->def.type = spec->type;
    spec->def.set = true;
    switch (spec->type) {
    case DLC_ATTR_INT:
        spec->def.i = strtoll(text, &end, 10);
        break;
    case DLC_ATTR_FLOAT:
        spec->def.f = strtod(text, &end);
        break;
    case DLC_ATTR_PAIR:
        spec->def.pair[0] = spec->def.pair[1] = strtoll(text, &end, 10);
        break;
    case DLC_ATTR_BOOL:
        spec->def.b = strcmp(text, "true") == 0;
        end = (char *)text + (strcmp(text, "true") == 0 || strcmp(text, "false") == 0
                                  ? strlen(text) : 0);
        break;
    }
    if (*end)
        dlc_unreachable("ops.def: bad default '%s' for %s.%s", text, op->name,
                        spec->name);
}

/* Parses "name:type[=default] ..." into op->attrs. */
static void parse_schema(DlcOpInfo *op) {
    static char storage[DLC_OP_COUNT][512];
    char *buf = storage[op - op_table];
    if (strlen(op->schema) >= sizeof storage[0])
        dlc_unreachable("ops.def: schema of %s too long", op->name);
    strcpy(buf, op->schema);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        if (op->nattrs == DLC_MAX_ATTRS)
            dlc_unreachable("ops.def: too many attributes for %s", op->name);
        DlcAttrSpec *spec = &op->attrs[op->nattrs];
        char *colon = strchr(tok, ':');
        if (!colon)
            dlc_unreachable("ops.def: '%s' of %s has no type", tok, op->name);
        *colon = 0;
        char *type = colon + 1, *eq = strchr(type, '=');
        if (eq)
            *eq = 0;
        spec->name = tok;
        spec->default_from = -1;
        if (strcmp(type, "int") == 0)
            spec->type = DLC_ATTR_INT;
        else if (strcmp(type, "float") == 0)
            spec->type = DLC_ATTR_FLOAT;
        else if (strcmp(type, "bool") == 0)
            spec->type = DLC_ATTR_BOOL;
        else if (strcmp(type, "pair") == 0)
            spec->type = DLC_ATTR_PAIR;
        else
            dlc_unreachable("ops.def: unknown type '%s' in %s", type, op->name);
        if (eq)
            parse_default(op, spec, eq + 1);
        else
            spec->required = true;
        int a = attr_named(tok);
        if (a == DLC_A_COUNT || attr_names[a].type != spec->type)
            dlc_unreachable("ops.def: attribute %s of %s is not in attrs.def with that type",
                            tok, op->name);
        spec->id = (DlcAttrName)a;
        slot[op - op_table][a] = (signed char)(op->nattrs + 1);
        op->nattrs++;
    }
}

/* act_attr[k]: for an activation k (dlc_op_is_activation), the attribute
 * that fuses it into an op, spelt as its name */
static DlcAttrName act_attr[DLC_OP_COUNT];

static void init_table(void) {
    if (table_ready)
        return;
    for (int k = 0; k < DLC_OP_COUNT; k++) {
        parse_schema(&op_table[k]);
        op_names[k] = op_table[k].name;
        if (!dlc_op_is_activation((DlcOpKind)k))
            continue;
        int a = attr_named(op_table[k].name);
        if (a == DLC_A_COUNT)
            dlc_unreachable("attrs.def has no attribute %s for the activation fused",
                            op_table[k].name);
        act_attr[k] = (DlcAttrName)a;
    }
    table_ready = true;
}

const DlcOpInfo *dlc_op_info(DlcOpKind k) {
    init_table();
    if ((unsigned)k >= DLC_OP_COUNT)
        dlc_unreachable("bad op kind %d", (int)k);
    return &op_table[k];
}

DlcOpKind dlc_op_lookup(const char *name) {
    init_table();
    for (int k = 0; k < DLC_OP_COUNT; k++)
        if (strcmp(op_table[k].name, name) == 0)
            return (DlcOpKind)k;
    return DLC_OP_COUNT;
}

int dlc_op_attr_index(DlcOpKind k, const char *name) {
    const DlcOpInfo *op = dlc_op_info(k);
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return i;
    return -1;
}

const char *dlc_attr_name(DlcAttrName a) {
    if ((unsigned)a >= DLC_A_COUNT)
        dlc_unreachable("bad attribute name %d", (int)a);
    return attr_names[a].name;
}

int dlc_op_attr_slot(DlcOpKind k, DlcAttrName a) {
    dlc_op_info(k);
    if ((unsigned)a >= DLC_A_COUNT)
        dlc_unreachable("bad attribute name %d", (int)a);
    return slot[k][a] - 1;
}

DlcAttr *dlc_attrs_at(DlcOpKind k, DlcAttr *attrs, DlcAttrName a) {
    int i = dlc_op_attr_slot(k, a);
    if (i < 0)
        dlc_unreachable("%s has no attribute %s", op_table[k].name, attr_names[a].name);
    return &attrs[i];
}

/* op's attribute a, which must be of type t */
static const DlcAttr *attr_of(const DlcOp *op, DlcAttrName a, DlcAttrType t) {
    int i = dlc_op_attr_slot(op->kind, a);
    if (i < 0 || op_table[op->kind].attrs[i].type != t)
        dlc_unreachable("%s has no attribute %s of that type", op_table[op->kind].name,
                        attr_names[a].name);
    return &op->attrs[i];
}

int64_t dlc_attr_int(const DlcOp *op, DlcAttrName a) { return attr_of(op, a, DLC_ATTR_INT)->i; }
double dlc_attr_float(const DlcOp *op, DlcAttrName a) { return attr_of(op, a, DLC_ATTR_FLOAT)->f; }
bool dlc_attr_bool(const DlcOp *op, DlcAttrName a) { return attr_of(op, a, DLC_ATTR_BOOL)->b; }
const int64_t *dlc_attr_pair(const DlcOp *op, DlcAttrName a) {
    return attr_of(op, a, DLC_ATTR_PAIR)->pair;
}

bool dlc_attr_true(DlcOpKind k, const DlcAttr *attrs, DlcAttrName a) {
    int i = dlc_op_attr_slot(k, a);
    return i >= 0 && attrs[i].b;
}

bool dlc_attr_is_tile_choice(DlcAttrName a) {
    return a == DLC_A_TILE || a == DLC_A_VECTOR || a == DLC_A_FILTER_LANES ||
           a == DLC_A_SCATTER || a == DLC_A_BAND;
}

void dlc_attrs_like(DlcOpKind kind, DlcOpKind from, const DlcAttr *from_attrs, DlcAttr *out) {
    memset(out, 0, sizeof(DlcAttr) * DLC_MAX_ATTRS);
    const DlcOpInfo *info = dlc_op_info(kind);
    for (int i = 0; i < info->nattrs; i++) {
        int j = dlc_op_attr_slot(from, info->attrs[i].id);
        if (j >= 0 && !dlc_attr_is_tile_choice(info->attrs[i].id))
            out[i] = from_attrs[j];
    }
}

DlcOpKind dlc_recurrent_cell(DlcOpKind k) {
    if (dlc_op_is_recurrent(k))
        return k;
    if (dlc_op_is_recurrent_train(k))
        return (DlcOpKind)(DLC_OP_RNN + (k - DLC_OP_RNN_TRAIN));
    if (dlc_op_is_recurrent_grad(k))
        return (DlcOpKind)(DLC_OP_RNN + (k - DLC_OP_RNN_GRAD));
    return DLC_OP_COUNT;
}

/* the three forms list the cells in one order */
_Static_assert(DLC_OP_RNN_RELU_TRAIN - DLC_OP_RNN_TRAIN == DLC_OP_RNN_RELU - DLC_OP_RNN &&
               DLC_OP_LSTM_TRAIN - DLC_OP_RNN_TRAIN == DLC_OP_LSTM - DLC_OP_RNN &&
               DLC_OP_GRU_TRAIN - DLC_OP_RNN_TRAIN == DLC_OP_GRU - DLC_OP_RNN &&
               DLC_OP_RNN_RELU_GRAD - DLC_OP_RNN_GRAD == DLC_OP_RNN_RELU - DLC_OP_RNN &&
               DLC_OP_LSTM_GRAD - DLC_OP_RNN_GRAD == DLC_OP_LSTM - DLC_OP_RNN &&
               DLC_OP_GRU_GRAD - DLC_OP_RNN_GRAD == DLC_OP_GRU - DLC_OP_RNN,
               "ops.def: rnn, rnn_relu, lstm, gru in one order in each form");

int dlc_recurrent_gates(DlcOpKind cell) {
    return cell == DLC_OP_LSTM ? 4 : cell == DLC_OP_GRU ? 3 : 1;
}

int dlc_recurrent_cache(DlcOpKind cell) {
    return cell == DLC_OP_LSTM ? 5 : cell == DLC_OP_GRU ? 4 : 1;
}

bool dlc_argmax_indexes_planes(const DlcType *x) {
    return x->dims[1] * x->dims[2] <= INT32_MAX;
}

/* maxpool_grad and lrn_grad read the ReLU's result as their x already,
 * and maxpool_train its only operand */
static bool relu_grad_from_x(DlcOpKind k) {
    return k == DLC_OP_MAXPOOL_GRAD || k == DLC_OP_LRN_GRAD || k == DLC_OP_MAXPOOL_TRAIN;
}

bool dlc_relu_grad_operand(DlcOpKind k, const DlcAttr *attrs) {
    return !relu_grad_from_x(k) && dlc_attr_true(k, attrs, DLC_A_RELU_GRAD);
}

int dlc_op_relu_grad_mask(const DlcOp *op) {
    if (!dlc_attr_true(op->kind, op->attrs, DLC_A_RELU_GRAD))
        return -1;
    if (relu_grad_from_x(op->kind))
        return op->kind == DLC_OP_MAXPOOL_TRAIN ? 0 : 1;
    return op->nin - op->nparams - 1;
}

/* op's axis attribute, counted from the front for a type of rank rank */
static int64_t axis_of(const DlcOp *op, int rank) {
    int64_t axis = dlc_attr_int(op, DLC_A_AXIS);
    return axis < 0 ? axis + rank : axis;
}

DlcValue *dlc_concat_operand_sliced(const DlcOp *concat, const DlcOp *slice) {
    const DlcType *whole = &slice->in[0]->type;
    int64_t axis = axis_of(slice, whole->rank), at = 0;
    if (!dlc_type_eq(&concat->out[0]->type, whole) || axis_of(concat, whole->rank) != axis)
        return NULL;
    int64_t begin = dlc_attr_int(slice, DLC_A_BEGIN);
    for (int k = 0; k < concat->nin; k++) {
        if (at == begin && dlc_type_eq(&concat->in[k]->type, &slice->out[0]->type))
            return concat->in[k];
        at += concat->in[k]->type.dims[axis];
    }
    return NULL;
}

/* An activation (dlc_op_is_activation) fused into an op is the op's bool
 * attribute spelt as the activation's name, which attrs.def declares. */
DlcAttrName dlc_activation_attr(DlcOpKind act) {
    if (!dlc_op_is_activation(act))
        dlc_unreachable("%s is not an activation", dlc_op_info(act)->name);
    init_table();
    return act_attr[act];
}

DlcOpKind dlc_op_fused_activation(const DlcOp *op) {
    for (int k = DLC_OP_RELU; dlc_op_is_activation((DlcOpKind)k); k++)
        if (dlc_attr_true(op->kind, op->attrs, dlc_activation_attr((DlcOpKind)k)))
            return (DlcOpKind)k;
    return DLC_OP_COUNT;
}

bool dlc_op_fused_relu(const DlcOp *op) { return dlc_op_fused_activation(op) == DLC_OP_RELU; }

const DlcValue *dlc_op_bias(const DlcOp *op) {
    if (!dlc_attr_true(op->kind, op->attrs, DLC_A_BIAS) ||
        (op->kind != DLC_OP_CONV2D && op->kind != DLC_OP_DENSE))
        return NULL;
    return op->in[op->nin - op->nparams + 1]; /* after the weight */
}

int dlc_op_folded_batchnorm(const DlcOp *op) {
    return dlc_attr_true(op->kind, op->attrs, DLC_A_BATCHNORM) ? op->nin - 4 : -1;
}

bool dlc_conv_is_pointwise(const DlcOp *op) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD);
    return k[0] == 1 && k[1] == 1 && s[0] == 1 && s[1] == 1 && p[0] == 0 && p[1] == 0;
}

bool dlc_op_reads(const DlcOp *op, const DlcValue *v) {
    for (int j = 0; j < op->nin; j++)
        if (op->in[j] == v)
            return true;
    return false;
}

bool dlc_op_in_place(const DlcOp *op) {
    return (dlc_op_info(op->kind)->flags & DLC_OPF_ELEMWISE) || op->kind == DLC_OP_FLATTEN ||
           op->kind == DLC_OP_RESHAPE || op->kind == DLC_OP_CLIP_SCALE ||
           (op->kind == DLC_OP_CONV2D && dlc_attr_bool(op, DLC_A_RESIDUAL) &&
            op->in[1] != op->in[0]); /* every result reads the whole source */
}

void dlc_conv_images(const DlcOp *op, const DlcType **x, const DlcType **y) {
    *x = op->kind == DLC_OP_CONV2D ? &op->in[0]->type
         : op->kind == DLC_OP_CONV2D_GRAD_INPUT ? &op->out[0]->type
                                                : &op->in[1]->type;
    *y = op->kind == DLC_OP_CONV2D ? &op->out[0]->type : &op->in[0]->type;
}

bool dlc_conv_product(const DlcOp *op, DlcConvProduct *p) {
    const DlcType *x, *y;
    dlc_conv_images(op, &x, &y);
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *pad = dlc_attr_pair(op, DLC_A_PAD),
                  *d = dlc_attr_pair(op, DLC_A_DILATION);
    if (op->kind != DLC_OP_CONV2D_GRAD_INPUT) {
        *p = (DlcConvProduct){y->dims[0], x->dims[0], x->dims[1], x->dims[2],
                              pad[0], pad[1], y->dims[1], y->dims[2]};
        return true;
    }
    *p = (DlcConvProduct){x->dims[0], y->dims[0], y->dims[1], y->dims[2],
                          (k[0] - 1) * d[0] - pad[0], (k[1] - 1) * d[1] - pad[1],
                          x->dims[1], x->dims[2]};
    return p->ph >= 0 && p->pw >= 0;
}

const char *const *dlc_op_names(void) {
    init_table();
    return op_names;
}

int dlc_op_fill_defaults(DlcOpKind k, DlcAttr *attrs) {
    const DlcOpInfo *op = dlc_op_info(k);
    int missing = -1;
    for (int i = 0; i < op->nattrs; i++) {
        const DlcAttrSpec *spec = &op->attrs[i];
        attrs[i].type = spec->type;
        if (attrs[i].set)
            continue;
        if (spec->required) {
            if (missing < 0)
                missing = i;
        } else if (spec->default_from >= 0) {
            /* schemas list the source attribute first, so it is filled */
            attrs[i] = attrs[spec->default_from];
        } else {
            attrs[i] = spec->def;
        }
    }
    return missing;
}

static bool attr_eq(const DlcAttr *a, const DlcAttr *b) {
    switch (a->type) {
    case DLC_ATTR_INT: return a->i == b->i;
    case DLC_ATTR_FLOAT: return a->f == b->f;
    case DLC_ATTR_BOOL: return a->b == b->b;
    case DLC_ATTR_PAIR: return a->pair[0] == b->pair[0] && a->pair[1] == b->pair[1];
    }
    return false;
}

bool dlc_op_attr_is_default(DlcOpKind k, const DlcAttr *attrs, int i) {
    const DlcAttrSpec *spec = &dlc_op_info(k)->attrs[i];
    if (spec->required)
        return false;
    if (spec->default_from >= 0)
        return attr_eq(&attrs[i], &attrs[spec->default_from]);
    return attr_eq(&attrs[i], &spec->def);
}
