/* elaborate.c — from the syntax tree to IR.
 *
 * Elaboration runs each network's body as a compile-time program: integer,
 * float, boolean, string and list values are computed on the spot; `repeat`
 * and `if` are executed; blocks are expanded at every call with a scope of
 * their own; and each call of an op runs the op's shape rule and appends the
 * op to the network.  What is left is straight-line IR in which every shape
 * is known.
 *
 * Names.  A binding `x = ...` names the values its right-hand side creates
 * (%x, %x.1, ... inside a block instance %inst.x) and the layers (ops with
 * parameters, and block instances) it creates: the first is `x`, later ones
 * in the same scope `x_2`, `x_3`, ...; `return` names them `out`.  A layer's
 * parameters are @path.layer.role (`@inc3a.b_2.weight`), where the path is
 * the chain of block instances.  `name="..."` on a call overrides the layer
 * name.  docs/language.md states these rules for users.
 *
 * Errors do not stop elaboration: a failed expression yields a poison value
 * that silences the errors it would cause further on. */
#include "frontend.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parser.h" /* token codes of operators */

enum {
    MAX_BLOCK_DEPTH = 64,          /* nested block expansions */
    MAX_EXPR_DEPTH = 500,          /* nested expressions */
    MAX_REPEAT = 1000000,          /* iterations of one repeat */
    DEFAULT_MAX_STEPS = 10000000,  /* statements executed per compilation */
    DEFAULT_MAX_OPS = 2000000,     /* ops per network */
    MAX_IMPORT_DEPTH = 32,
};

/* ---- compile-time values ------------------------------------------------ */

typedef enum EvKind {
    EV_POISON, /* the result of an error: using it reports nothing more */
    EV_INT,
    EV_FLOAT,
    EV_BOOL,
    EV_STR,
    EV_LIST,   /* also the several results of a block */
    EV_TENSOR,
} EvKind;

typedef struct Ev {
    EvKind kind;
    int64_t i;         /* EV_INT */
    double f;          /* EV_FLOAT */
    bool b;            /* EV_BOOL */
    const char *s;     /* EV_STR */
    struct Ev *items;  /* EV_LIST */
    int n;
    DlcValue *t;       /* EV_TENSOR */
} Ev;

static const Ev poison = {EV_POISON, 0, 0, 0, NULL, NULL, 0, NULL};

typedef struct Binding {
    const char *name;
    Ev val;
    DlcLoc loc;
    bool used;
    bool replaced;     /* a later binding took the name */
    bool is_param;     /* a block parameter or network input */
    bool implicit;     /* made for an unknown name, to silence its later uses */
} Binding;

/* A network body or a block instance: its variables and layer names. */
typedef struct Scope {
    DlcMap vars;           /* name -> Binding* (the current one) */
    Binding **all;         /* every binding made, in order, for warnings */
    int nall, capall;
    const char *path;      /* "" for a network, else the instance's layer name */
    DlcMap layer_counts;   /* binding name -> layers named after it (intptr_t) */
    const AstDecl *block;  /* the block being expanded, or NULL */
} Scope;

typedef struct Elab {
    DlcCtx *ctx;
    DlcModule *m;
    DlcArena *arena;       /* AST and elaboration temporaries */
    DlcMap blocks;         /* name -> AstDecl* */
    DlcNetwork *net;       /* being built */
    DlcMap layers;         /* full layer name -> (void*)1, per network */
    Scope *scope;
    const char *bind_name; /* names what the current statement creates */
    const char *piece_of;  /* the layer name the ops being made share (the
                              pieces of a stacked recurrent layer), or NULL */
    int block_depth, expr_depth;
    long steps;
    long max_steps, max_ops; /* the limits in force */
    bool stop;             /* a limit was hit: unwind without more errors */
    DlcMap warned;         /* "file:line:col" of warnings given (blocks repeat) */
} Elab;

static Ev eval(Elab *e, AstNode *n);
static bool want_bool(Elab *e, AstNode *n, bool *out);
static void exec_stmts(Elab *e, const AstNodes *stmts);

static const char *ev_kind_name(const Ev *v) {
    switch (v->kind) {
    case EV_POISON: return "an invalid value";
    case EV_INT: return "an integer";
    case EV_FLOAT: return "a float";
    case EV_BOOL: return "a boolean";
    case EV_STR: return "a string";
    case EV_LIST: return "a list";
    case EV_TENSOR: return "a tensor";
    }
    return "?";
}

static Ev ev_int(int64_t i) { Ev v = poison; v.kind = EV_INT; v.i = i; return v; }
static Ev ev_float(double f) { Ev v = poison; v.kind = EV_FLOAT; v.f = f; return v; }
static Ev ev_bool(bool b) { Ev v = poison; v.kind = EV_BOOL; v.b = b; return v; }
static Ev ev_tensor(DlcValue *t) { Ev v = poison; v.kind = EV_TENSOR; v.t = t; return v; }

static bool is_number(const Ev *v) { return v->kind == EV_INT || v->kind == EV_FLOAT; }
static double as_double(const Ev *v) { return v->kind == EV_INT ? (double)v->i : v->f; }

/* ---- scopes and names --------------------------------------------------- */

static Scope *scope_new(Elab *e, const char *path, const AstDecl *block) {
    Scope *s = dlc_arena_alloc(e->arena, sizeof *s);
    dlc_map_init(&s->vars, e->arena);
    dlc_map_init(&s->layer_counts, e->arena);
    s->path = path;
    s->block = block;
    return s;
}

static const char *join(Elab *e, const char *path, const char *name) {
    return *path ? dlc_arena_printf(e->arena, "%s.%s", path, name) : name;
}

/* Warns once per source location: a block expanded many times would
 * otherwise repeat each of its warnings. */
static void warn_once(Elab *e, DlcLoc loc, const char *fmt, const char *a,
                      const char *b) {
    const char *key = dlc_arena_printf(e->arena, "%d:%d:%d", loc.file, loc.line, loc.col);
    if (dlc_map_get(&e->warned, key))
        return;
    dlc_map_put(&e->warned, key, (void *)1);
    dlc_warning(e->ctx, loc, fmt, a, b);
}

static void warn_if_unused(Elab *e, const Binding *b) {
    if (b->used || b->name[0] == '_' || e->stop)
        return;
    if (b->is_param && e->scope->block)
        warn_once(e, b->loc, "parameter '%s' of block '%s' is never used", b->name,
                  e->scope->block->name);
    else if (b->is_param)
        warn_once(e, b->loc, "input '%s' is never used%s", b->name, "");
    else if (b->val.kind == EV_TENSOR)
        warn_once(e, b->loc, "value '%s' is computed but never used%s", b->name, "");
}

static void bind(Elab *e, const char *name, Ev val, DlcLoc loc, bool is_param) {
    Binding *old = dlc_map_get(&e->scope->vars, name);
    if (old) {
        /* the old value is gone: say so if it was never used, then reuse
           the binding, so that a loop rebinding a name does not grow memory */
        warn_if_unused(e, old);
        *old = (Binding){.name = name, .val = val, .loc = loc, .is_param = is_param};
        return;
    }
    Binding *b = dlc_arena_alloc(e->arena, sizeof *b);
    b->name = name;
    b->val = val;
    b->loc = loc;
    b->is_param = is_param;
    dlc_map_put(&e->scope->vars, name, b);
    DLC_PUSH(e->arena, e->scope->all, e->scope->nall, e->scope->capall, b);
}

static void warn_unused_in_scope(Elab *e) {
    for (int i = 0; i < e->scope->nall; i++)
        if (!e->scope->all[i]->replaced)
            warn_if_unused(e, e->scope->all[i]);
}

/* The name of a new layer (an op with parameters or a block instance):
 * `override` if given, else the binding's name numbered within the scope. */
static const char *layer_name(Elab *e, const char *override, DlcLoc loc) {
    Scope *s = e->scope;
    if (override) {
        const char *full = join(e, s->path, override);
        if (dlc_map_get(&e->layers, full)) {
            dlc_error(e->ctx, loc, "layer name '%s' is already used in this network", full);
            return NULL;
        }
        dlc_map_put(&e->layers, full, (void *)1);
        return full;
    }
    const char *base = e->bind_name;
    intptr_t count = (intptr_t)dlc_map_get(&s->layer_counts, base);
    const char *full;
    do {
        count++;
        const char *name = count == 1 ? base : dlc_arena_printf(e->arena, "%s_%ld", base, (long)count);
        full = join(e, s->path, name);
    } while (dlc_map_get(&e->layers, full));
    dlc_map_put(&s->layer_counts, base, (void *)count);
    dlc_map_put(&e->layers, full, (void *)1);
    return full;
}

/* Candidate names for "did you mean": the variables in scope. */
static int scope_names(Elab *e, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < e->scope->nall && n < max; i++)
        if (!e->scope->all[i]->replaced && !e->scope->all[i]->implicit)
            out[n++] = e->scope->all[i]->name;
    return n;
}

static bool check_limits(Elab *e, DlcLoc loc) {
    if (e->stop)
        return false;
    if (++e->steps > e->max_steps) {
        dlc_error(e->ctx, loc,
                  "elaboration executed more than %ld statements; is a repeat count too large?",
                  e->max_steps);
        e->stop = true;
        return false;
    }
    if (e->net && e->net->nops > e->max_ops) {
        dlc_error(e->ctx, loc, "network '%s' has more than %ld ops", e->net->name, e->max_ops);
        e->stop = true;
        return false;
    }
    return true;
}

/* ---- operators ---------------------------------------------------------- */

static const char *op_spelling(int op) {
    switch (op) {
    case OR: return "or";
    case AND: return "and";
    case NOT: return "not";
    case EQ: return "==";
    case NE: return "!=";
    case LE: return "<=";
    case GE: return ">=";
    }
    static const char *const chars[] = {"+", "-", "*", "/", "%", "<", ">"};
    const char *p = strchr("+-*/%<>", op);
    return p && op ? chars[p - "+-*/%<>"] : "?";
}

static DlcValue *make_op(Elab *e, DlcOpKind kind, DlcValue **tensors, int ntensors,
                         DlcAttr *attrs, const char *override, DlcLoc loc);

static Ev arith_int(Elab *e, int op, int64_t a, int64_t b, DlcLoc loc) {
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
    case '+': overflow = __builtin_add_overflow(a, b, &r); break;
    case '-': overflow = __builtin_sub_overflow(a, b, &r); break;
    case '*': overflow = __builtin_mul_overflow(a, b, &r); break;
    case '/':
    case '%':
        if (b == 0) {
            dlc_error(e->ctx, loc, "integer %s by zero", op == '/' ? "division" : "remainder");
            return poison;
        }
        if (a == INT64_MIN && b == -1) {
            overflow = op == '/'; /* the remainder is 0 */
            break;
        }
        r = op == '/' ? a / b : a % b;
        break;
    }
    if (overflow) {
        dlc_error(e->ctx, loc, "integer overflow in '%s'", op_spelling(op));
        return poison;
    }
    return ev_int(r);
}

static Ev compare(int op, double a, double b) {
    switch (op) {
    case EQ: return ev_bool(a == b);
    case NE: return ev_bool(a != b);
    case '<': return ev_bool(a < b);
    case LE: return ev_bool(a <= b);
    case '>': return ev_bool(a > b);
    default: return ev_bool(a >= b);
    }
}

static bool ev_equal(const Ev *a, const Ev *b) {
    if (is_number(a) && is_number(b))
        return a->kind == EV_INT && b->kind == EV_INT ? a->i == b->i
                                                      : as_double(a) == as_double(b);
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case EV_BOOL: return a->b == b->b;
    case EV_STR: return strcmp(a->s, b->s) == 0;
    case EV_TENSOR: return a->t == b->t;
    case EV_LIST:
        if (a->n != b->n)
            return false;
        for (int i = 0; i < a->n; i++)
            if (!ev_equal(&a->items[i], &b->items[i]))
                return false;
        return true;
    default: return false;
    }
}

static Ev eval_binary(Elab *e, AstNode *n) {
    int op = n->op;
    if (op == AND || op == OR) {
        Ev a = eval(e, n->a);
        if (a.kind == EV_POISON)
            return poison;
        if (a.kind != EV_BOOL) {
            dlc_error(e->ctx, n->a->loc, "'%s' needs booleans, got %s", op_spelling(op),
                      ev_kind_name(&a));
            return poison;
        }
        if (op == AND ? !a.b : a.b)
            return a; /* short-circuit */
        Ev b = eval(e, n->b);
        if (b.kind == EV_POISON)
            return poison;
        if (b.kind != EV_BOOL) {
            dlc_error(e->ctx, n->b->loc, "'%s' needs booleans, got %s", op_spelling(op),
                      ev_kind_name(&b));
            return poison;
        }
        return b;
    }
    Ev a = eval(e, n->a), b = eval(e, n->b);
    if (a.kind == EV_POISON || b.kind == EV_POISON)
        return poison;
    if (op == EQ || op == NE) {
        bool eq = ev_equal(&a, &b);
        return ev_bool(op == EQ ? eq : !eq);
    }
    if (a.kind == EV_TENSOR && b.kind == EV_TENSOR && op == '+') {
        DlcValue *in[2] = {a.t, b.t};
        DlcValue *r = make_op(e, DLC_OP_ADD, in, 2, NULL, NULL, n->loc);
        return r ? ev_tensor(r) : poison;
    }
    if (!is_number(&a) || !is_number(&b)) {
        bool tensors = a.kind == EV_TENSOR || b.kind == EV_TENSOR;
        dlc_error(e->ctx, n->loc, "cannot apply '%s' to %s and %s%s", op_spelling(op),
                  ev_kind_name(&a), ev_kind_name(&b),
                  tensors ? " (between tensors only '+' is defined)" : "");
        return poison;
    }
    if (op == '<' || op == LE || op == '>' || op == GE)
        return compare(op, as_double(&a), as_double(&b));
    if (a.kind == EV_INT && b.kind == EV_INT)
        return arith_int(e, op, a.i, b.i, n->loc);
    double x = as_double(&a), y = as_double(&b), r;
    switch (op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/':
        if (y == 0) {
            dlc_error(e->ctx, n->loc, "division by zero");
            return poison;
        }
        r = x / y;
        break;
    default:
        dlc_error(e->ctx, n->loc, "'%%' needs integers");
        return poison;
    }
    if (!isfinite(r)) {
        dlc_error(e->ctx, n->loc, "floating-point overflow in '%s'", op_spelling(op));
        return poison;
    }
    return ev_float(r);
}

static Ev eval_unary(Elab *e, AstNode *n) {
    Ev a = eval(e, n->a);
    if (a.kind == EV_POISON)
        return poison;
    if (n->op == NOT) {
        if (a.kind != EV_BOOL) {
            dlc_error(e->ctx, n->loc, "'not' needs a boolean, got %s", ev_kind_name(&a));
            return poison;
        }
        return ev_bool(!a.b);
    }
    if (a.kind == EV_INT) {
        if (a.i == INT64_MIN) {
            dlc_error(e->ctx, n->loc, "integer overflow in '-'");
            return poison;
        }
        return ev_int(-a.i);
    }
    if (a.kind == EV_FLOAT)
        return ev_float(-a.f);
    dlc_error(e->ctx, n->loc, "cannot negate %s", ev_kind_name(&a));
    return poison;
}

/* ---- shape queries and indexing ---------------------------------------- */

static Ev eval_member(Elab *e, AstNode *n) {
    static const char *const members[] = {"channels", "height", "width", "shape",
                                          "rank", "size"};
    Ev a = eval(e, n->a);
    if (a.kind == EV_POISON)
        return poison;
    if (a.kind != EV_TENSOR) {
        dlc_error(e->ctx, n->sloc, "'.%s' needs a tensor, got %s", n->s, ev_kind_name(&a));
        return poison;
    }
    const DlcType *t = &a.t->type;
    char buf[DLC_TYPE_STR_MAX];
    int dim = strcmp(n->s, "channels") == 0 ? 0
              : strcmp(n->s, "height") == 0 ? 1
              : strcmp(n->s, "width") == 0  ? 2 : -1;
    if (dim >= 0) {
        if (t->rank != 3) {
            dlc_error(e->ctx, n->sloc, "'.%s' needs a [C,H,W] image tensor, got %s", n->s,
                      dlc_type_str(t, buf, sizeof buf));
            return poison;
        }
        return ev_int(t->dims[dim]);
    }
    if (strcmp(n->s, "rank") == 0)
        return ev_int(t->rank);
    if (strcmp(n->s, "size") == 0)
        return ev_int(dlc_type_numel(t));
    if (strcmp(n->s, "shape") == 0) {
        Ev v = poison;
        v.kind = EV_LIST;
        v.n = t->rank;
        v.items = dlc_arena_alloc(e->arena, sizeof(Ev) * (size_t)(t->rank + 1));
        for (int i = 0; i < t->rank; i++)
            v.items[i] = ev_int(t->dims[i]);
        return v;
    }
    const char *guess = dlc_closest(n->s, members, 6);
    if (guess)
        dlc_error(e->ctx, n->sloc, "tensors have no '.%s'; did you mean '.%s'?", n->s, guess);
    else
        dlc_error(e->ctx, n->sloc,
                  "tensors have no '.%s' (they have .channels, .height, .width, .shape, "
                  ".rank and .size)", n->s);
    return poison;
}

static Ev eval_index(Elab *e, AstNode *n) {
    Ev a = eval(e, n->a), i = eval(e, n->b);
    if (a.kind == EV_POISON || i.kind == EV_POISON)
        return poison;
    if (a.kind != EV_LIST) {
        dlc_error(e->ctx, n->loc, "cannot index %s", ev_kind_name(&a));
        return poison;
    }
    if (i.kind != EV_INT) {
        dlc_error(e->ctx, n->b->loc, "an index must be an integer, got %s", ev_kind_name(&i));
        return poison;
    }
    int64_t k = i.i < 0 ? i.i + a.n : i.i;
    if (k < 0 || k >= a.n) {
        dlc_error(e->ctx, n->b->loc, "index %lld is out of range for a list of %d",
                  (long long)i.i, a.n);
        return poison;
    }
    return a.items[k];
}

/* ---- op calls ----------------------------------------------------------- */

/* Converts a compile-time value to attribute i of op kind. */
static bool to_attr(Elab *e, DlcOpKind kind, int i, const Ev *v, DlcLoc loc, DlcAttr *out) {
    const DlcAttrSpec *spec = &dlc_op_info(kind)->attrs[i];
    const char *op = dlc_op_info(kind)->name;
    out->type = spec->type;
    out->set = true;
    switch (spec->type) {
    case DLC_ATTR_INT:
        if (v->kind == EV_INT) {
            out->i = v->i;
            return true;
        }
        dlc_error(e->ctx, loc, "%s: '%s' must be an integer, got %s", op, spec->name,
                  ev_kind_name(v));
        return false;
    case DLC_ATTR_FLOAT:
        if (is_number(v)) {
            out->f = as_double(v);
            return true;
        }
        dlc_error(e->ctx, loc, "%s: '%s' must be a number, got %s", op, spec->name,
                  ev_kind_name(v));
        return false;
    case DLC_ATTR_BOOL:
        if (v->kind == EV_BOOL) {
            out->b = v->b;
            return true;
        }
        dlc_error(e->ctx, loc, "%s: '%s' must be true or false, got %s", op, spec->name,
                  ev_kind_name(v));
        return false;
    case DLC_ATTR_PAIR:
        if (v->kind == EV_INT) {
            out->pair[0] = out->pair[1] = v->i;
            return true;
        }
        if (v->kind == EV_LIST && v->n == 2 && v->items[0].kind == EV_INT &&
            v->items[1].kind == EV_INT) {
            out->pair[0] = v->items[0].i;
            out->pair[1] = v->items[1].i;
            return true;
        }
        dlc_error(e->ctx, loc,
                  "%s: '%s' must be an integer or a list of two integers [height, width], got %s",
                  op, spec->name, ev_kind_name(v));
        return false;
    }
    return false;
}

/* Runs the shape rule and appends the op; returns its (first) result. */
static DlcValue *make_op(Elab *e, DlcOpKind kind, DlcValue **tensors, int ntensors,
                         DlcAttr *given, const char *override, DlcLoc loc) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    memset(attrs, 0, sizeof attrs);
    if (given)
        memcpy(attrs, given, sizeof attrs);
    const DlcOpInfo *info = dlc_op_info(kind);
    int missing = dlc_op_fill_defaults(kind, attrs);
    if (missing >= 0) {
        dlc_error(e->ctx, loc, "%s: missing argument '%s'", info->name,
                  info->attrs[missing].name);
        return NULL;
    }
    DlcType in[64];
    if (ntensors > 64) {
        dlc_error(e->ctx, loc, "%s: too many operands (%d)", info->name, ntensors);
        return NULL;
    }
    for (int i = 0; i < ntensors; i++)
        in[i] = tensors[i]->type;
    DlcInfer inf = {.ctx = e->ctx, .loc = loc, .kind = kind, .in = in, .nin = ntensors,
                    .attrs = attrs};
    if (!dlc_infer(&inf))
        return NULL;

    DlcValue *operands[64 + DLC_MAX_PARAMS_PER_OP];
    memcpy(operands, tensors, (size_t)ntensors * sizeof *tensors);
    if (inf.nparams) {
        const char *layer = e->piece_of ? e->piece_of : layer_name(e, override, loc);
        if (!layer)
            return NULL;
        for (int i = 0; i < inf.nparams; i++) {
            const char *pname = dlc_arena_printf(e->arena, "%s.%s", layer, inf.params[i].role);
            DlcValue *p = dlc_network_add_param(e->m, e->net, pname, inf.params[i].type,
                                                inf.params[i].init,
                                                inf.params[i].trainable, loc);
            if (!p) {
                dlc_error(e->ctx, loc, "parameter name '%s' is already used", pname);
                return NULL;
            }
            p->fan_in = inf.params[i].fan_in;
            operands[ntensors + i] = p;
        }
    } else if (override) {
        dlc_error(e->ctx, loc, "%s has no parameters, so 'name' does not apply", info->name);
        return NULL;
    }
    const char *names[DLC_MAX_RESULTS];
    const char *base = join(e, e->scope->path, e->bind_name);
    for (int i = 0; i < inf.nout; i++)
        names[i] = dlc_network_unique_name(e->m, e->net, base);
    DlcOp *op = dlc_network_add_op(e->m, e->net, kind, operands, ntensors + inf.nparams,
                                   inf.nparams, attrs, inf.out, names, inf.nout, loc);
    if (!op)
        dlc_unreachable("result name clash in %s", e->net->name);
    return op->out[0];
}

/* attrs (indexed by kind's schema) with attribute a set to v */
static void set_attr(DlcOpKind kind, DlcAttr *attrs, DlcAttrName a, DlcAttr v) {
    DlcAttr *at = dlc_attrs_at(kind, attrs, a);
    v.type = at->type;
    v.set = true;
    *at = v;
}

/* A recurrent layer as torch.nn.LSTM takes it (layers=L, bidirectional,
 * dropout=p; with a second operand, each sequence's length, as packed
 * sequences give it) made of the ops the IR has, one per layer and direction: the
 * pieces' parameters are all the call's layer's, told apart by layer=K
 * and reverse=true (@h.weight_ih_l1_reverse, PyTorch's names); a
 * bidirectional layer's two results are concatenated along the features
 * (with last=true, the two final states), and dropout comes between
 * layers, as PyTorch applies it.  Returns the last piece's result. */
static DlcValue *make_recurrent(Elab *e, DlcOpKind kind, DlcValue *x, DlcValue *lengths,
                                DlcAttr *given, const char *override, DlcLoc loc) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    memcpy(attrs, given, sizeof attrs);
    const char *name = dlc_op_info(kind)->name;
    if (lengths) /* the second operand: each sequence's length */
        set_attr(kind, given, DLC_A_LENGTHS, (DlcAttr){.b = true});
    DlcValue *operands[2] = {x, lengths};
    int n = lengths ? 2 : 1;
    if (dlc_op_fill_defaults(kind, attrs) >= 0) /* reported by make_op */
        return make_op(e, kind, operands, n, given, override, loc);
    if (lengths)
        set_attr(kind, attrs, DLC_A_LENGTHS, (DlcAttr){.b = true});
    int64_t layers = dlc_attrs_at(kind, attrs, DLC_A_LAYERS)->i;
    bool bidirectional = dlc_attrs_at(kind, attrs, DLC_A_BIDIRECTIONAL)->b;
    bool last = dlc_attrs_at(kind, attrs, DLC_A_LAST)->b;
    double p = dlc_attrs_at(kind, attrs, DLC_A_DROPOUT)->f;
    int64_t first = dlc_attrs_at(kind, attrs, DLC_A_LAYER)->i;
    if (layers < 1 || layers > 100) {
        dlc_error(e->ctx, loc, "%s: layers must be between 1 and 100, got %lld", name,
                  (long long)layers);
        return NULL;
    }
    if (!(p >= 0 && p < 1)) {
        dlc_error(e->ctx, loc, "%s: dropout must be at least 0 and below 1, got %g", name, p);
        return NULL;
    }
    if (bidirectional && dlc_attrs_at(kind, attrs, DLC_A_REVERSE)->b) {
        dlc_error(e->ctx, loc, "%s: reverse=true is one direction of bidirectional=true; "
                  "give one of them", name);
        return NULL;
    }
    if (bidirectional && dlc_attrs_at(kind, attrs, DLC_A_STATEFUL)->b) {
        dlc_error(e->ctx, loc, "%s: stateful=true carries the state from one chunk to the "
                  "next, which a bidirectional layer's reverse direction cannot: it starts "
                  "at the chunk's end", name);
        return NULL;
    }
    if (p > 0 && layers == 1)
        warn_once(e, loc, "%s: dropout=%s applies between stacked layers; with layers=1 it "
                  "does nothing", name, dlc_arena_printf(e->arena, "%g", p));
    set_attr(kind, attrs, DLC_A_LAYERS, (DlcAttr){.i = 1});
    set_attr(kind, attrs, DLC_A_BIDIRECTIONAL, (DlcAttr){.b = false});
    set_attr(kind, attrs, DLC_A_DROPOUT, (DlcAttr){.f = 0});
    if (layers == 1 && !bidirectional)
        return make_op(e, kind, operands, n, attrs, override, loc);

    const char *layer = layer_name(e, override, loc);
    if (!layer)
        return NULL;
    DlcValue *h = x;
    for (int64_t l = 0; l < layers && h; l++) {
        if (l > 0 && p > 0) {
            DlcAttr d[DLC_MAX_ATTRS];
            memset(d, 0, sizeof d);
            set_attr(DLC_OP_DROPOUT, d, DLC_A_P, (DlcAttr){.f = p});
            h = make_op(e, DLC_OP_DROPOUT, &h, 1, d, NULL, loc);
            if (!h)
                break;
        }
        set_attr(kind, attrs, DLC_A_LAYER, (DlcAttr){.i = first + l});
        set_attr(kind, attrs, DLC_A_LAST, (DlcAttr){.b = last && l == layers - 1});
        set_attr(kind, attrs, DLC_A_REVERSE, (DlcAttr){.b = false});
        e->piece_of = layer;
        operands[0] = h;
        DlcValue *fwd = make_op(e, kind, operands, n, attrs, NULL, loc), *bwd = NULL;
        if (fwd && bidirectional) {
            set_attr(kind, attrs, DLC_A_REVERSE, (DlcAttr){.b = true});
            bwd = make_op(e, kind, operands, n, attrs, NULL, loc);
        }
        e->piece_of = NULL;
        if (!bwd) {
            h = bidirectional ? NULL : fwd;
            continue;
        }
        DlcAttr c[DLC_MAX_ATTRS];
        memset(c, 0, sizeof c);
        set_attr(DLC_OP_CONCAT, c, DLC_A_AXIS, (DlcAttr){.i = fwd->type.rank - 1});
        h = make_op(e, DLC_OP_CONCAT, (DlcValue *[]){fwd, bwd}, 2, c, NULL, loc);
    }
    return h;
}

/* A layer name given with name="...": an identifier, since it becomes
 * part of parameter names in IR text and checkpoints. */
static bool valid_layer_name(const Ev *v) {
    if (v->kind != EV_STR || !v->s[0] || (v->s[0] >= '0' && v->s[0] <= '9'))
        return false;
    for (const char *c = v->s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || *c == '_'))
            return false;
    return true;
}

static bool any_poison(const Ev *vals, int n) {
    for (int i = 0; i < n; i++)
        if (vals[i].kind == EV_POISON)
            return true;
    return false;
}

static Ev call_op(Elab *e, AstNode *n, DlcOpKind kind) {
    const DlcOpInfo *info = dlc_op_info(kind);
    int nargs = n->args.n;
    Ev *vals = dlc_arena_alloc(e->arena, sizeof(Ev) * (size_t)(nargs + 1));
    for (int i = 0; i < nargs; i++)
        vals[i] = eval(e, n->args.v[i].val);
    if (any_poison(vals, nargs))
        return poison;

    /* leading positional tensors are the operands */
    DlcValue *tensors[64];
    int ntensors = 0, i = 0;
    /* a recurrent layer takes its sequences' lengths as an optional second */
    int want = dlc_op_is_recurrent(kind) ? 2 : info->arity >= 0 ? info->arity : INT_MAX;
    for (; i < nargs && !n->args.v[i].key && vals[i].kind == EV_TENSOR && ntensors < want; i++) {
        if (ntensors == 64) {
            dlc_error(e->ctx, n->args.v[i].keyloc, "%s: too many operands", info->name);
            return poison;
        }
        tensors[ntensors++] = vals[i].t;
    }
    int need = info->arity >= 0 ? info->arity : 2;
    if (ntensors < need) {
        if (i < nargs && !n->args.v[i].key)
            dlc_error(e->ctx, n->args.v[i].keyloc, "%s: operand %d must be a tensor, got %s",
                      info->name, ntensors + 1, ev_kind_name(&vals[i]));
        else if (ntensors == 0)
            dlc_error(e->ctx, n->loc, "%s: expects %s%d tensor operand%s, got none; write %s(x, ...) or x -> %s",
                      info->name, info->arity < 0 ? "at least " : "", need,
                      need == 1 ? "" : "s", info->name, info->name);
        else
            dlc_error(e->ctx, n->loc, "%s: expects %s%d tensor operands, got %d", info->name,
                      info->arity < 0 ? "at least " : "", need, ntensors);
        return poison;
    }
    /* the rest are attributes: positional in schema order, then keywords */
    DlcAttr attrs[DLC_MAX_ATTRS];
    memset(attrs, 0, sizeof attrs);
    const char *override = NULL;
    bool ok = true;
    for (int slot = 0; i < nargs; i++) {
        const AstArg *a = &n->args.v[i];
        int at;
        if (!a->key) {
            if (slot >= info->nattrs) {
                dlc_error(e->ctx, a->keyloc, "%s: too many arguments", info->name);
                return poison;
            }
            at = slot++;
        } else if (strcmp(a->key, "name") == 0) {
            if (override) {
                dlc_error(e->ctx, a->keyloc, "%s: argument 'name' given twice", info->name);
                ok = false;
            } else if (!valid_layer_name(&vals[i])) {
                dlc_error(e->ctx, a->val->loc,
                          "'name' must be a string that is an identifier (letters, digits, _)");
                ok = false;
            } else {
                override = vals[i].s;
            }
            continue;
        } else {
            at = dlc_op_attr_index(kind, a->key);
            if (at < 0) {
                const char *cands[DLC_MAX_ATTRS + 1];
                for (int k = 0; k < info->nattrs; k++)
                    cands[k] = info->attrs[k].name;
                cands[info->nattrs] = "name";
                const char *guess = dlc_closest(a->key, cands, info->nattrs + 1);
                if (guess)
                    dlc_error(e->ctx, a->keyloc, "%s has no argument '%s'; did you mean '%s'?",
                              info->name, a->key, guess);
                else
                    dlc_error(e->ctx, a->keyloc, "%s has no argument '%s'", info->name, a->key);
                ok = false;
                continue;
            }
        }
        if (attrs[at].set) {
            dlc_error(e->ctx, a->keyloc, "%s: argument '%s' given twice", info->name,
                      info->attrs[at].name);
            ok = false;
            continue;
        }
        ok &= to_attr(e, kind, at, &vals[i], a->val->loc, &attrs[at]);
    }
    if (!ok)
        return poison;
    DlcValue *r = dlc_op_is_recurrent(kind)
                      ? make_recurrent(e, kind, tensors[0], ntensors > 1 ? tensors[1] : NULL,
                                       attrs, override, n->loc)
                      : make_op(e, kind, tensors, ntensors, attrs, override, n->loc);
    return r ? ev_tensor(r) : poison;
}

/* ---- block calls -------------------------------------------------------- */

static Ev exec_body(Elab *e, const AstNodes *body, DlcLoc where, const char *what);

static Ev call_block(Elab *e, AstNode *n, const AstDecl *blk) {
    if (e->block_depth >= MAX_BLOCK_DEPTH) {
        dlc_error(e->ctx, n->loc,
                  "blocks nested more than %d deep; does block '%s' call itself?",
                  MAX_BLOCK_DEPTH, blk->name);
        e->stop = true;
        return poison;
    }
    int nparams = blk->params.n;
    Ev *vals = dlc_arena_alloc(e->arena, sizeof(Ev) * (size_t)(nparams + 1));
    DlcLoc *locs = dlc_arena_alloc(e->arena, sizeof(DlcLoc) * (size_t)(nparams + 1));
    bool *given = dlc_arena_alloc(e->arena, (size_t)nparams + 1);
    const char *override = NULL;
    bool ok = true, has_name_param = false;
    for (int k = 0; k < nparams; k++)
        has_name_param |= strcmp(blk->params.v[k].name, "name") == 0;
    int pos = 0;
    for (int i = 0; i < n->args.n; i++) {
        const AstArg *a = &n->args.v[i];
        Ev v = eval(e, a->val);
        int slot = -1;
        if (!a->key) {
            if (pos >= nparams) {
                dlc_error(e->ctx, a->keyloc, "block '%s' takes %d argument%s, got more",
                          blk->name, nparams, nparams == 1 ? "" : "s");
                ok = false;
                continue;
            }
            slot = pos++;
        } else if (strcmp(a->key, "name") == 0 && !has_name_param) {
            if (override) {
                dlc_error(e->ctx, a->keyloc, "block '%s': argument 'name' given twice",
                          blk->name);
                ok = false;
            } else if (!valid_layer_name(&v)) {
                dlc_error(e->ctx, a->val->loc,
                          "'name' must be a string that is an identifier (letters, digits, _)");
                ok = false;
            } else {
                override = v.s;
            }
            continue;
        } else {
            const char *cands[64];
            int nc = 0;
            for (int k = 0; k < nparams; k++) {
                if (strcmp(blk->params.v[k].name, a->key) == 0)
                    slot = k;
                if (nc < 64)
                    cands[nc++] = blk->params.v[k].name;
            }
            if (slot < 0) {
                const char *guess = dlc_closest(a->key, cands, nc);
                if (guess)
                    dlc_error(e->ctx, a->keyloc,
                              "block '%s' has no parameter '%s'; did you mean '%s'?",
                              blk->name, a->key, guess);
                else
                    dlc_error(e->ctx, a->keyloc, "block '%s' has no parameter '%s'",
                              blk->name, a->key);
                ok = false;
                continue;
            }
        }
        if (given[slot]) {
            dlc_error(e->ctx, a->keyloc, "block '%s': argument '%s' given twice", blk->name,
                      blk->params.v[slot].name);
            ok = false;
            continue;
        }
        given[slot] = true;
        vals[slot] = v;
        locs[slot] = a->val->loc;
        ok &= v.kind != EV_POISON;
    }
    for (int k = 0; k < nparams; k++)
        if (!given[k] && !blk->params.v[k].def) {
            dlc_error(e->ctx, n->loc, "block '%s' needs argument '%s'", blk->name,
                      blk->params.v[k].name);
            ok = false;
        }
    if (!ok)
        return poison;

    /* expand the body in a scope of its own */
    const char *path = layer_name(e, override, n->loc);
    if (!path)
        return poison;
    Scope *saved = e->scope;
    const char *saved_bind = e->bind_name;
    e->scope = scope_new(e, path, blk);
    e->block_depth++;
    for (int k = 0; k < nparams && ok; k++) {
        const AstParam *prm = &blk->params.v[k];
        if (!given[k]) {
            /* defaults see the parameters before them */
            e->bind_name = prm->name;
            vals[k] = eval(e, prm->def);
            ok = vals[k].kind != EV_POISON;
        }
        bind(e, prm->name, vals[k], prm->loc, true);
    }
    int errors = e->ctx->nerrors;
    Ev result = ok ? exec_body(e, &blk->body, blk->loc, "block") : poison;
    if (ok)
        warn_unused_in_scope(e);
    if (e->ctx->nerrors > errors && !e->stop)
        dlc_note(e->ctx, n->loc, "in block '%s', expanded here", blk->name);
    e->block_depth--;
    e->scope = saved;
    e->bind_name = saved_bind;
    return result;
}

/* ---- built-in functions ------------------------------------------------- */

static const char *const builtins[] = {"min", "max"};

static Ev call_builtin(Elab *e, AstNode *n) {
    if (n->args.n < 1) {
        dlc_error(e->ctx, n->loc, "%s() needs at least one argument", n->s);
        return poison;
    }
    bool is_min = strcmp(n->s, "min") == 0;
    Ev best = poison;
    for (int i = 0; i < n->args.n; i++) {
        if (n->args.v[i].key) {
            dlc_error(e->ctx, n->args.v[i].keyloc, "%s() takes no keyword arguments", n->s);
            return poison;
        }
        Ev v = eval(e, n->args.v[i].val);
        if (v.kind == EV_POISON)
            return poison;
        if (!is_number(&v)) {
            dlc_error(e->ctx, n->args.v[i].val->loc, "%s() needs numbers, got %s", n->s,
                      ev_kind_name(&v));
            return poison;
        }
        if (i == 0 || (is_min ? as_double(&v) < as_double(&best)
                              : as_double(&v) > as_double(&best)))
            best = v;
    }
    return best;
}

static Ev eval_call(Elab *e, AstNode *n) {
    Binding *var = dlc_map_get(&e->scope->vars, n->s);
    if (var && !var->implicit) {
        var->used = true;
        dlc_error(e->ctx, n->loc, "'%s' is %s, not an op or a block, so it cannot be called",
                  n->s, ev_kind_name(&var->val));
        return poison;
    }
    const AstDecl *blk = dlc_map_get(&e->blocks, n->s);
    if (blk)
        return call_block(e, n, blk);
    DlcOpKind kind = dlc_op_lookup(n->s);
    if (kind != DLC_OP_COUNT && (dlc_op_info(kind)->flags & DLC_OPF_INTERNAL)) {
        dlc_error(e->ctx, n->loc, "'%s' is made by dlc's passes and cannot be called", n->s);
        return poison;
    }
    if (kind != DLC_OP_COUNT)
        return call_op(e, n, kind);
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (strcmp(n->s, builtins[i]) == 0)
            return call_builtin(e, n);

    /* unknown: suggest an op, a block or a built-in */
    const char *cands[DLC_OP_COUNT + 64 + 2];
    int nc = 0;
    for (int k = 0; k < DLC_OP_COUNT; k++)
        if (!(dlc_op_info((DlcOpKind)k)->flags & DLC_OPF_INTERNAL))
            cands[nc++] = dlc_op_names()[k];
    for (int k = 0; k < e->blocks.cap && nc < DLC_OP_COUNT + 64; k++)
        if (e->blocks.keys[k])
            cands[nc++] = e->blocks.keys[k];
    cands[nc++] = builtins[0];
    cands[nc++] = builtins[1];
    const char *guess = dlc_closest(n->s, cands, nc);
    if (guess)
        dlc_error(e->ctx, n->loc, "unknown op or block '%s'; did you mean '%s'?", n->s, guess);
    else
        dlc_error(e->ctx, n->loc, "unknown op or block '%s'", n->s);
    for (int i = 0; i < n->args.n; i++)
        eval(e, n->args.v[i].val); /* report errors in the arguments too */
    return poison;
}

static Ev eval_name(Elab *e, AstNode *n) {
    Binding *b = dlc_map_get(&e->scope->vars, n->s);
    if (b) {
        b->used = true;
        return b->val;
    }
    if (dlc_op_lookup(n->s) != DLC_OP_COUNT || dlc_map_get(&e->blocks, n->s)) {
        dlc_error(e->ctx, n->loc, "'%s' must be called: write %s(x, ...) or x -> %s", n->s,
                  n->s, n->s);
        return poison;
    }
    const char *cands[256];
    int nc = scope_names(e, cands, 256);
    const char *guess = dlc_closest(n->s, cands, nc);
    if (guess)
        dlc_error(e->ctx, n->loc, "unknown name '%s'; did you mean '%s'?", n->s, guess);
    else
        dlc_error(e->ctx, n->loc, "unknown name '%s'", n->s);
    /* bind it to poison so that later uses stay quiet */
    bind(e, n->s, poison, n->loc, false);
    Binding *silenced = dlc_map_get(&e->scope->vars, n->s);
    silenced->used = silenced->implicit = true;
    return poison;
}

static Ev eval(Elab *e, AstNode *n) {
    if (e->stop)
        return poison;
    if (++e->expr_depth > MAX_EXPR_DEPTH) {
        dlc_error(e->ctx, n->loc, "expression nested more than %d deep", MAX_EXPR_DEPTH);
        e->stop = true;
        e->expr_depth--;
        return poison;
    }
    Ev v = poison;
    switch (n->kind) {
    case AST_INT: v = ev_int(n->i); break;
    case AST_FLOAT: v = ev_float(n->f); break;
    case AST_BOOL: v = ev_bool(n->bval); break;
    case AST_STR: v.kind = EV_STR; v.s = n->s; break;
    case AST_NAME: v = eval_name(e, n); break;
    case AST_LIST:
        v.kind = EV_LIST;
        v.n = n->items.n;
        v.items = dlc_arena_alloc(e->arena, sizeof(Ev) * (size_t)(v.n + 1));
        for (int i = 0; i < v.n; i++) {
            v.items[i] = eval(e, n->items.v[i]);
            if (v.items[i].kind == EV_POISON)
                v = poison;
            if (v.kind == EV_POISON)
                break;
        }
        break;
    case AST_UNARY: v = eval_unary(e, n); break;
    case AST_BINARY: v = eval_binary(e, n); break;
    case AST_CALL: v = eval_call(e, n); break;
    case AST_MEMBER: v = eval_member(e, n); break;
    case AST_INDEX: v = eval_index(e, n); break;
    case AST_COND: {
        bool c;
        if (want_bool(e, n->a, &c))
            v = eval(e, c ? n->b : n->c);
        break;
    }
    default: dlc_unreachable("statement node %d in an expression", (int)n->kind);
    }
    e->expr_depth--;
    return v;
}

/* ---- statements --------------------------------------------------------- */

static void exec_bind(Elab *e, AstNode *s) {
    e->bind_name = s->items.v[0]->s;
    Ev v = eval(e, s->a);
    int nt = s->items.n;
    if (nt == 1) {
        bind(e, s->items.v[0]->s, v, s->items.v[0]->loc, false);
        return;
    }
    if (v.kind != EV_POISON && (v.kind != EV_LIST || v.n != nt)) {
        if (v.kind == EV_LIST)
            dlc_error(e->ctx, s->items.v[0]->loc, "cannot unpack a list of %d into %d names",
                      v.n, nt);
        else
            dlc_error(e->ctx, s->items.v[0]->loc, "cannot unpack %s into %d names",
                      ev_kind_name(&v), nt);
        v = poison;
    }
    if (v.kind == EV_LIST && v.n != nt) /* poison may stand for a list */
        v = poison;
    for (int i = 0; i < nt; i++)
        bind(e, s->items.v[i]->s, v.kind == EV_POISON ? poison : v.items[i],
             s->items.v[i]->loc, false);
}

static bool want_bool(Elab *e, AstNode *n, bool *out) {
    Ev c = eval(e, n);
    if (c.kind == EV_POISON)
        return false;
    if (c.kind != EV_BOOL) {
        dlc_error(e->ctx, n->loc, "a condition must be a boolean, got %s", ev_kind_name(&c));
        return false;
    }
    *out = c.b;
    return true;
}

static void exec_repeat(Elab *e, AstNode *s) {
    Ev c = eval(e, s->a);
    if (c.kind == EV_POISON)
        return;
    if (c.kind != EV_INT || c.i < 0 || c.i > MAX_REPEAT) {
        if (c.kind != EV_INT)
            dlc_error(e->ctx, s->a->loc, "a repeat count must be an integer, got %s",
                      ev_kind_name(&c));
        else
            dlc_error(e->ctx, s->a->loc, "a repeat count must be between 0 and %d, got %lld",
                      MAX_REPEAT, (long long)c.i);
        return;
    }
    for (int64_t i = 0; i < c.i && !e->stop; i++) {
        if (s->s) {
            bind(e, s->s, ev_int(i), s->sloc, false);
            ((Binding *)dlc_map_get(&e->scope->vars, s->s))->used = true;
        }
        int errors = e->ctx->nerrors - e->ctx->nwerrors;
        exec_stmts(e, &s->body);
        if (e->ctx->nerrors - e->ctx->nwerrors > errors)
            break; /* the same mistake would be reported each time round */
    }
}

static void exec_stmts(Elab *e, const AstNodes *stmts) {
    for (int i = 0; i < stmts->n && !e->stop; i++) {
        AstNode *s = stmts->v[i];
        if (!check_limits(e, s->loc))
            return;
        switch (s->kind) {
        case AST_BIND: exec_bind(e, s); break;
        case AST_REPEAT: exec_repeat(e, s); break;
        case AST_IF: {
            bool c;
            if (want_bool(e, s->a, &c))
                exec_stmts(e, c ? &s->body : &s->els);
            break;
        }
        case AST_RETURN:
            dlc_error(e->ctx, s->loc, "'return' must be the last statement of a %s",
                      e->scope->block ? "block" : "network");
            break;
        default: dlc_unreachable("expression node %d as a statement", (int)s->kind);
        }
    }
}

/* Runs a network's or block's body, which ends with `return`; returns the
 * returned value, a list when there are several. */
static Ev exec_body(Elab *e, const AstNodes *body, DlcLoc where, const char *what) {
    if (body->n == 0 || body->v[body->n - 1]->kind != AST_RETURN) {
        dlc_error(e->ctx, where, "%s does not end with a 'return'", what);
        AstNodes all = *body;
        exec_stmts(e, &all);
        return poison;
    }
    AstNodes stmts = *body;
    stmts.n--;
    exec_stmts(e, &stmts);
    if (e->stop)
        return poison;
    AstNode *ret = body->v[body->n - 1];
    e->bind_name = "out";
    int n = ret->items.n;
    Ev *vals = dlc_arena_alloc(e->arena, sizeof(Ev) * (size_t)n);
    for (int i = 0; i < n; i++) {
        vals[i] = eval(e, ret->items.v[i]);
        if (vals[i].kind == EV_POISON)
            return poison;
        if (vals[i].kind != EV_TENSOR) {
            dlc_error(e->ctx, ret->items.v[i]->loc, "a %s must return tensors, not %s", what,
                      ev_kind_name(&vals[i]));
            return poison;
        }
    }
    if (n == 1)
        return vals[0];
    Ev v = poison;
    v.kind = EV_LIST;
    v.items = vals;
    v.n = n;
    return v;
}

/* ---- networks ----------------------------------------------------------- */

static bool input_type(Elab *e, const AstParam *in, DlcType *t) {
    memset(t, 0, sizeof *t);
    t->batched = true;
    t->dtype = dlc_dtype_lookup(in->dtype);
    bool ok = true;
    if (t->dtype == DLC_DTYPE_COUNT) {
        const char *names[] = {"f32", "f64", "i32"};
        const char *guess = dlc_closest(in->dtype, names, 3);
        if (guess)
            dlc_error(e->ctx, in->dtype_loc, "unknown element type '%s'; did you mean '%s'?",
                      in->dtype, guess);
        else
            dlc_error(e->ctx, in->dtype_loc, "unknown element type '%s' (use f32, f64 or i32)",
                      in->dtype);
        ok = false;
    }
    if (in->dims.n > DLC_MAX_RANK) {
        dlc_error(e->ctx, in->loc, "input '%s' has %d dimensions; at most %d are supported",
                  in->name, in->dims.n, DLC_MAX_RANK);
        return false;
    }
    t->rank = in->dims.n;
    for (int i = 0; i < in->dims.n; i++) {
        Ev d = eval(e, in->dims.v[i]);
        if (d.kind == EV_POISON) {
            ok = false;
        } else if (d.kind != EV_INT || d.i < 1) {
            dlc_error(e->ctx, in->dims.v[i]->loc, "a dimension must be a positive integer");
            ok = false;
        } else {
            t->dims[i] = d.i;
        }
    }
    int64_t numel = dlc_type_numel(t);
    if (ok && (numel < 0 || numel > DLC_MAX_NUMEL)) {
        dlc_error(e->ctx, in->loc, "input '%s' is too large", in->name);
        ok = false;
    }
    return ok;
}

static void elaborate_network(Elab *e, const AstDecl *d) {
    DlcNetwork *prev = dlc_module_find_network(e->m, d->name);
    if (prev) {
        dlc_error(e->ctx, d->loc, "network '%s' is defined twice", d->name);
        dlc_note(e->ctx, prev->loc, "the first definition is here");
        return;
    }
    e->net = dlc_network_new(e->m, d->name, d->loc);
    dlc_map_init(&e->layers, e->arena);
    e->scope = scope_new(e, "", NULL);
    e->stop = false;
    bool ok = true;
    for (int i = 0; i < d->params.n; i++) {
        const AstParam *in = &d->params.v[i];
        DlcType t;
        e->bind_name = in->name;
        if (!input_type(e, in, &t)) {
            ok = false;
            continue;
        }
        DlcValue *v = dlc_network_add_input(e->m, e->net, in->name, t, in->loc);
        if (!v) {
            dlc_error(e->ctx, in->loc, "input '%s' is declared twice", in->name);
            ok = false;
            continue;
        }
        bind(e, in->name, ev_tensor(v), in->loc, true);
    }
    Ev out = ok ? exec_body(e, &d->body, d->loc, "network") : poison;
    if (out.kind == EV_TENSOR) {
        dlc_network_add_output(e->m, e->net, out.t);
    } else if (out.kind == EV_LIST) {
        for (int i = 0; i < out.n; i++)
            dlc_network_add_output(e->m, e->net, out.items[i].t);
    }
    if (out.kind != EV_POISON)
        warn_unused_in_scope(e);
    e->net = NULL;
}

/* ---- train sections ----------------------------------------------------- */

static bool eval_cfg(Elab *e, AstNode *n, DlcCfg *out, int depth) {
    memset(out, 0, sizeof *out);
    out->loc = n->loc;
    if (depth > 16) {
        dlc_error(e->ctx, n->loc, "setting nested too deeply");
        return false;
    }
    if (n->kind == AST_NAME && !dlc_map_get(&e->scope->vars, n->s)) {
        out->kind = DLC_CFG_SYM;
        out->s = dlc_arena_strdup(&e->m->arena, n->s);
        return true;
    }
    if (n->kind == AST_CALL) {
        out->kind = DLC_CFG_CALL;
        out->s = dlc_arena_strdup(&e->m->arena, n->s);
        out->nargs = n->args.n;
        out->args = dlc_arena_alloc(&e->m->arena, sizeof(DlcCfgArg) * (size_t)(n->args.n + 1));
        bool ok = true;
        for (int i = 0; i < n->args.n; i++) {
            const AstArg *a = &n->args.v[i];
            out->args[i].key = a->key ? dlc_arena_strdup(&e->m->arena, a->key) : NULL;
            out->args[i].keyloc = a->keyloc;
            ok &= eval_cfg(e, a->val, &out->args[i].val, depth + 1);
        }
        return ok;
    }
    if (n->kind == AST_LIST) {
        out->kind = DLC_CFG_LIST;
        out->nargs = n->items.n;
        out->args = dlc_arena_alloc(&e->m->arena, sizeof(DlcCfgArg) * (size_t)(n->items.n + 1));
        bool ok = true;
        for (int i = 0; i < n->items.n; i++)
            ok &= eval_cfg(e, n->items.v[i], &out->args[i].val, depth + 1);
        return ok;
    }
    Ev v = eval(e, n);
    switch (v.kind) {
    case EV_POISON: return false;
    case EV_INT: out->kind = DLC_CFG_INT; out->i = v.i; return true;
    case EV_FLOAT: out->kind = DLC_CFG_FLOAT; out->f = v.f; return true;
    case EV_BOOL: out->kind = DLC_CFG_BOOL; out->b = v.b; return true;
    case EV_STR:
        out->kind = DLC_CFG_STR;
        out->s = dlc_arena_strdup(&e->m->arena, v.s);
        return true;
    default:
        dlc_error(e->ctx, n->loc, "a train setting cannot be %s", ev_kind_name(&v));
        return false;
    }
}

static void elaborate_train(Elab *e, const AstDecl *d) {
    DlcTrain *t = dlc_train_new(e->m, d->name, d->loc);
    e->scope = scope_new(e, "", NULL);
    e->stop = false;
    bool ok = true;
    for (int i = 0; i < d->entries.n; i++) {
        const AstArg *a = &d->entries.v[i];
        DlcCfg v;
        if (eval_cfg(e, a->val, &v, 0))
            dlc_train_add(e->m, t, a->key, v, a->keyloc);
        else
            ok = false;
    }
    for (int j = 0; j < e->m->ntrains - 1; j++)
        if (strcmp(e->m->trains[j]->network, d->name) == 0) {
            dlc_error(e->ctx, d->loc, "second train section for network '%s'", d->name);
            dlc_note(e->ctx, e->m->trains[j]->loc, "the first is here");
            ok = false;
        }
    (void)ok; /* the entries that did evaluate are still worth checking */
    dlc_train_check(e->ctx, e->m, t);
}

/* ---- files and imports -------------------------------------------------- */

typedef struct Loader {
    DlcCtx *ctx;
    DlcArena *arena;
    const DlcFrontendOptions *opt;
    DlcMap loaded;   /* resolved path -> (void*)1 */
    AstFile *files;  /* parsed files, the main file first */
    int nfiles, capfiles;
} Loader;

static char *dir_of(DlcArena *a, const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? dlc_arena_strndup(a, path, (size_t)(slash - path)) : dlc_arena_strdup(a, ".");
}

static bool load_file(Loader *ld, int file, int depth);

static void load_import(Loader *ld, const AstDecl *imp, int depth) {
    const char *from = ld->ctx->files[imp->file].path;
    const char *path = imp->name;
    if (!path[0]) {
        dlc_error(ld->ctx, imp->loc, "import of an empty path");
        return;
    }
    char *found = NULL;
    if (path[0] == '/') {
        found = dlc_arena_strdup(ld->arena, path);
    } else {
        int ndirs = 1 + ld->opt->ninclude;
        for (int i = 0; i < ndirs && !found; i++) {
            const char *dir = i == 0 ? dir_of(ld->arena, from) : ld->opt->include_dirs[i - 1];
            char *cand = dlc_arena_printf(ld->arena, "%s/%s", dir, path);
            struct stat st;
            if (stat(cand, &st) == 0)
                found = cand;
        }
    }
    char *real = found ? realpath(found, NULL) : NULL;
    if (!real) {
        dlc_error(ld->ctx, imp->loc, "cannot find imported file \"%s\"", path);
        return;
    }
    bool seen = dlc_map_get(&ld->loaded, real) != NULL;
    if (!seen)
        dlc_map_put(&ld->loaded, dlc_arena_strdup(ld->arena, real), (void *)1);
    free(real);
    if (seen)
        return; /* imported already (or importing itself): once is enough */
    if (depth >= MAX_IMPORT_DEPTH) {
        dlc_error(ld->ctx, imp->loc, "imports nested more than %d deep", MAX_IMPORT_DEPTH);
        return;
    }
    struct stat st;
    if (stat(found, &st) != 0 || !S_ISREG(st.st_mode)) {
        /* a directory or a device (/dev/zero) is never a source file */
        dlc_error(ld->ctx, imp->loc, "imported \"%s\" is not a regular file", path);
        return;
    }
    size_t size;
    char *text = dlc_read_file(found, &size);
    if (!text) {
        dlc_error(ld->ctx, imp->loc, "cannot read imported file \"%s\": %s", path,
                  strerror(errno));
        return;
    }
    int file = dlc_ctx_add_source(ld->ctx, found, text, size, false);
    load_file(ld, file, depth + 1);
}

static bool load_file(Loader *ld, int file, int depth) {
    AstFile f = {0};
    bool ok = dlc_parse_dl(ld->ctx, ld->arena, file, &f);
    DLC_PUSH(ld->arena, ld->files, ld->nfiles, ld->capfiles, f);
    for (int i = 0; i < f.ndecls; i++)
        if (f.decls[i]->kind == DECL_IMPORT)
            load_import(ld, f.decls[i], depth);
    return ok;
}

/* Registers every file's blocks, checking for clashes. */
static void collect_blocks(Elab *e, const Loader *ld) {
    for (int fi = 0; fi < ld->nfiles; fi++)
        for (int i = 0; i < ld->files[fi].ndecls; i++) {
            const AstDecl *d = ld->files[fi].decls[i];
            if (d->kind == DECL_TRAIN && fi > 0)
                dlc_warning(e->ctx, d->loc,
                            "train section in an imported file is ignored (imports lend "
                            "blocks only)");
            if (d->kind != DECL_BLOCK)
                continue;
            const AstDecl *prev = dlc_map_get(&e->blocks, d->name);
            if (prev) {
                dlc_error(e->ctx, d->loc, "block '%s' is defined twice", d->name);
                dlc_note(e->ctx, prev->loc, "the first definition is here");
                continue;
            }
            if (dlc_op_lookup(d->name) != DLC_OP_COUNT || strcmp(d->name, "min") == 0 ||
                strcmp(d->name, "max") == 0) {
                dlc_error(e->ctx, d->loc, "block '%s' has the name of a built-in op", d->name);
                continue;
            }
            for (int k = 0; k < d->params.n; k++)
                for (int j = 0; j < k; j++)
                    if (strcmp(d->params.v[j].name, d->params.v[k].name) == 0)
                        dlc_error(e->ctx, d->params.v[k].loc,
                                  "block '%s' has two parameters named '%s'", d->name,
                                  d->params.v[k].name);
            dlc_map_put(&e->blocks, d->name, (void *)d);
        }
}

DlcModule *dlc_frontend_compile(DlcCtx *ctx, int file, const DlcFrontendOptions *opt) {
    static const DlcFrontendOptions no_options = {0};
    if (!opt)
        opt = &no_options;
    DlcArena arena = {0};
    Loader ld = {.ctx = ctx, .arena = &arena, .opt = opt};
    dlc_map_init(&ld.loaded, &arena);
    char *real = realpath(ctx->files[file].path, NULL);
    if (real) {
        dlc_map_put(&ld.loaded, dlc_arena_strdup(&arena, real), (void *)1);
        free(real);
    }
    int errors = ctx->nerrors;
    load_file(&ld, file, 0);
    if (ctx->nerrors > errors) {
        /* elaborating a tree with holes would only add errors that follow
           from the syntax errors already reported */
        dlc_arena_free(&arena);
        return NULL;
    }

    DlcModule *m = dlc_module_new(ctx);
    m->source = dlc_arena_strdup(&m->arena, ctx->files[file].path);
    Elab e = {.ctx = ctx, .m = m, .arena = &arena,
              .max_steps = opt->max_steps > 0 ? opt->max_steps : DEFAULT_MAX_STEPS,
              .max_ops = opt->max_ops > 0 ? opt->max_ops : DEFAULT_MAX_OPS};
    dlc_map_init(&e.blocks, &arena);
    dlc_map_init(&e.warned, &arena);
    collect_blocks(&e, &ld);
    /* networks and train sections of the main file; imports lend blocks */
    const AstFile *main_file = &ld.files[0];
    for (int i = 0; i < main_file->ndecls; i++)
        if (main_file->decls[i]->kind == DECL_NETWORK)
            elaborate_network(&e, main_file->decls[i]);
    for (int i = 0; i < main_file->ndecls; i++)
        if (main_file->decls[i]->kind == DECL_TRAIN)
            elaborate_train(&e, main_file->decls[i]);
    dlc_arena_free(&arena);

    if (ctx->nerrors == errors && !dlc_verify(ctx, m))
        dlc_unreachable("elaboration produced IR that does not verify");
    if (ctx->nerrors > errors) {
        dlc_module_free(m);
        return NULL;
    }
    return m;
}
