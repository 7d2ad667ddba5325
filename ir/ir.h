/* ir.h — the one internal header of dlc's IR layer.
 *
 * Everything above the IR (frontend, passes, code generators, the driver)
 * includes this header; the IR includes nothing of theirs.  It is sectioned by
 * the file that exports each part, in pipeline order:
 *
 *   support.c   arena allocation, string maps, internal errors
 *   diag.c      the compilation context: source files and located diagnostics
 *   ops.c       the op table (generated from ops.def) and attribute schemas
 *   shape.c     shape rules: one infer function per op
 *   ir.c        module, networks, values, ops; the builder
 *   train.c     the train section: typed configuration values and their schema
 *   verify.c    the verifier
 *   print.c     the text form (and float formatting that round-trips)
 *   parse.c     the text form read back
 *   dot.c       Graphviz output
 *
 * The IR is owned by one arena per module and freed in one call.
 */
#ifndef DLC_IR_H
#define DLC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DLC_VERSION "0.1.0"

/* ------------------------------------------------------------------------ */
/* support.c                                                                */
/* ------------------------------------------------------------------------ */

/* A bump allocator.  Everything the compiler builds for one module lives in
 * one arena and is freed with it; nothing is freed piecemeal. */
typedef struct DlcArenaChunk DlcArenaChunk;
typedef struct DlcArena {
    DlcArenaChunk *head; /* newest chunk first; allocation happens in head */
} DlcArena;

void *dlc_arena_alloc(DlcArena *a, size_t size);          /* zeroed memory */
char *dlc_arena_strdup(DlcArena *a, const char *s);
char *dlc_arena_strndup(DlcArena *a, const char *s, size_t n);
char *dlc_arena_printf(DlcArena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Grows an arena-owned array of elements of size elem to hold at least need
 * elements, doubling; *cap is updated.  Old storage is simply abandoned. */
void *dlc_arena_grow(DlcArena *a, void *ptr, int *cap, int need, size_t elem);
void dlc_arena_free(DlcArena *a);

/* Appends x to an arena-owned array `arr` with count `n` and capacity `cap`. */
#define DLC_PUSH(arena, arr, n, cap, x)                                       \
    do {                                                                      \
        if ((n) >= (cap))                                                     \
            (arr) = dlc_arena_grow((arena), (arr), &(cap), (n) + 1,           \
                                   sizeof *(arr));                            \
        (arr)[(n)++] = (x);                                                   \
    } while (0)

/* An open-addressing hash map from strings to pointers.  Keys are not
 * copied: they must outlive the map (they normally live in the same arena). */
typedef struct DlcMap {
    const char **keys; /* NULL marks an empty slot */
    void **vals;
    int cap;           /* a power of two, or 0 before first insertion */
    int len;           /* number of keys */
    DlcArena *arena;   /* where the slots live */
} DlcMap;

void dlc_map_init(DlcMap *m, DlcArena *arena);
void *dlc_map_get(const DlcMap *m, const char *key);     /* NULL if absent */
void dlc_map_put(DlcMap *m, const char *key, void *val); /* inserts or replaces */

/* Damerau-Levenshtein distance, for "did you mean" suggestions. */
int dlc_edit_distance(const char *a, const char *b);
/* The candidate closest to `name` if it is close enough to be a plausible
 * misspelling, else NULL. */
const char *dlc_closest(const char *name, const char *const *cands, int n);

/* Internal errors (bugs in dlc, never user errors): print the location in
 * dlc's own source and abort. */
_Noreturn void dlc_die_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define dlc_unreachable(...) dlc_die_(__FILE__, __LINE__, __VA_ARGS__)

/* Reads a whole file (or standard input for "-") into a malloc'd,
 * NUL-terminated buffer.  Returns NULL and sets errno on failure. */
char *dlc_read_file(const char *path, size_t *size);
/* Runs argv (no shell), its standard output into the file out (NULL: as
 * it is), and waits; whether it exited with status 0.  A command that
 * cannot start says so on standard error. */
bool dlc_run(char *const *argv, const char *out);

/* ------------------------------------------------------------------------ */
/* diag.c                                                                   */
/* ------------------------------------------------------------------------ */

/* A source location: a range on one line of one source file. */
typedef struct DlcLoc {
    int file; /* index into DlcCtx.files; -1: no location */
    int line; /* 1-based */
    int col;  /* 1-based, in bytes */
    int len;  /* length of the range on that line, at least 1 */
} DlcLoc;

#define DLC_NOLOC ((DlcLoc){-1, 0, 0, 0})

typedef struct DlcSource {
    char *path;  /* as given by the user; owned (malloc) */
    char *text;  /* contents, NUL-terminated; owned; NULL if unreadable */
    size_t size;
    bool is_ir;  /* IR text: locations into it are not printed in IR output */
    bool tried;  /* text was missing and reading it was tried (for display) */
} DlcSource;

typedef enum DlcSeverity {
    DLC_SEV_ERROR,   /* the input is wrong; compilation fails */
    DLC_SEV_WARNING, /* probably a mistake; -Werror makes it an error */
    DLC_SEV_NOTE,    /* more about the previous error or warning */
} DlcSeverity;

/* The compilation context: every stage gets one and reports through it.
 * There is no other global state in the compiler. */
typedef struct DlcCtx {
    DlcSource *files;     /* every source read so far; DlcLoc.file indexes it */
    int nfiles, capfiles;
    FILE *err;            /* where diagnostics go (stderr by default) */
    int nerrors;          /* errors reported so far (warnings under -Werror too) */
    int nwarnings;
    int nwerrors;         /* how many of nerrors are warnings under -Werror */
    int max_errors;       /* stop reporting (not compiling) after this many */
    bool werror;          /* treat warnings as errors */
    bool no_warnings;     /* suppress warnings */
    bool color;           /* ANSI colours (only on a terminal) */
    bool in_note_of_dropped; /* the previous diagnostic was dropped: drop its notes */
} DlcCtx;

void dlc_ctx_init(DlcCtx *ctx, FILE *err);
void dlc_ctx_free(DlcCtx *ctx);
/* Registers a source whose text is already in memory (takes ownership of
 * text, which may be NULL).  Returns its file index. */
int dlc_ctx_add_source(DlcCtx *ctx, const char *path, char *text, size_t size,
                       bool is_ir);
/* Finds the index of a source by path, registering it (without text, read
 * lazily for display) if it is new.  Used for loc(...) in IR text. */
int dlc_ctx_source_index(DlcCtx *ctx, const char *path);
const char *dlc_ctx_path(const DlcCtx *ctx, DlcLoc loc);

void dlc_error(DlcCtx *ctx, DlcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void dlc_warning(DlcCtx *ctx, DlcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void dlc_note(DlcCtx *ctx, DlcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void dlc_vdiag(DlcCtx *ctx, DlcSeverity sev, DlcLoc loc, const char *fmt,
               va_list ap);

/* Writes len bytes of buf to the file path through a temporary file in the
 * same folder renamed into place, so that a reader never sees half a file
 * and a failed write leaves an existing file as it was (a path that is not
 * a regular file, /dev/null or a pipe, is written directly).  Every output
 * file of dlc goes through it.  Reports "cannot write" through ctx and
 * returns false on failure. */
bool dlc_write_file(DlcCtx *ctx, const char *path, const char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* ops.c — the op table                                                     */
/* ------------------------------------------------------------------------ */

/* The ops, generated from ops.def.  The table is ordered so that each
 * category is a range (see the dlc_op_is_* helpers). */
typedef enum DlcOpKind {
#define OP(id, name, arity, flags, attrs, infer, grad, cpu, ptx) DLC_OP_##id,
#include "ops.def"
#undef OP
    DLC_OP_COUNT
} DlcOpKind;

/* Op properties, used by passes and targets. */
enum {
    DLC_OPF_DIFF = 1 << 0,     /* differentiable: has a vector-Jacobian rule */
    DLC_OPF_FUSABLE = 1 << 1,  /* may be merged with a consumer by fusion */
    DLC_OPF_ELEMWISE = 1 << 2, /* result[i] depends on operands[i] only */
    DLC_OPF_STOCHASTIC = 1 << 3, /* not a pure function (dropout): no CSE */
    DLC_OPF_LOSS = 1 << 4,     /* reduces over the batch to a scalar */
    DLC_OPF_INTERNAL = 1 << 5, /* made by passes, not callable from .dl */
};

/* Attribute value types. */
typedef enum DlcAttrType {
    DLC_ATTR_INT,   /* int64 */
    DLC_ATTR_FLOAT, /* double; an int literal is accepted */
    DLC_ATTR_BOOL,
    DLC_ATTR_PAIR,  /* two int64 (height, width); one int means both */
} DlcAttrType;

typedef struct DlcAttr {
    DlcAttrType type; /* always the schema's type for this slot */
    bool set;         /* a value is present (given, or filled from a default) */
    union {
        int64_t i;       /* DLC_ATTR_INT */
        double f;        /* DLC_ATTR_FLOAT */
        bool b;          /* DLC_ATTR_BOOL */
        int64_t pair[2]; /* DLC_ATTR_PAIR */
    };
} DlcAttr;

#define DLC_MAX_ATTRS 24

/* The attribute names, from attrs.def: dlc's own source reads an op's
 * attribute by these, so a misspelt name does not compile. */
typedef enum DlcAttrName {
#define ATTR(id, name, type) DLC_A_##id,
#include "attrs.def"
#undef ATTR
    DLC_A_COUNT
} DlcAttrName;

/* One attribute of an op's schema, parsed from the table's schema string. */
typedef struct DlcAttrSpec {
    const char *name;
    DlcAttrName id;     /* the name's entry in attrs.def */
    DlcAttrType type;
    bool required;      /* no default: the user must give it */
    int default_from;   /* >= 0: the default is the value of that attribute */
    DlcAttr def;        /* the default value, when neither of the above */
} DlcAttrSpec;

typedef struct DlcInfer DlcInfer;
typedef bool (*DlcInferFn)(DlcInfer *inf);

typedef struct DlcOpInfo {
    const char *name;   /* spelling in .dl and .dlir */
    int arity;          /* tensor operands the user writes; -1: two or more */
    unsigned flags;     /* DLC_OPF_* */
    const char *schema; /* attribute schema, "name:type[=default] ..." */
    DlcInferFn infer;   /* shape rule */
    DlcAttrSpec attrs[DLC_MAX_ATTRS]; /* parsed schema */
    int nattrs;
} DlcOpInfo;

const DlcOpInfo *dlc_op_info(DlcOpKind k);
/* Looks an op up by name; returns DLC_OP_COUNT if there is none. */
DlcOpKind dlc_op_lookup(const char *name);
/* Index of the attribute spelt `name` in op k's schema, or -1: for names
 * read from the user's text (the IR parser, the frontend). */
int dlc_op_attr_index(DlcOpKind k, const char *name);
/* Attribute a's spelling in .dl and .dlir ("filters"). */
const char *dlc_attr_name(DlcAttrName a);
/* Index of attribute a in op k's schema (known when the table is built),
 * or -1 where k has no such attribute. */
int dlc_op_attr_slot(DlcOpKind k, DlcAttrName a);
/* Attribute a in attrs, indexed by k's schema (an op being built); an
 * internal error where k has no such attribute. */
DlcAttr *dlc_attrs_at(DlcOpKind k, DlcAttr *attrs, DlcAttrName a);
/* Whether the bool attribute a of an op of kind k is true in attrs
 * (indexed by k's schema); false where k has no such attribute. */
bool dlc_attr_true(DlcOpKind k, const DlcAttr *attrs, DlcAttrName a);
/* Whether attribute a is the tile pass's choice for the one op that
 * carries it (tile, vector, filter_lanes, scatter, band: passes/tile.c),
 * which an op built from another (a gradient from its forward op) must not
 * inherit: a forward convolution's filter lanes are no tile of its input
 * gradient's. */
bool dlc_attr_is_tile_choice(DlcAttrName a);
/* The attributes of an op of kind `from` (from_attrs) that kind also has,
 * by name, into out (indexed by kind's schema; the rest zero, for
 * dlc_op_fill_defaults), but for the tile pass's choices: a gradient op's
 * from its forward op, a training form's, a fused op's. */
void dlc_attrs_like(DlcOpKind kind, DlcOpKind from, const DlcAttr *from_attrs, DlcAttr *out);
/* Whether an op of kind k with these attributes reads the result of a ReLU
 * whose gradient it applies (relu_grad=true) as one more tensor operand,
 * after its own (dlc_op_relu_grad_mask gives its index): every such op but
 * maxpool_grad and lrn_grad, whose x is that result, and maxpool_train,
 * whose only operand is. */
bool dlc_relu_grad_operand(DlcOpKind k, const DlcAttr *attrs);
/* All op names, for suggestions. */
const char *const *dlc_op_names(void);
/* Fills attributes that were not given from their defaults.  Returns the
 * index of a missing required attribute, or -1 when all are set. */
int dlc_op_fill_defaults(DlcOpKind k, DlcAttr *attrs);
/* Whether attribute i equals its default (the printer omits those). */
bool dlc_op_attr_is_default(DlcOpKind k, const DlcAttr *attrs, int i);

static inline bool dlc_op_has_params(DlcOpKind k) {
    return k <= DLC_OP_BATCHNORM;
}
static inline bool dlc_op_is_activation(DlcOpKind k) {
    return k >= DLC_OP_RELU && k <= DLC_OP_LEAKY_RELU;
}
/* rnn, rnn_relu, lstm, gru; their training forms; their gradients */
static inline bool dlc_op_is_recurrent(DlcOpKind k) {
    return k >= DLC_OP_RNN && k <= DLC_OP_GRU;
}
static inline bool dlc_op_is_recurrent_train(DlcOpKind k) {
    return k >= DLC_OP_RNN_TRAIN && k <= DLC_OP_GRU_TRAIN;
}
static inline bool dlc_op_is_recurrent_grad(DlcOpKind k) {
    return k >= DLC_OP_RNN_GRAD && k <= DLC_OP_GRU_GRAD;
}
/* The cell of a recurrent op of any of the three forms, as its forward
 * kind (DLC_OP_LSTM for lstm, lstm_train and lstm_grad); DLC_OP_COUNT for
 * any other op. */
DlcOpKind dlc_recurrent_cell(DlcOpKind k);
/* The gates of a recurrent cell (1 for rnn and rnn_relu, 4 for lstm, 3 for
 * gru) and the width of its training form's cache, in hidden states (1, 5,
 * 4): kernels/recurrent.inc's layout. */
int dlc_recurrent_gates(DlcOpKind cell);
int dlc_recurrent_cache(DlcOpKind cell);

static inline bool dlc_op_is_pool(DlcOpKind k) {
    return k >= DLC_OP_MAXPOOL && k <= DLC_OP_GLOBALAVGPOOL;
}
static inline bool dlc_op_is_loss(DlcOpKind k) {
    return k >= DLC_OP_CROSS_ENTROPY && k <= DLC_OP_MSE;
}
static inline bool dlc_op_is_grad(DlcOpKind k) {
    return k >= DLC_OP_RELU_GRAD && k <= DLC_OP_PARAM_GRAD;
}
static inline bool dlc_op_is_update(DlcOpKind k) {
    return k >= DLC_OP_SGD_UPDATE && k <= DLC_OP_DENSE_ADAM_UPDATE;
}
/* dense_sgd_update or dense_adam_update: an update that computes a dense
 * layer's weight gradient itself, from (dy, x), and never stores it */
static inline bool dlc_op_is_dense_update(DlcOpKind k) {
    return k == DLC_OP_DENSE_SGD_UPDATE || k == DLC_OP_DENSE_ADAM_UPDATE;
}
/* clip_norm or clip_scale: gradient clipping, which belongs to the weight
 * update (a step without updates skips it too) */
static inline bool dlc_op_is_clip(DlcOpKind k) {
    return k >= DLC_OP_CLIP_NORM && k <= DLC_OP_CLIP_SCALE;
}
/* quantize, dequantize, qconv2d, qdense, qadd, qconcat, qglobalavgpool:
 * the quantize pass's int8 ops */
static inline bool dlc_op_is_quantized(DlcOpKind k) {
    return k >= DLC_OP_QUANTIZE && k <= DLC_OP_QGLOBALAVGPOOL;
}

/* ------------------------------------------------------------------------ */
/* shape.c — types and shape rules                                          */
/* ------------------------------------------------------------------------ */

typedef enum DlcDType {
    DLC_F32, /* the element type of every tensor a network computes */
    DLC_F64, /* for exact gradient checks */
    DLC_I32, /* class labels */
    DLC_I8,  /* int8 inference (passes/quantize.c): activations and weights,
                symmetric, each with an f32 scale parameter */
    DLC_DTYPE_COUNT
} DlcDType;

#define DLC_MAX_RANK 6

/* A value's type.  Per-sample values carry an implicit leading batch
 * dimension N, printed as f32[N,6,28,28]; dims[] holds the per-sample
 * dimensions only.  Parameters and losses are not batched. */
typedef struct DlcType {
    DlcDType dtype;
    bool batched;                /* has the leading batch dimension N */
    int rank;                    /* number of entries in dims */
    int64_t dims[DLC_MAX_RANK];
} DlcType;

const char *dlc_dtype_name(DlcDType t);
DlcDType dlc_dtype_lookup(const char *name); /* DLC_DTYPE_COUNT if unknown */
bool dlc_type_eq(const DlcType *a, const DlcType *b);
/* Elements per sample (per tensor, for unbatched types); -1 on overflow. */
int64_t dlc_type_numel(const DlcType *t);
/* Formats t into buf (as "f32[N,6,28,28]"); returns buf. */
char *dlc_type_str(const DlcType *t, char *buf, size_t size);
#define DLC_TYPE_STR_MAX 160

/* Largest elements of one tensor dlc accepts: keeps every size computation
 * far from int64 overflow. */
#define DLC_MAX_NUMEL ((int64_t)1 << 40)

/* How a parameter is initialized before training. */
typedef enum DlcInit {
    DLC_INIT_ZEROS,
    DLC_INIT_ONES,
    DLC_INIT_KAIMING_UNIFORM, /* PyTorch's default for conv and dense weights */
    DLC_INIT_NORMAL,          /* normal(0, 1): torch.nn.Embedding's weight */
    DLC_INIT_COUNT
} DlcInit;

const char *dlc_init_name(DlcInit i);
DlcInit dlc_init_lookup(const char *name); /* DLC_INIT_COUNT if unknown */

/* the most parameters an op has: qconcat's, a scale per operand (at most
 * 16) and its result's */
#define DLC_MAX_PARAMS_PER_OP 17
#define DLC_MAX_RESULTS 3

/* The shape rule's view of an op: operand types and attributes in, result
 * types and the op's parameters out.  Infer functions report user errors
 * at `loc` and return false. */
struct DlcInfer {
    DlcCtx *ctx;
    DlcLoc loc;
    DlcOpKind kind;
    const DlcType *in; /* the user's tensor operands (not parameters) */
    int nin;
    DlcAttr *attrs;    /* filled with defaults; infer may check them */
    const DlcType *declared; /* the result types given by the builder or the
                                IR text, or NULL: rules that cannot compute
                                their result check these instead */
    /* results */
    DlcType out[DLC_MAX_RESULTS];
    int nout;
    struct {
        const char *role;   /* "weight", "bias", "running_mean", ... */
        DlcType type;
        DlcInit init;
        int64_t fan_in;     /* DlcValue.fan_in: 0 for the shape's */
        bool trainable;     /* false: a buffer (running statistics) */
    } params[DLC_MAX_PARAMS_PER_OP];
    int nparams;
};

/* The shape rules named in ops.def. */
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) bool infer(DlcInfer *inf);
#include "ops.def"
#undef OP

/* Runs op kind's shape rule on `inf`. */
bool dlc_infer(DlcInfer *inf);

/* ------------------------------------------------------------------------ */
/* ir.c — module, networks, values, ops; the builder                        */
/* ------------------------------------------------------------------------ */

typedef struct DlcOp DlcOp;

typedef enum DlcValueKind {
    DLC_VAL_INPUT, /* a network input: per-sample data fed each step */
    DLC_VAL_PARAM, /* a parameter or buffer: state kept across steps */
    DLC_VAL_OP,    /* a result of an op */
} DlcValueKind;

typedef struct DlcValue {
    DlcValueKind kind;
    const char *name; /* unique in its network; printed %name, params @name */
    DlcType type;
    DlcOp *def;       /* DLC_VAL_OP: the op that defines it */
    int result;       /* DLC_VAL_OP: which of def's results */
    DlcLoc loc;       /* where it was defined */
    /* DLC_VAL_PARAM only: */
    DlcInit init;
    int64_t fan_in;   /* kaiming_uniform's bound is 1/sqrt(fan_in): this, or where
                         0 the elements per row (all but the first dimension);
                         a recurrent layer's parameters give its hidden size,
                         as torch.nn.LSTM initializes them */
    bool trainable;   /* false for buffers (batchnorm running statistics) */
} DlcValue;

struct DlcOp {
    DlcOpKind kind;
    DlcValue **in;    /* operands: the user's tensors, then the parameters */
    int nin;
    int nparams;      /* how many of in[] (at the end) are parameters */
    DlcValue *out[DLC_MAX_RESULTS];
    int nout;
    DlcAttr attrs[DLC_MAX_ATTRS]; /* indexed by the op's schema */
    DlcLoc loc;       /* the .dl (or .dlir) place it came from */
};

/* Op's attribute a, typed: an internal error where op's kind has no such
 * attribute, or one of another type (ops.c).  Passes and targets read
 * attributes through these, by attrs.def's names. */
int64_t dlc_attr_int(const DlcOp *op, DlcAttrName a);
double dlc_attr_float(const DlcOp *op, DlcAttrName a);
bool dlc_attr_bool(const DlcOp *op, DlcAttrName a);
const int64_t *dlc_attr_pair(const DlcOp *op, DlcAttrName a);

/* Whether op has a ReLU fused into it (relu=true: conv2d, dense, batchnorm,
 * batchnorm_train, add; see passes/fuse.c).  In ops.c, beside the schemas. */
bool dlc_op_fused_relu(const DlcOp *op);
/* The activation (dlc_op_is_activation) fused into op: the one whose
 * attribute is set (relu=true, sigmoid=true, leaky_relu=true with the
 * leaky ReLU's own attribute, its slope, beside it, ...), or DLC_OP_COUNT
 * for none. */
DlcOpKind dlc_op_fused_activation(const DlcOp *op);
/* The attribute that fuses activation act into an op, spelt as its name
 * (DLC_A_RELU for DLC_OP_RELU, ...); an internal error for an op that is
 * not an activation. */
DlcAttrName dlc_activation_attr(DlcOpKind act);
/* The operand index of the ReLU result y whose gradient op passes its
 * result through (relu_grad=true: relu_grad(op(...), y)), or -1: 1 (x) for
 * maxpool_grad and lrn_grad, 0 for maxpool_train, else the last tensor
 * operand (for a slice, possibly the concatenation y went into). */
int dlc_op_relu_grad_mask(const DlcOp *op);
/* Whether the planes of x ([C,H,W]) are small enough for maxpool_train's
 * i32 argmax, an index in the plane. */
bool dlc_argmax_indexes_planes(const DlcType *x);
/* The operand of concat that slice takes back out of concat's result
 * exactly: concat's result has the type of slice's operand, and the
 * operand lies at slice's begin along slice's axis with slice's result
 * type.  NULL when there is none. */
DlcValue *dlc_concat_operand_sliced(const DlcOp *concat, const DlcOp *slice);
/* A conv2d's or dense's bias parameter, or NULL (bias=false). */
const DlcValue *dlc_op_bias(const DlcOp *op);
/* The operand index of the batchnorm weight of a conv2d with a batchnorm
 * folded in (batchnorm=true; then bias, running mean and running variance
 * follow it); -1 for any other op. */
int dlc_op_folded_batchnorm(const DlcOp *op);
/* Whether a conv2d is 1x1 with stride 1 and no padding: each result
 * position reads its own source position only, so a blocked kernel runs
 * over the plane as one row (codegen/cpu/blocked_conv.c, the tile pass). */
bool dlc_conv_is_pointwise(const DlcOp *op);
/* Whether op reads value v (as an operand or a parameter). */
bool dlc_op_reads(const DlcOp *op, const DlcValue *v);
/* Whether op may write its result over a tensor operand of the same size
 * (the memory plan's in-place sharing): elementwise ops, whose kernels
 * write each element after reading the operands' same element, the
 * copies flatten and reshape (which then copy nothing), clip_scale
 * over its gradient (not its coefficient, which every element reads), and
 * a conv2d with residual=true over its residual (not its source), whose
 * blocked kernel reads each element of r where the same element of the
 * result goes, just before storing it there. */
bool dlc_op_in_place(const DlcOp *op);
/* A convolution op (conv2d, conv2d_grad_input, conv2d_grad_weight): the
 * types of the forward convolution's input *x and output *y, which each
 * of the three reads or writes. */
void dlc_conv_images(const DlcOp *op, const DlcType **x, const DlcType **y);
/* How dlc's own convolution loops compute such an op (passes/tile.c
 * chooses them, codegen/cpu/direct_conv.c writes them): `rows` result
 * channels, each a sum over a source of `channels` planes of h x w padded
 * with zeros by ph, pw, into results of oh x ow.  The source is x, or for
 * the input's gradient dy, padded by the dilated kernel less the forward
 * padding (the result is then x).  False where that padding would be
 * negative. */
typedef struct DlcConvProduct {
    int64_t rows, channels, h, w, ph, pw, oh, ow;
} DlcConvProduct;
bool dlc_conv_product(const DlcOp *op, DlcConvProduct *p);

typedef struct DlcNetwork {
    const char *name;
    DlcLoc loc;
    DlcValue **inputs;
    int ninputs, capinputs;
    DlcValue **params;   /* parameters and buffers, in creation order */
    int nparams, capparams;
    DlcOp **ops;         /* in execution order */
    int nops, capops;
    DlcValue **outputs;
    int noutputs, capoutputs;
    DlcMap names;        /* value name -> DlcValue*, params and values alike */
    DlcMap suffixes;     /* base name -> next numeric suffix to try (intptr_t) */
} DlcNetwork;

/* A configuration value of a train section: numbers, strings, symbols
 * (bare names such as cross_entropy) and calls (sgd(lr=0.1)). */
typedef enum DlcCfgKind {
    DLC_CFG_INT,
    DLC_CFG_FLOAT,
    DLC_CFG_BOOL,
    DLC_CFG_STR,
    DLC_CFG_SYM,
    DLC_CFG_CALL,
    DLC_CFG_LIST,     /* [0.485, 0.456, 0.406]: items in args, keys NULL */
} DlcCfgKind;

typedef struct DlcCfgArg DlcCfgArg;
typedef struct DlcCfg {
    DlcCfgKind kind;
    int64_t i;        /* DLC_CFG_INT */
    double f;         /* DLC_CFG_FLOAT */
    bool b;           /* DLC_CFG_BOOL */
    const char *s;    /* DLC_CFG_STR text, DLC_CFG_SYM/CALL name */
    DlcCfgArg *args;  /* DLC_CFG_CALL arguments, DLC_CFG_LIST items */
    int nargs;
    DlcLoc loc;
} DlcCfg;

struct DlcCfgArg {
    const char *key;  /* NULL for a positional argument */
    DlcCfg val;
    DlcLoc keyloc;    /* of the key (line 0 when unknown: use val.loc) */
};

typedef struct DlcTrainEntry {
    const char *key;
    DlcCfg val;
    DlcLoc loc;       /* of the key */
} DlcTrainEntry;

/* A train section: training defaults for one network. */
typedef struct DlcTrain {
    const char *network;
    DlcLoc loc;
    DlcTrainEntry *entries;
    int nentries, capentries;
} DlcTrain;

typedef struct DlcModule {
    DlcArena arena;      /* owns everything below */
    DlcCtx *ctx;         /* for locations in printed IR and diagnostics */
    const char *source;  /* the file it was compiled from, for the header */
    DlcNetwork **networks;
    int nnetworks, capnetworks;
    DlcTrain **trains;
    int ntrains, captrains;
} DlcModule;

DlcModule *dlc_module_new(DlcCtx *ctx);
void dlc_module_free(DlcModule *m);
DlcNetwork *dlc_module_find_network(const DlcModule *m, const char *name);
/* Whether name is that of a training step autodiff built (NAME.train); the
 * length of NAME in *base_len when it is and base_len is not NULL. */
bool dlc_is_train_network(const char *name, size_t *base_len);
/* The same for a network at one step that the step pass built (NAME.step). */
bool dlc_is_step_network(const char *name, size_t *base_len);
/* ---- layouts (shape.c; docs/ir.md#layouts) ---- */

/* The layout v is stored in: the channels of a block (its producer's
 * layout attribute) or 0, plain.  Inputs and parameters are plain. */
int64_t dlc_value_layout(const DlcValue *v);
/* Elements per sample that v's memory holds: dlc_type_numel of its type,
 * or in a blocked layout its channels rounded up to whole blocks. */
int64_t dlc_value_numel(const DlcValue *v);
/* Why op cannot read its tensor operand i in the layout that operand is
 * in (or, for i = -1, why a network cannot return it), or NULL. */
const char *dlc_layout_mismatch(const DlcOp *op, int i);

/* The same for the f32 network the quantize pass kept for calibration
 * (NAME.calib). */
bool dlc_is_calib_network(const char *name, size_t *base_len);
/* Whether name is that of a network a pass built from another (NAME.train,
 * NAME.step, NAME.calib), which targets emit with it. */
bool dlc_is_derived_network(const char *name);

/* The builder.  Names must be unique in the network: the builder makes a
 * name unique by appending .1, .2, ... when `uniquify` is set, and otherwise
 * returns NULL if it is taken. */
DlcNetwork *dlc_network_new(DlcModule *m, const char *name, DlcLoc loc);
const char *dlc_network_unique_name(DlcModule *m, DlcNetwork *net,
                                    const char *base);
DlcValue *dlc_network_add_input(DlcModule *m, DlcNetwork *net,
                                const char *name, DlcType type, DlcLoc loc);
DlcValue *dlc_network_add_param(DlcModule *m, DlcNetwork *net,
                                const char *name, DlcType type, DlcInit init,
                                bool trainable, DlcLoc loc);
/* Appends an op with operands `in` (tensors then parameters), result types
 * and result names given; returns the op. */
DlcOp *dlc_network_add_op(DlcModule *m, DlcNetwork *net, DlcOpKind kind,
                          DlcValue **in, int nin, int nparams,
                          const DlcAttr *attrs, const DlcType *out_types,
                          const char *const *out_names, int nout, DlcLoc loc);
void dlc_network_add_output(DlcModule *m, DlcNetwork *net, DlcValue *v);
/* Rebuilds the name map after a pass removed values. */
void dlc_network_reindex(DlcModule *m, DlcNetwork *net);

/* ------------------------------------------------------------------------ */
/* train.c — the train section                                              */
/* ------------------------------------------------------------------------ */

DlcTrain *dlc_train_new(DlcModule *m, const char *network, DlcLoc loc);
void dlc_train_add(DlcModule *m, DlcTrain *t, const char *key, DlcCfg val,
                   DlcLoc loc);
const DlcCfg *dlc_train_get(const DlcTrain *t, const char *key);
DlcTrain *dlc_module_find_train(const DlcModule *m, const char *network);
/* Checks keys, value types and ranges against the train schema; reports
 * errors and returns false if any. */
bool dlc_train_check(DlcCtx *ctx, const DlcModule *m, const DlcTrain *t);
/* The argument of a call value by keyword or position, or NULL. */
const DlcCfg *dlc_cfg_arg(const DlcCfg *call, const char *key, int position);
/* An image transform of images(train=..., eval=...), written as a chain
 * (resize(256) -> center_crop(224)), as the text libdlrt parses: the same
 * chain, one step after the other (a new string; free() it). */
char *dlc_train_transform_text(const DlcCfg *v);

/* ------------------------------------------------------------------------ */
/* verify.c                                                                 */
/* ------------------------------------------------------------------------ */

/* Checks the module's invariants: names unique, operands defined before
 * use, arity and attributes as the op table says, result and parameter
 * types as the shape rules compute, outputs defined, train sections valid.
 * Problems are reported as errors at the ops' locations; returns false if
 * there were any. */
bool dlc_verify(DlcCtx *ctx, const DlcModule *m);

/* ------------------------------------------------------------------------ */
/* print.c, parse.c, dot.c — text forms                                     */
/* ------------------------------------------------------------------------ */

/* Prints the module as IR text. */
void dlc_print_module(FILE *out, const DlcModule *m);
/* Shortest decimal text that reads back as exactly x, always with a '.' or
 * an exponent so it reads back as a float. */
void dlc_format_double(char *buf, size_t size, double x);
/* Parses IR text registered in ctx as source `file`.  Returns NULL after
 * reporting errors. */
DlcModule *dlc_parse_ir(DlcCtx *ctx, int file);
/* Writes the networks as a Graphviz digraph. */
void dlc_print_dot(FILE *out, const DlcModule *m);

#endif /* DLC_IR_H */
