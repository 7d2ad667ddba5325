/* shape.c — types and the shape rules of the op table.
 *
 * Each op's rule checks its operands and attributes, computes its result
 * types and declares its parameters (with their shapes and initializers).
 * The elaborator runs the rules to build the IR, and the verifier runs them
 * again to check IR text, so a rule is the single statement of what an op
 * accepts.  Error messages name the op and show the shapes involved. */
#include "ir.h"

#include <math.h>

#include <string.h>

static const char *const dtype_names[DLC_DTYPE_COUNT] = {"f32", "f64", "i32", "i8"};
static const char *const init_names[DLC_INIT_COUNT] = {"zeros", "ones",
                                                       "kaiming_uniform", "normal"};

const char *dlc_dtype_name(DlcDType t) { return dtype_names[t]; }

DlcDType dlc_dtype_lookup(const char *name) {
    for (int i = 0; i < DLC_DTYPE_COUNT; i++)
        if (strcmp(dtype_names[i], name) == 0)
            return (DlcDType)i;
    return DLC_DTYPE_COUNT;
}

const char *dlc_init_name(DlcInit i) { return init_names[i]; }

DlcInit dlc_init_lookup(const char *name) {
    for (int i = 0; i < DLC_INIT_COUNT; i++)
        if (strcmp(init_names[i], name) == 0)
            return (DlcInit)i;
    return DLC_INIT_COUNT;
}

bool dlc_type_eq(const DlcType *a, const DlcType *b) {
    if (a->dtype != b->dtype || a->batched != b->batched || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

int64_t dlc_type_numel(const DlcType *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0 || __builtin_mul_overflow(n, t->dims[i], &n))
            return -1;
    }
    return n;
}

int64_t dlc_value_layout(const DlcValue *v) {
    if (v->kind != DLC_VAL_OP)
        return 0;
    int slot = dlc_op_attr_slot(v->def->kind, DLC_A_LAYOUT);
    return slot >= 0 ? v->def->attrs[slot].i : 0;
}

int64_t dlc_value_numel(const DlcValue *v) {
    int64_t b = dlc_value_layout(v), n = dlc_type_numel(&v->type);
    if (b <= 0 || n <= 0 || v->type.rank != 3)
        return n;
    int64_t c = v->type.dims[0];
    return (c + b - 1) / b * b * (n / c);
}

const char *dlc_layout_mismatch(const DlcOp *op, int i) {
    if (i < 0)
        return "a network returns its tensors in the plain layout";
    int slot = dlc_op_attr_slot(op->kind, DLC_A_LAYOUT);
    int64_t want = slot >= 0 ? op->attrs[slot].i : 0, have = dlc_value_layout(op->in[i]);
    if (op->kind == DLC_OP_REORDER)
        return have == want ? "a reorder to the layout its operand is in already" : NULL;
    if (op->kind == DLC_OP_CONV2D && want && dlc_attr_int(op, DLC_A_GROUPS) > 1) {
        int64_t groups = dlc_attr_int(op, DLC_A_GROUPS), cig = op->in[0]->type.dims[0] / groups;
        bool depthwise = cig == 1 && op->out[0]->type.dims[0] == groups;
        if (depthwise && have != want)
            return "a depthwise convolution in a blocked layout reads its own layout";
        if (!depthwise && have == want && cig % want)
            return "a grouped convolution reads a blocked operand whose groups are whole blocks";
    }
    if (op->kind == DLC_OP_CONV2D && i == 1) /* residual=true's */
        return have == want ? NULL : "a convolution's residual is in the convolution's layout";
    if (have == want || (op->kind == DLC_OP_CONV2D && have == 0))
        return NULL; /* a convolution reads plain operands in any layout */
    if (want == 0)
        return slot >= 0 ? "with layout=0 it reads plain operands"
                         : "it reads plain operands only";
    return "it reads operands in its own layout (or a convolution, plain ones too)";
}

char *dlc_type_str(const DlcType *t, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s[%s", dlc_dtype_name(t->dtype),
                                t->batched ? "N" : "");
    for (int i = 0; i < t->rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld",
                              i || t->batched ? "," : "", (long long)t->dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* ---- helpers for the rules ---------------------------------------------- */

#define A(id) (*dlc_attrs_at(inf->kind, inf->attrs, DLC_A_##id))
#define OPNAME (dlc_op_info(inf->kind)->name)

static const char *tstr(const DlcType *t, char buf[DLC_TYPE_STR_MAX]) {
    return dlc_type_str(t, buf, DLC_TYPE_STR_MAX);
}

static bool is_float(DlcDType t) { return t == DLC_F32 || t == DLC_F64; }

/* The ops that take an i8 operand (passes/quantize.c): the int8 layers,
 * dequantize, and the ops that move values without arithmetic, which
 * keep the operand's scale (max pooling, flatten). */
static bool reads_int8(DlcOpKind k) {
    return k == DLC_OP_DEQUANTIZE || k == DLC_OP_QCONV2D || k == DLC_OP_QDENSE ||
           k == DLC_OP_QADD || k == DLC_OP_QCONCAT || k == DLC_OP_QGLOBALAVGPOOL ||
           k == DLC_OP_MAXPOOL || k == DLC_OP_FLATTEN;
}

/* Operand i must be a batched floating-point tensor of the given rank (or
 * at least min_rank when rank < 0). */
static bool want_tensor(DlcInfer *inf, int i, int rank, int min_rank,
                        const char *layout) {
    const DlcType *t = &inf->in[i];
    char b[DLC_TYPE_STR_MAX];
    if (!is_float(t->dtype) && !(t->dtype == DLC_I8 && reads_int8(inf->kind))) {
        dlc_error(inf->ctx, inf->loc, "%s: expects a floating-point tensor, got %s",
                  OPNAME, tstr(t, b));
        return false;
    }
    if (!t->batched) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: expects a per-sample (batched) tensor, got %s", OPNAME,
                  tstr(t, b));
        return false;
    }
    if ((rank >= 0 && t->rank != rank) || (rank < 0 && t->rank < min_rank)) {
        dlc_error(inf->ctx, inf->loc, "%s: expects a tensor of shape %s, got %s",
                  OPNAME, layout, tstr(t, b));
        return false;
    }
    return true;
}

/* Sizes, strides, pads and counts are bounded so that no arithmetic on
 * them (with dimensions up to DLC_MAX_NUMEL) can overflow int64. */
#define MAX_ATTR_SIZE ((int64_t)1 << 30)

static bool want_positive(DlcInfer *inf, const char *name, int64_t v, int64_t min) {
    if (v < min) {
        dlc_error(inf->ctx, inf->loc, "%s: %s must be at least %lld, got %lld",
                  OPNAME, name, (long long)min, (long long)v);
        return false;
    }
    if (v > MAX_ATTR_SIZE) {
        dlc_error(inf->ctx, inf->loc, "%s: %s must be at most %lld, got %lld",
                  OPNAME, name, (long long)MAX_ATTR_SIZE, (long long)v);
        return false;
    }
    return true;
}

static bool want_pair(DlcInfer *inf, DlcAttrName a, int64_t min) {
    const char *name = dlc_attr_name(a);
    const int64_t *p = dlc_attrs_at(inf->kind, inf->attrs, a)->pair;
    return want_positive(inf, name, p[0], min) && want_positive(inf, name, p[1], min);
}

static void set_out(DlcInfer *inf, DlcDType dt, bool batched, int rank,
                    const int64_t *dims) {
    DlcType *t = &inf->out[inf->nout++];
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->batched = batched;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
}

static void add_param(DlcInfer *inf, const char *role, DlcDType dt, int rank,
                      const int64_t *dims, DlcInit init, bool trainable) {
    int k = inf->nparams++;
    inf->params[k].role = role;
    inf->params[k].init = init;
    inf->params[k].fan_in = 0;
    inf->params[k].trainable = trainable;
    DlcType *t = &inf->params[k].type;
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
}

/* Checks that every result and parameter stays within DLC_MAX_NUMEL. */
static bool check_sizes(DlcInfer *inf) {
    char b[DLC_TYPE_STR_MAX];
    for (int i = 0; i < inf->nout; i++) {
        int64_t n = dlc_type_numel(&inf->out[i]);
        if (n < 0 || n > DLC_MAX_NUMEL) {
            dlc_error(inf->ctx, inf->loc, "%s: result %s is too large", OPNAME,
                      tstr(&inf->out[i], b));
            return false;
        }
    }
    for (int i = 0; i < inf->nparams; i++) {
        int64_t n = dlc_type_numel(&inf->params[i].type);
        if (n < 0 || n > DLC_MAX_NUMEL) {
            dlc_error(inf->ctx, inf->loc, "%s: parameter %s %s is too large",
                      OPNAME, inf->params[i].role, tstr(&inf->params[i].type, b));
            return false;
        }
    }
    return true;
}

/* Output length of a sliding window, PyTorch's (and Caffe's) formula.  In
 * ceil mode the last window may hang over the end, but must start inside the
 * input or the left padding.  Returns < 1 when the window does not fit. */
static int64_t window_out(int64_t in, int64_t kernel, int64_t stride,
                          int64_t pad, int64_t dilation, bool ceil_mode) {
    int64_t span = dilation * (kernel - 1) + 1;
    int64_t room = in + 2 * pad - span;
    if (room < 0)
        return 0;
    int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad)
        out--;
    return out;
}

/* ---- the rules ---------------------------------------------------------- */

/* A convolution's tile (see ops.def), when the tile pass or IR text chose
 * dlc's own loops: they compute ungrouped convolutions as
 * products over a zero-padded copy of the input (docs/passes.md), so the
 * input's padding must be one the loops can make (for the gradient of the
 * input, the padding of dy: at most the dilated kernel's extent), the
 * register block's rows must divide the result's channels `rows`, and its
 * columns be whole registers (or, for the weight gradient, the kernel's
 * width); with filter_lanes, the rows are whole registers and the columns
 * any number of positions (for the weight gradient, the kernel's width).
 * Only conv2d with filter_lanes takes a stride (its positions find their
 * taps through offsets of their own): the other blocks run along the
 * padded plane's rows one position apart.
 * An input gradient with scatter has the same rules: its rows are channels
 * of the input gradient, its columns positions of dy. */
static bool check_tile(DlcInfer *inf, int64_t rows) {
    int64_t v = A(VECTOR).i;
    const int64_t *t = A(TILE).pair, *k = A(KERNEL).pair, *s = A(STRIDE).pair,
                  *p = A(PAD).pair, *d = A(DILATION).pair;
    bool lanes = dlc_attr_true(inf->kind, inf->attrs, DLC_A_FILTER_LANES);
    bool scatter = dlc_attr_true(inf->kind, inf->attrs, DLC_A_SCATTER);
    if (v == 0 && t[0] == 0 && t[1] == 0 && !lanes && !scatter)
        return true;
    const char *why = NULL;
    int layout = dlc_op_attr_slot(inf->kind, DLC_A_LAYOUT);
    int64_t b = layout >= 0 ? inf->attrs[layout].i : 0;
    int64_t groups = A(GROUPS).i, group_rows = groups > 1 ? rows / groups : 0;
    if (v != 16 && v != 32 && v != 64)
        why = "vector must be 16, 32 or 64 (bytes of a SIMD register)";
    else if (b > 0) {
        /* the blocked form (codegen/cpu/blocked_conv.c): rows are whole
           blocks of filters, the last padded, within one group of the
           convolution's (a depthwise one: one block); columns any positions */
        if (lanes || scatter)
            why = "a convolution in a blocked layout has no filter_lanes or scatter";
        else if (t[0] < 1 || t[0] % b || ((rows + b - 1) / b * b) % t[0] || t[1] < 1 ||
                 (group_rows == 1 && t[0] != b) || (group_rows > 1 && group_rows % t[0]))
            why = "in a blocked layout the tile's rows must be whole blocks that divide the "
                  "result's blocks (and its groups'), and its columns positive";
    } else if (groups != 1)
        why = "dlc's own loops need groups=1";
    else if ((s[0] != 1 || s[1] != 1) && (inf->kind != DLC_OP_CONV2D || !lanes))
        why = "dlc's own loops need stride 1, except conv2d with filter_lanes";
    else if (inf->kind == DLC_OP_CONV2D_GRAD_INPUT &&
             (p[0] > (k[0] - 1) * d[0] || p[1] > (k[1] - 1) * d[1]))
        why = "dlc's own loops need a padding no larger than the dilated kernel";
    else if (t[0] < 1 || rows % t[0])
        why = "the tile's rows must divide the result's channels";
    else if (lanes) {
        if (t[0] % (v / 4) || t[1] < 1)
            why = "with filter_lanes the tile's rows must be a multiple of the floats in a "
                  "register, and its columns positive";
        else if (inf->kind == DLC_OP_CONV2D_GRAD_WEIGHT && t[1] != k[1])
            why = "the tile's columns must be the kernel's width";
    } else if (inf->kind == DLC_OP_CONV2D_GRAD_WEIGHT ? t[1] != k[1]
                                                    : t[1] < 1 || t[1] % (v / 4))
        why = inf->kind == DLC_OP_CONV2D_GRAD_WEIGHT
                  ? "the tile's columns must be the kernel's width"
                  : "the tile's columns must be a multiple of the floats in a register";
    if (why)
        dlc_error(inf->ctx, inf->loc, "%s: tile=[%lld, %lld] vector=%lld: %s", OPNAME,
                  (long long)t[0], (long long)t[1], (long long)v, why);
    return !why;
}

/* An ELU's alpha (the op's, or conv2d's and dense's with elu=true). */
static bool want_elu_alpha(DlcInfer *inf) {
    double alpha = A(ALPHA).f;
    if (!(alpha >= 0) || !isfinite(alpha)) {
        dlc_error(inf->ctx, inf->loc, "%s: alpha must be a finite number, 0 or more, for elu, "
                  "got %g (its gradient is computed from the result)",
                  dlc_op_info(inf->kind)->name, alpha);
        return false;
    }
    return true;
}

/* A fused activation (relu, sigmoid, tanh, leaky_relu, elu: passes/fuse.c)
 * is one at most; a fused leaky ReLU's slope is not negative, since its
 * gradient is computed from the result, whose sign is then the input's (an
 * ELU's alpha is checked as the op's own, below). */
static bool want_one_activation(DlcInfer *inf) {
    if (A(RELU).b + A(SIGMOID).b + A(TANH).b + A(LEAKY_RELU).b + A(ELU).b > 1) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: relu, sigmoid, tanh, leaky_relu and elu exclude each other; set one at "
                  "most", dlc_op_info(inf->kind)->name);
        return false;
    }
    if (A(LEAKY_RELU).b && !(A(SLOPE).f >= 0)) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: leaky_relu=true needs a slope of 0 or more, got %g (its gradient is "
                  "computed from the result); write %s(...) -> leaky_relu(%g)",
                  dlc_op_info(inf->kind)->name, A(SLOPE).f, dlc_op_info(inf->kind)->name,
                  A(SLOPE).f);
        return false;
    }
    if (A(ELU).b && !want_elu_alpha(inf))
        return false;
    return true;
}

/* A convolution's attributes checked against its operand x [C,H,W]: the
 * result's height and width into *oh and *ow (conv2d, qconv2d). */
static bool conv_geometry(DlcInfer *inf, int64_t *oh_out, int64_t *ow_out) {
    int64_t f = A(FILTERS).i, g = A(GROUPS).i;
    if (!want_positive(inf, "filters", f, 1) || !want_pair(inf, DLC_A_KERNEL, 1) ||
        !want_pair(inf, DLC_A_STRIDE, 1) || !want_pair(inf, DLC_A_PAD, 0) ||
        !want_pair(inf, DLC_A_DILATION, 1) || !want_positive(inf, "groups", g, 1))
        return false;
    const DlcType *x = &inf->in[0];
    int64_t c = x->dims[0];
    if (c % g || f % g) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: groups=%lld must divide both the input channels (%lld) "
                  "and filters (%lld)", OPNAME, (long long)g, (long long)c, (long long)f);
        return false;
    }
    const int64_t *k = A(KERNEL).pair, *s = A(STRIDE).pair,
                  *p = A(PAD).pair, *d = A(DILATION).pair;
    int64_t oh = window_out(x->dims[1], k[0], s[0], p[0], d[0], false);
    int64_t ow = window_out(x->dims[2], k[1], s[1], p[1], d[1], false);
    if (oh < 1 || ow < 1) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: kernel %lldx%lld (dilation %lldx%lld) does not fit in "
                  "input %s padded by %lldx%lld",
                  OPNAME, (long long)k[0], (long long)k[1], (long long)d[0], (long long)d[1],
                  tstr(x, b), (long long)p[0], (long long)p[1]);
        return false;
    }
    *oh_out = oh;
    *ow_out = ow;
    return true;
}

bool dlc_infer_conv2d(DlcInfer *inf) {
    int64_t oh, ow;
    if (!want_tensor(inf, 0, 3, 0, "[N,C,H,W]") || !want_one_activation(inf) ||
        !conv_geometry(inf, &oh, &ow))
        return false;
    const DlcType *x = &inf->in[0];
    int64_t f = A(FILTERS).i, c = x->dims[0], g = A(GROUPS).i;
    const int64_t *k = A(KERNEL).pair;
    set_out(inf, x->dtype, true, 3, (int64_t[]){f, oh, ow});
    if (A(RESIDUAL).b) { /* relu?(conv + r): r is the result's twin */
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        if (!dlc_type_eq(&inf->in[1], &inf->out[0])) {
            dlc_error(inf->ctx, inf->loc, "conv2d: residual=true: the residual %s differs from "
                      "the result %s", tstr(&inf->in[1], a), tstr(&inf->out[0], b));
            return false;
        }
        if (A(LAYOUT).i == 0) { /* only blocked_conv.c's epilogue adds one */
            dlc_error(inf->ctx, inf->loc, "conv2d: residual=true needs a blocked layout "
                      "(layout=B); write add(conv2d(...), r)");
            return false;
        }
    }
    add_param(inf, "weight", x->dtype, 4, (int64_t[]){f, c / g, k[0], k[1]},
              DLC_INIT_KAIMING_UNIFORM, true);
    if (A(BIAS).b)
        add_param(inf, "bias", x->dtype, 1, (int64_t[]){f}, DLC_INIT_ZEROS, true);
    if (A(BATCHNORM).b) { /* an inference batchnorm folded in: its parameters */
        if (!(A(BN_EPS).f > 0)) {
            dlc_error(inf->ctx, inf->loc, "conv2d: bn_eps must be positive, got %g", A(BN_EPS).f);
            return false;
        }
        add_param(inf, "bn_weight", x->dtype, 1, &f, DLC_INIT_ONES, true);
        add_param(inf, "bn_bias", x->dtype, 1, &f, DLC_INIT_ZEROS, true);
        add_param(inf, "running_mean", x->dtype, 1, &f, DLC_INIT_ZEROS, false);
        add_param(inf, "running_var", x->dtype, 1, &f, DLC_INIT_ONES, false);
    }
    return check_tile(inf, f) && check_sizes(inf);
}

/* (x) -> [units]; per_step=true: (x [T,F]) -> [T,units], the same layer
 * applied to each step (torch.nn.Linear on the last dimension) */
bool dlc_infer_dense(DlcInfer *inf) {
    bool per_step = dlc_attr_true(inf->kind, inf->attrs, DLC_A_PER_STEP);
    if (!want_tensor(inf, 0, per_step ? 2 : -1, 1, per_step ? "[T,F]" : "[N,...]") ||
        !want_one_activation(inf))
        return false;
    int64_t units = A(UNITS).i;
    if (!want_positive(inf, "units", units, 1))
        return false;
    const DlcType *x = &inf->in[0];
    int64_t in = per_step ? x->dims[1] : dlc_type_numel(x);
    if (per_step)
        set_out(inf, x->dtype, true, 2, (int64_t[]){x->dims[0], units});
    else
        set_out(inf, x->dtype, true, 1, (int64_t[]){units});
    add_param(inf, "weight", x->dtype, 2, (int64_t[]){units, in},
              DLC_INIT_KAIMING_UNIFORM, true);
    if (A(BIAS).b)
        add_param(inf, "bias", x->dtype, 1, (int64_t[]){units}, DLC_INIT_ZEROS, true);
    return check_sizes(inf);
}

/* ---- int8 inference (passes/quantize.c) ---------------------------------- */

/* Operand 0 must be of dtype dt (quantize reads f32, dequantize i8). */
static bool want_dtype(DlcInfer *inf, DlcDType dt) {
    const DlcType *x = &inf->in[0];
    if (x->dtype == dt && x->batched)
        return true;
    char b[DLC_TYPE_STR_MAX];
    dlc_error(inf->ctx, inf->loc, "%s: expects a per-sample %s tensor, got %s", OPNAME,
              dlc_dtype_name(dt), tstr(x, b));
    return false;
}

/* (x of dtype from, @scale f32[]) -> dtype to, x's shape */
static bool retype(DlcInfer *inf, DlcDType from, DlcDType to) {
    if (!want_dtype(inf, from))
        return false;
    DlcType y = inf->in[0];
    y.dtype = to;
    inf->out[inf->nout++] = y;
    add_param(inf, "scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    return true;
}

bool dlc_infer_quantize(DlcInfer *inf) { return retype(inf, DLC_F32, DLC_I8); }

bool dlc_infer_dequantize(DlcInfer *inf) { return retype(inf, DLC_I8, DLC_F32); }

/* The parameters of an int8 layer of n outputs, after its weight: the
 * weight's scales, the bias, the operand's scale and the result's. */
static void add_int8_params(DlcInfer *inf, int64_t n) {
    add_param(inf, "weight_scale", DLC_F32, 1, &n, DLC_INIT_ONES, false);
    add_param(inf, "bias", DLC_F32, 1, &n, DLC_INIT_ZEROS, false);
    add_param(inf, "input_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    if (!A(FLOAT_OUT).b)
        add_param(inf, "output_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
}

bool dlc_infer_qconv2d(DlcInfer *inf) {
    int64_t oh, ow;
    if (!want_dtype(inf, DLC_I8) || !want_tensor(inf, 0, 3, 0, "[N,C,H,W]") ||
        !conv_geometry(inf, &oh, &ow))
        return false;
    const DlcType *x = &inf->in[0];
    int64_t f = A(FILTERS).i, c = x->dims[0], g = A(GROUPS).i;
    const int64_t *k = A(KERNEL).pair;
    set_out(inf, A(FLOAT_OUT).b ? DLC_F32 : DLC_I8, true, 3, (int64_t[]){f, oh, ow});
    add_param(inf, "weight", DLC_I8, 4, (int64_t[]){f, c / g, k[0], k[1]}, DLC_INIT_ZEROS, false);
    add_int8_params(inf, f);
    return check_sizes(inf);
}

/* (x i8 [N,...]) -> [units] */
bool dlc_infer_qdense(DlcInfer *inf) {
    if (!want_dtype(inf, DLC_I8) || !want_tensor(inf, 0, -1, 1, "[N,...]"))
        return false;
    int64_t units = A(UNITS).i;
    if (!want_positive(inf, "units", units, 1))
        return false;
    set_out(inf, A(FLOAT_OUT).b ? DLC_F32 : DLC_I8, true, 1, &units);
    add_param(inf, "weight", DLC_I8, 2, (int64_t[]){units, dlc_type_numel(&inf->in[0])},
              DLC_INIT_ZEROS, false);
    add_int8_params(inf, units);
    return check_sizes(inf);
}

/* (a i8, b i8 of a's type) -> a's type */
bool dlc_infer_qadd(DlcInfer *inf) {
    if (!want_dtype(inf, DLC_I8))
        return false;
    if (!dlc_type_eq(&inf->in[0], &inf->in[1])) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "qadd: the terms differ: %s and %s", tstr(&inf->in[0], a),
                  tstr(&inf->in[1], b));
        return false;
    }
    inf->out[inf->nout++] = inf->in[0];
    add_param(inf, "a_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    add_param(inf, "b_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    add_param(inf, "output_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    return true;
}

/* The role of a concatenation's operand i's scale: scale_1, scale_2, ...
 * (made on first use and kept, as recurrent_role's names are). */
static const char *operand_scale_role(int i) {
    static char roles[DLC_MAX_PARAMS_PER_OP - 1][24];
    if (!roles[i][0])
        snprintf(roles[i], sizeof roles[i], "scale_%d", i + 1);
    return roles[i];
}

/* (x1 i8, ..., xk i8) -> concat's result, a scale per operand */
bool dlc_infer_qconcat(DlcInfer *inf) {
    for (int i = 0; i < inf->nin; i++)
        if (inf->in[i].dtype != DLC_I8) {
            char b[DLC_TYPE_STR_MAX];
            dlc_error(inf->ctx, inf->loc, "qconcat: operand %d is %s: it concatenates i8 "
                      "tensors", i + 1, tstr(&inf->in[i], b));
            return false;
        }
    if (inf->nin > DLC_MAX_PARAMS_PER_OP - 1) {
        dlc_error(inf->ctx, inf->loc, "qconcat: %d operands; it takes at most %d", inf->nin,
                  DLC_MAX_PARAMS_PER_OP - 1);
        return false;
    }
    if (!dlc_infer_concat(inf))
        return false;
    for (int i = 0; i < inf->nin; i++)
        add_param(inf, operand_scale_role(i), DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    add_param(inf, "output_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    return true;
}

/* (x i8 [N,C,H,W]) -> i8 [N,C,1,1] */
bool dlc_infer_qglobalavgpool(DlcInfer *inf) {
    if (!want_dtype(inf, DLC_I8) || !dlc_infer_globalavgpool(inf))
        return false;
    if (inf->in[0].dims[1] * inf->in[0].dims[2] >= (1 << 23)) {
        dlc_error(inf->ctx, inf->loc, "qglobalavgpool: planes of %lld values; the int32 sums "
                  "take at most 2^23", (long long)(inf->in[0].dims[1] * inf->in[0].dims[2]));
        return false;
    }
    add_param(inf, "input_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    add_param(inf, "output_scale", DLC_F32, 0, NULL, DLC_INIT_ONES, false);
    return true;
}

/* ---- recurrent layers ---------------------------------------------------- */

/* A recurrent layer's index in its parameters' names is below this. */
#define MAX_RECURRENT_LAYER 100

/* Parameter `which` (weight_ih, weight_hh, bias_ih, bias_hh) of layer
 * `layer` in one direction, named as torch.nn.LSTM names it: weight_ih_l0,
 * bias_hh_l1_reverse.  The names are made on first use and kept, as the op
 * table is: the shape rules have no arena. */
static const char *recurrent_role(int which, int64_t layer, bool reverse) {
    static char roles[MAX_RECURRENT_LAYER][2][4][24];
    static const char *const base[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    char *r = roles[layer][reverse][which];
    if (!r[0])
        snprintf(r, sizeof roles[0][0][0], "%s_l%lld%s", base[which], (long long)layer,
                 reverse ? "_reverse" : "");
    return r;
}

/* The attributes every recurrent form checks: the hidden size and the
 * layer's index; layers and bidirectional are the frontend's, which writes
 * one op per layer and direction. */
static bool want_recurrent_attrs(DlcInfer *inf) {
    if (!want_positive(inf, "hidden", A(HIDDEN).i, 1))
        return false;
    if (A(LAYER).i < 0 || A(LAYER).i >= MAX_RECURRENT_LAYER) {
        dlc_error(inf->ctx, inf->loc, "%s: layer must be between 0 and %d, got %lld", OPNAME,
                  MAX_RECURRENT_LAYER - 1, (long long)A(LAYER).i);
        return false;
    }
    if (A(VECTOR).i < 0) {
        dlc_error(inf->ctx, inf->loc, "%s: vector must be 0 or more, got %lld", OPNAME,
                  (long long)A(VECTOR).i);
        return false;
    }
    if (A(LAYERS).i != 1 || A(BIDIRECTIONAL).b || A(DROPOUT).f != 0) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: layers, bidirectional and dropout are expanded by the frontend; in IR "
                  "text write one op per layer and direction (layer=K, reverse=true)", OPNAME);
        return false;
    }
    if (A(STATEFUL).b && A(REVERSE).b) {
        dlc_error(inf->ctx, inf->loc,
                  "%s: stateful=true carries the state from one chunk's last step to the next "
                  "chunk's first; a reverse direction starts at its chunk's end and cannot",
                  OPNAME);
        return false;
    }
    return true;
}

/* With lengths=true, operand i must be the sequences' lengths: i32[], one
 * per sample. */
static bool want_lengths(DlcInfer *inf, int i) {
    if (!A(LENGTHS).b)
        return true;
    const DlcType *t = &inf->in[i];
    if (t->dtype != DLC_I32 || !t->batched || t->rank != 0) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: the sequences' lengths must be i32[] (one per "
                  "sample), got %s", OPNAME, tstr(t, b));
        return false;
    }
    return true;
}

/* (x [T,F][, lengths i32[]]) -> y [T,H], or [H] with last=true; weight_ih [G*H,F],
 * weight_hh [G*H,H], bias_ih and bias_hh [G*H], each uniform in
 * +-1/sqrt(H) as PyTorch initializes them */
bool dlc_infer_recurrent(DlcInfer *inf) {
    const DlcType *x = &inf->in[0];
    if (!is_float(x->dtype) || !x->batched || x->rank != 2) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: expects a sequence of shape [T,F] (steps, then features), got %s",
                  OPNAME, tstr(x, b));
        return false;
    }
    if (!want_recurrent_attrs(inf) || !want_lengths(inf, 1))
        return false;
    DlcOpKind cell = dlc_recurrent_cell(inf->kind);
    int64_t t = x->dims[0], f = x->dims[1], h = A(HIDDEN).i;
    int64_t gh = dlc_recurrent_gates(cell) * h, layer = A(LAYER).i;
    bool reverse = A(REVERSE).b;
    if (A(LAST).b)
        set_out(inf, x->dtype, true, 1, &h);
    else
        set_out(inf, x->dtype, true, 2, (int64_t[]){t, h});
    add_param(inf, recurrent_role(0, layer, reverse), x->dtype, 2, (int64_t[]){gh, f},
              DLC_INIT_KAIMING_UNIFORM, true);
    add_param(inf, recurrent_role(1, layer, reverse), x->dtype, 2, (int64_t[]){gh, h},
              DLC_INIT_KAIMING_UNIFORM, true);
    add_param(inf, recurrent_role(2, layer, reverse), x->dtype, 1, &gh,
              DLC_INIT_KAIMING_UNIFORM, true);
    add_param(inf, recurrent_role(3, layer, reverse), x->dtype, 1, &gh,
              DLC_INIT_KAIMING_UNIFORM, true);
    for (int i = 0; i < 4; i++)
        inf->params[i].fan_in = h;
    return check_sizes(inf);
}

/* (x) -> (y, hprev [T,H], cache [T,S*H]) */
bool dlc_infer_recurrent_train(DlcInfer *inf) {
    if (!dlc_infer_recurrent(inf))
        return false;
    const DlcType *x = &inf->in[0];
    int64_t t = x->dims[0], h = A(HIDDEN).i;
    set_out(inf, x->dtype, true, 2, (int64_t[]){t, h});
    set_out(inf, x->dtype, true, 2,
            (int64_t[]){t, dlc_recurrent_cache(dlc_recurrent_cell(inf->kind)) * h});
    return check_sizes(inf);
}

/* (dy, cache, hprev[, lengths], @weight_hh) -> dpre [T,G*H]; gru_grad
 * (dpre_ih, dpre_hh) */
bool dlc_infer_recurrent_grad(DlcInfer *inf) {
    if (!want_recurrent_attrs(inf) || !want_tensor(inf, 0, A(LAST).b ? 1 : 2, 0, "[T,H]") ||
        !want_tensor(inf, 1, 2, 0, "[T,S]") || !want_tensor(inf, 2, 2, 0, "[T,H]") ||
        !want_lengths(inf, 3))
        return false;
    DlcOpKind cell = dlc_recurrent_cell(inf->kind);
    const DlcType *dy = &inf->in[0], *cache = &inf->in[1], *hprev = &inf->in[2];
    int64_t t = hprev->dims[0], h = A(HIDDEN).i, gh = dlc_recurrent_gates(cell) * h;
    DlcType want_dy = *hprev;
    if (A(LAST).b) {
        want_dy.rank = 1;
        want_dy.dims[0] = h;
    }
    DlcType want_cache = *hprev;
    want_cache.dims[1] = dlc_recurrent_cache(cell) * h;
    if (hprev->dims[1] != h || !dlc_type_eq(dy, &want_dy) || !dlc_type_eq(cache, &want_cache)) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX], c[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: gradient %s, cache %s and previous states %s do not fit hidden=%lld",
                  OPNAME, tstr(dy, a), tstr(cache, b), tstr(hprev, c), (long long)h);
        return false;
    }
    int nout = cell == DLC_OP_GRU ? 2 : 1;
    for (int i = 0; i < nout; i++)
        set_out(inf, dy->dtype, true, 2, (int64_t[]){t, gh});
    add_param(inf, recurrent_role(1, A(LAYER).i, A(REVERSE).b), dy->dtype, 2,
              (int64_t[]){gh, h}, DLC_INIT_KAIMING_UNIFORM, true);
    inf->params[0].fan_in = h;
    return check_sizes(inf);
}

/* ---- embedding ----------------------------------------------------------- */

/* Operand i must be token ids: i32 per sample, one [] or a sequence [T]. */
static bool want_tokens(DlcInfer *inf, int i) {
    const DlcType *t = &inf->in[i];
    if (t->dtype != DLC_I32 || !t->batched || t->rank > 1) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: expects token ids of type i32[T] (or i32[]), got %s",
                  OPNAME, tstr(t, b));
        return false;
    }
    return true;
}

/* (tokens i32[T]) -> [T, dim]; weight [vocab, dim], normal(0, 1) */
bool dlc_infer_embedding(DlcInfer *inf) {
    if (!want_tokens(inf, 0) || !want_positive(inf, "vocab", A(VOCAB).i, 1) ||
        !want_positive(inf, "dim", A(DIM).i, 1))
        return false;
    const DlcType *t = &inf->in[0];
    int64_t dims[2] = {t->dims[0], A(DIM).i};
    set_out(inf, DLC_F32, true, t->rank + 1, t->rank ? dims : dims + 1);
    add_param(inf, "weight", DLC_F32, 2, (int64_t[]){A(VOCAB).i, A(DIM).i}, DLC_INIT_NORMAL, true);
    return check_sizes(inf);
}

/* (dy [T, dim], tokens i32[T]) -> [vocab, dim], the weight's type */
bool dlc_infer_embedding_grad(DlcInfer *inf) {
    if (!want_tokens(inf, 1) || !want_positive(inf, "vocab", A(VOCAB).i, 1) ||
        !want_positive(inf, "dim", A(DIM).i, 1))
        return false;
    DlcType want = inf->in[1];
    want.dtype = inf->in[0].dtype;
    want.dims[want.rank++] = A(DIM).i;
    if (!is_float(inf->in[0].dtype) || !dlc_type_eq(&inf->in[0], &want)) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "embedding_grad: gradient %s does not fit tokens %s",
                  tstr(&inf->in[0], a), tstr(&inf->in[1], b));
        return false;
    }
    set_out(inf, inf->in[0].dtype, false, 2, (int64_t[]){A(VOCAB).i, A(DIM).i});
    return check_sizes(inf);
}

bool dlc_infer_batchnorm(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,C,...]"))
        return false;
    double eps = A(EPS).f, momentum = A(MOMENTUM).f;
    if (!(eps > 0)) {
        dlc_error(inf->ctx, inf->loc, "batchnorm: eps must be positive, got %g", eps);
        return false;
    }
    if (!(momentum >= 0 && momentum <= 1)) {
        dlc_error(inf->ctx, inf->loc,
                  "batchnorm: momentum must be between 0 and 1, got %g", momentum);
        return false;
    }
    const DlcType *x = &inf->in[0];
    int64_t c = x->dims[0];
    DlcDType dt = x->dtype;
    set_out(inf, dt, true, x->rank, x->dims);
    add_param(inf, "weight", dt, 1, &c, DLC_INIT_ONES, true);
    add_param(inf, "bias", dt, 1, &c, DLC_INIT_ZEROS, true);
    add_param(inf, "running_mean", dt, 1, &c, DLC_INIT_ZEROS, false);
    add_param(inf, "running_var", dt, 1, &c, DLC_INIT_ONES, false);
    return check_sizes(inf);
}

/* (x) -> (y, mean [C], invstd [C]), with batchnorm's parameters */
bool dlc_infer_batchnorm_train(DlcInfer *inf) {
    if (!dlc_infer_batchnorm(inf))
        return false;
    const DlcType *x = &inf->in[0];
    set_out(inf, x->dtype, false, 1, x->dims);
    set_out(inf, x->dtype, false, 1, x->dims);
    return true;
}

/* Operands first and first + 1 are batch statistics (mean, invstd [C]) of
 * operand 0. */
static bool want_statistics(DlcInfer *inf, int first) {
    for (int i = first; i < first + 2; i++) {
        const DlcType *s = &inf->in[i];
        if (s->batched || s->rank != 1 || s->dims[0] != inf->in[0].dims[0] ||
            s->dtype != inf->in[0].dtype) {
            char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
            dlc_error(inf->ctx, inf->loc, "%s: statistics %s do not fit %s", OPNAME,
                      tstr(s, a), tstr(&inf->in[0], b));
            return false;
        }
    }
    return true;
}

/* (dy, x, mean [C], invstd [C]): the checks both batchnorm gradients share */
static bool want_batchnorm_grad(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,C,...]") || !want_tensor(inf, 1, -1, 1, "[N,C,...]"))
        return false;
    if (!dlc_type_eq(&inf->in[0], &inf->in[1])) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: gradient %s does not fit input %s", OPNAME,
                  tstr(&inf->in[0], a), tstr(&inf->in[1], b));
        return false;
    }
    return want_statistics(inf, 2);
}

/* (dy, x, mean, invstd, @weight [C]) -> dx */
bool dlc_infer_batchnorm_grad_input(DlcInfer *inf) {
    if (!want_batchnorm_grad(inf))
        return false;
    const DlcType *x = &inf->in[1];
    inf->out[inf->nout++] = *x;
    add_param(inf, "weight", x->dtype, 1, x->dims, DLC_INIT_ONES, true);
    return true;
}

/* (dy, x, mean, invstd) -> the weight's gradient [C] */
bool dlc_infer_batchnorm_grad_weight(DlcInfer *inf) {
    if (!want_batchnorm_grad(inf))
        return false;
    set_out(inf, inf->in[1].dtype, false, 1, inf->in[1].dims);
    return true;
}

/* (x, mean [C], invstd [C]) -> x's type, with batchnorm's weight and bias */
bool dlc_infer_batchnorm_normalize(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,C,...]") || !want_statistics(inf, 1))
        return false;
    const DlcType *x = &inf->in[0];
    inf->out[inf->nout++] = *x;
    add_param(inf, "weight", x->dtype, 1, x->dims, DLC_INIT_ONES, true);
    add_param(inf, "bias", x->dtype, 1, x->dims, DLC_INIT_ZEROS, true);
    return true;
}

/* Elementwise ops of one operand: any floating-point tensor, same type out. */
bool dlc_infer_same(DlcInfer *inf) {
    const DlcType *x = &inf->in[0];
    if (!is_float(x->dtype)) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: expects a floating-point tensor, got %s",
                  OPNAME, tstr(x, b));
        return false;
    }
    inf->out[inf->nout++] = *x;
    return true;
}

bool dlc_infer_dropout(DlcInfer *inf) {
    double p = A(P).f;
    if (!(p >= 0 && p < 1)) {
        dlc_error(inf->ctx, inf->loc, "%s: p must be at least 0 and less than 1, got %g",
                  OPNAME, p);
        return false;
    }
    return dlc_infer_same(inf);
}

/* (x) -> (y, mask), both of x's type */
bool dlc_infer_dropout_train(DlcInfer *inf) {
    if (!dlc_infer_dropout(inf))
        return false;
    inf->out[inf->nout++] = inf->out[0];
    return true;
}

bool dlc_infer_add(DlcInfer *inf) {
    /* the terms: every operand but relu_grad's mask, checked by dlc_infer */
    int nterms = inf->nin - dlc_relu_grad_operand(inf->kind, inf->attrs);
    for (int i = 1; i < nterms; i++)
        if (!dlc_type_eq(&inf->in[0], &inf->in[i])) {
            char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
            if (nterms == 2)
                dlc_error(inf->ctx, inf->loc, "add: shapes differ: %s and %s",
                          tstr(&inf->in[0], a), tstr(&inf->in[i], b));
            else
                dlc_error(inf->ctx, inf->loc, "add: shapes differ: operand 1 is %s, operand %d %s",
                          tstr(&inf->in[0], a), i + 1, tstr(&inf->in[i], b));
            return false;
        }
    return dlc_infer_same(inf);
}

bool dlc_infer_pool(DlcInfer *inf) {
    if (!want_tensor(inf, 0, 3, 0, "[N,C,H,W]"))
        return false;
    if (!want_pair(inf, DLC_A_KERNEL, 1) || !want_pair(inf, DLC_A_STRIDE, 1) ||
        !want_pair(inf, DLC_A_PAD, 0))
        return false;
    const int64_t *k = A(KERNEL).pair, *s = A(STRIDE).pair, *p = A(PAD).pair;
    bool ceil_mode = A(CEIL_MODE).b;
    if (inf->kind == DLC_OP_MAXPOOL && A(BAND).i < 0) {
        dlc_error(inf->ctx, inf->loc, "%s: band=%lld: the band's output rows must be 0 or more",
                  OPNAME, (long long)A(BAND).i);
        return false;
    }
    for (int i = 0; i < 2; i++)
        if (2 * p[i] > k[i]) {
            dlc_error(inf->ctx, inf->loc,
                      "%s: pad %lldx%lld is more than half the kernel %lldx%lld",
                      OPNAME, (long long)p[0], (long long)p[1], (long long)k[0],
                      (long long)k[1]);
            return false;
        }
    const DlcType *x = &inf->in[0];
    int64_t oh = window_out(x->dims[1], k[0], s[0], p[0], 1, ceil_mode);
    int64_t ow = window_out(x->dims[2], k[1], s[1], p[1], 1, ceil_mode);
    if (oh < 1 || ow < 1) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: kernel %lldx%lld does not fit in input %s padded by %lldx%lld",
                  OPNAME, (long long)k[0], (long long)k[1], tstr(x, b),
                  (long long)p[0], (long long)p[1]);
        return false;
    }
    set_out(inf, x->dtype, true, 3, (int64_t[]){x->dims[0], oh, ow});
    return true;
}

bool dlc_infer_globalavgpool(DlcInfer *inf) {
    if (!want_tensor(inf, 0, 3, 0, "[N,C,H,W]"))
        return false;
    set_out(inf, inf->in[0].dtype, true, 3, (int64_t[]){inf->in[0].dims[0], 1, 1});
    return true;
}

/* (x [C,H,W]) -> x's type in another layout (layout=B: docs/ir.md#layouts) */
bool dlc_infer_reorder(DlcInfer *inf) {
    if (!want_tensor(inf, 0, 3, 0, "[N,C,H,W]"))
        return false;
    inf->out[inf->nout++] = inf->in[0];
    return true;
}

bool dlc_infer_flatten(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 0, "[N,...]"))
        return false;
    int64_t n = dlc_type_numel(&inf->in[0]);
    set_out(inf, inf->in[0].dtype, true, 1, &n);
    return true;
}

/* Normalizes an axis attribute against a rank; -1 if out of range. */
static int norm_axis(int64_t axis, int rank) {
    if (axis < -rank || axis >= rank)
        return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

bool dlc_infer_concat(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,C,...]"))
        return false;
    const DlcType *x = &inf->in[0];
    int axis = norm_axis(A(AXIS).i, x->rank);
    if (axis < 0) {
        dlc_error(inf->ctx, inf->loc, "concat: axis %lld is out of range for rank %d",
                  (long long)A(AXIS).i, x->rank);
        return false;
    }
    DlcType out = *x;
    for (int i = 1; i < inf->nin; i++) {
        const DlcType *y = &inf->in[i];
        bool ok = y->dtype == x->dtype && y->batched && y->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = d == axis || y->dims[d] == x->dims[d];
        if (!ok) {
            char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
            dlc_error(inf->ctx, inf->loc,
                      "concat: operand %d has shape %s, which does not match %s "
                      "except along axis %d", i + 1, tstr(y, b), tstr(x, a), axis);
            return false;
        }
        out.dims[axis] += y->dims[axis];
    }
    inf->out[inf->nout++] = out;
    return check_sizes(inf);
}

bool dlc_infer_softmax(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,...]"))
        return false;
    if (norm_axis(A(AXIS).i, inf->in[0].rank) < 0) {
        dlc_error(inf->ctx, inf->loc, "softmax: axis %lld is out of range for rank %d",
                  (long long)A(AXIS).i, inf->in[0].rank);
        return false;
    }
    inf->out[inf->nout++] = inf->in[0];
    return true;
}

bool dlc_infer_leaky_relu(DlcInfer *inf) {
    if (!isfinite(A(SLOPE).f)) {
        dlc_error(inf->ctx, inf->loc, "%s: slope must be a finite number, got %g", OPNAME,
                  A(SLOPE).f);
        return false;
    }
    return dlc_infer_same(inf);
}

/* [N,...] -> same: ELU, whose alpha is a finite number 0 or more, so that
 * its gradient can be computed from its result (y > 0 exactly where x > 0,
 * and alpha * exp(x) = y + alpha elsewhere) */
bool dlc_infer_elu(DlcInfer *inf) {
    return want_elu_alpha(inf) && dlc_infer_same(inf);
}

/* [N,C,...] -> same: normalized over a window of `size` channels */
bool dlc_infer_lrn(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,C,...]"))
        return false;
    int64_t size = A(SIZE).i;
    double alpha = A(ALPHA).f, beta = A(BETA).f, k = A(K).f;
    if (size < 1 || size > inf->in[0].dims[0] * 2 + 1) {
        dlc_error(inf->ctx, inf->loc, "%s: size must be from 1 to 2 * channels + 1 (%lld), got "
                  "%lld", OPNAME, (long long)(inf->in[0].dims[0] * 2 + 1), (long long)size);
        return false;
    }
    if (!(alpha >= 0) || !isfinite(alpha) || !(beta >= 0) || !isfinite(beta) || !(k > 0) ||
        !isfinite(k)) {
        dlc_error(inf->ctx, inf->loc, "%s: needs alpha >= 0, beta >= 0 and k > 0, got alpha=%g, "
                  "beta=%g, k=%g", OPNAME, alpha, beta, k);
        return false;
    }
    inf->out[inf->nout++] = inf->in[0];
    return true;
}

/* (logits [classes], labels i32[]) -> the batch's mean; or at every step
 * of a sequence, (logits [T,classes], labels i32[T]) -> the mean over the
 * batch's steps (a language model's) */
bool dlc_infer_cross_entropy(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 1, "[N,classes] or [N,T,classes]"))
        return false;
    const DlcType *x = &inf->in[0], *y = &inf->in[1];
    if (x->rank > 2) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "cross_entropy: expects logits [classes] or, at every "
                  "step, [T,classes], got %s", tstr(x, b));
        return false;
    }
    if (y->dtype != DLC_I32 || !y->batched || y->rank != x->rank - 1 ||
        (x->rank == 2 && y->dims[0] != x->dims[0])) {
        char b[DLC_TYPE_STR_MAX], c[DLC_TYPE_STR_MAX];
        DlcType want = {.dtype = DLC_I32, .batched = true, .rank = x->rank - 1,
                        .dims = {x->dims[0]}};
        dlc_error(inf->ctx, inf->loc,
                  "cross_entropy: labels must be class indices of type %s, got %s",
                  tstr(&want, c), tstr(y, b));
        return false;
    }
    set_out(inf, inf->in[0].dtype, false, 0, NULL);
    return true;
}

bool dlc_infer_mse(DlcInfer *inf) {
    if (!want_tensor(inf, 0, -1, 0, "[N,...]"))
        return false;
    if (!dlc_type_eq(&inf->in[0], &inf->in[1])) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "mse: prediction %s and target %s differ in shape",
                  tstr(&inf->in[0], a), tstr(&inf->in[1], b));
        return false;
    }
    set_out(inf, inf->in[0].dtype, false, 0, NULL);
    return true;
}

/* An op's layout attribute (docs/ir.md#layouts), as far as the op alone
 * tells: a block of 4, 8 or 16 channels (the floats of an SSE or NEON, AVX
 * or AVX-512 register) over operands of [C, H, W]; a concatenation along
 * the channels of whole blocks; a grouped convolution whose groups are
 * whole blocks of filters, or depthwise.  Whether
 * each operand arrives in the layout the op reads is the verifier's check
 * (dlc_layout_mismatch), which sees the producers. */
static bool check_layout(DlcInfer *inf) {
    int slot = dlc_op_attr_slot(inf->kind, DLC_A_LAYOUT);
    int64_t b = slot >= 0 ? inf->attrs[slot].i : 0;
    if (b == 0)
        return true;
    const char *why = NULL;
    if (b != 4 && b != 8 && b != 16)
        why = "layout must be 0 (plain) or a block of 4, 8 or 16 channels";
    for (int i = 0; !why && i < inf->nin; i++)
        if (!inf->in[i].batched || inf->in[i].rank != 3)
            why = "a blocked layout needs operands of [N,C,H,W]";
    if (!why && inf->kind == DLC_OP_CONV2D && A(GROUPS).i != 1) {
        int64_t groups = A(GROUPS).i, cig = inf->in[0].dims[0] / groups, cog = A(FILTERS).i / groups;
        if (!(cig == 1 && cog == 1) && cog % b)
            why = "a grouped convolution in a blocked layout needs whole blocks of filters "
                  "in each group, or one channel and one filter in each (depthwise)";
    }
    if (!why && inf->kind == DLC_OP_CONV2D && A(VECTOR).i == 0)
        why = "a convolution in a blocked layout needs a register block (tile and vector)";
    if (!why && inf->kind == DLC_OP_CONCAT) {
        if (norm_axis(A(AXIS).i, 3) != 0)
            why = "a concatenation in a blocked layout joins channels (axis=0)";
        for (int i = 0; !why && i < inf->nin; i++)
            if (inf->in[i].dims[0] % b)
                why = "a concatenation in a blocked layout needs each operand's channels "
                      "in whole blocks";
    }
    if (why) {
        dlc_error(inf->ctx, inf->loc, "%s: layout=%lld: %s", OPNAME, (long long)b, why);
        return false;
    }
    return true;
}

bool dlc_infer(DlcInfer *inf) {
    const DlcOpInfo *op = dlc_op_info(inf->kind);
    inf->nout = 0;
    inf->nparams = 0;
    /* relu_grad=true: the ReLU's result follows the op's own operands */
    bool relu_y = dlc_relu_grad_operand(inf->kind, inf->attrs);
    /* relu_grad=true, a recurrent layer's lengths=true and conv2d's
       residual=true add an operand */
    bool residual = dlc_attr_true(inf->kind, inf->attrs, DLC_A_RESIDUAL);
    int arity = (op->arity >= 0 ? op->arity : 2) + relu_y + residual +
                dlc_attr_true(inf->kind, inf->attrs, DLC_A_LENGTHS); /* -1: at least 2 */
    if (op->arity >= 0 ? inf->nin != arity : inf->nin < arity) {
        dlc_error(inf->ctx, inf->loc, "%s: expects %s%d tensor operand%s%s, got %d", op->name,
                  op->arity < 0 ? "at least " : "", arity, arity == 1 ? "" : "s",
                  relu_y ? " (the last the ReLU's result, for relu_grad=true)"
                  : dlc_attr_true(inf->kind, inf->attrs, DLC_A_LENGTHS)
                      ? " (the last the sequences' lengths, for lengths=true)"
                  : residual ? " (the last the residual, for residual=true)" : "",
                  inf->nin);
        return false;
    }
    for (int i = 0; i < inf->nin; i++)
        if (inf->in[i].dtype == DLC_I8 && !reads_int8(inf->kind)) {
            char b[DLC_TYPE_STR_MAX];
            dlc_error(inf->ctx, inf->loc, "%s: operand %d is int8 (%s); %s takes no int8 "
                      "tensor: dequantize it first", op->name, i + 1, tstr(&inf->in[i], b),
                      op->name);
            return false;
        }
    if (!op->infer(inf) || !check_layout(inf))
        return false;
    /* a slice's may be the concatenation the ReLU's result went into, laid
     * out as the slice's operand */
    const DlcType *mask = &inf->in[inf->nin - 1];
    if (relu_y && !dlc_type_eq(mask, &inf->out[0]) &&
        !(inf->kind == DLC_OP_SLICE && dlc_type_eq(mask, &inf->in[0]))) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: relu_grad=true: the ReLU's result %s differs from the result %s%s",
                  op->name, tstr(mask, a), tstr(&inf->out[0], b),
                  inf->kind == DLC_OP_SLICE ? " and from the slice's operand" : "");
        return false;
    }
    return true;
}

/* ---- gradient rules ------------------------------------------------------ */

/* The declared type of result i, or an error if the builder gave none. */
static const DlcType *declared(DlcInfer *inf, int i) {
    if (!inf->declared) {
        dlc_error(inf->ctx, inf->loc, "%s: the result type must be given", OPNAME);
        return NULL;
    }
    return &inf->declared[i];
}

/* Runs forward op `kind` on input x with this op's attributes (the gradient
 * ops share their forward op's schema, attribute for attribute, except for
 * conv2d's bias), and requires its result to be `want`. */
static bool forward_gives(DlcInfer *inf, DlcOpKind kind, const DlcType *x,
                          const DlcType *want) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    const DlcOpInfo *fwd = dlc_op_info(kind), *self = dlc_op_info(inf->kind);
    /* the tile is the gradient's own (check_tile), not the forward's */
    dlc_attrs_like(kind, inf->kind, inf->attrs, attrs);
    if (kind == DLC_OP_CONV2D)
        *dlc_attrs_at(kind, attrs, DLC_A_BIAS) = (DlcAttr){.type = DLC_ATTR_BOOL, .set = true};
    dlc_op_fill_defaults(kind, attrs);
    DlcInfer f = {.ctx = inf->ctx, .loc = inf->loc, .kind = kind, .in = x, .nin = 1,
                  .attrs = attrs};
    if (!fwd->infer(&f))
        return false;
    if (!dlc_type_eq(&f.out[0], want)) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX], c[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: %s of %s gives %s, not the gradient's %s",
                  self->name, fwd->name, tstr(x, a), tstr(&f.out[0], b), tstr(want, c));
        return false;
    }
    return true;
}

static bool want_same_types(DlcInfer *inf) {
    for (int i = 1; i < inf->nin; i++)
        if (!dlc_type_eq(&inf->in[0], &inf->in[i])) {
            char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
            dlc_error(inf->ctx, inf->loc, "%s: operands differ: %s and %s", OPNAME,
                      tstr(&inf->in[0], a), tstr(&inf->in[i], b));
            return false;
        }
    return true;
}

/* (dy, y) -> dx of the type of y: relu, sigmoid, tanh */
bool dlc_infer_grad_same(DlcInfer *inf) {
    return want_same_types(inf) && dlc_infer_same(inf);
}

bool dlc_infer_softmax_grad(DlcInfer *inf) {
    return want_same_types(inf) && dlc_infer_softmax(inf);
}

/* (dy, x, y) -> dx, all of one type */
bool dlc_infer_lrn_grad(DlcInfer *inf) {
    return want_same_types(inf) && dlc_infer_lrn(inf);
}

bool dlc_infer_cross_entropy_grad(DlcInfer *inf) {
    if (!dlc_infer_cross_entropy(inf))
        return false;
    inf->out[0] = inf->in[0];
    return true;
}

bool dlc_infer_mse_grad(DlcInfer *inf) {
    if (!dlc_infer_mse(inf))
        return false;
    inf->out[0] = inf->in[0];
    return true;
}

/* (dy) -> the sum over the batch and all but the first dimension;
 * per_step=true (dy [T,C]): over the batch and the steps */
bool dlc_infer_bias_grad(DlcInfer *inf) {
    bool per_step = dlc_attr_true(inf->kind, inf->attrs, DLC_A_PER_STEP);
    if (!want_tensor(inf, 0, per_step ? 2 : -1, 1, per_step ? "[T,C]" : "[N,C,...]"))
        return false;
    set_out(inf, inf->in[0].dtype, false, 1, &inf->in[0].dims[per_step ? 1 : 0]);
    return true;
}

/* (dy [units], @weight [units, inputs]) -> dx, declared, of `inputs`
 * elements; per_step=true: (dy [T,units]) -> dx [T,inputs] */
bool dlc_infer_dense_grad_input(DlcInfer *inf) {
    bool per_step = dlc_attr_true(inf->kind, inf->attrs, DLC_A_PER_STEP);
    const DlcType *dy = &inf->in[0], *x = declared(inf, 0);
    if (!x || !want_tensor(inf, 0, per_step ? 2 : 1, 0, per_step ? "[T,units]" : "[N,units]"))
        return false;
    if (!x->batched || x->dtype != dy->dtype ||
        (per_step && (x->rank != 2 || x->dims[0] != dy->dims[0]))) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "dense_grad_input: gradient %s cannot give %s",
                  tstr(dy, a), tstr(x, b));
        return false;
    }
    inf->out[inf->nout++] = *x;
    add_param(inf, "weight", dy->dtype, 2,
              (int64_t[]){dy->dims[per_step], per_step ? x->dims[1] : dlc_type_numel(x)},
              DLC_INIT_KAIMING_UNIFORM, true);
    return true;
}

/* (dy [units], x) -> [units, inputs], the weight's type; per_step=true:
 * (dy [T,units], x [T,inputs]) */
bool dlc_infer_dense_grad_weight(DlcInfer *inf) {
    bool per_step = dlc_attr_true(inf->kind, inf->attrs, DLC_A_PER_STEP);
    if (per_step ? !want_tensor(inf, 0, 2, 0, "[T,units]") || !want_tensor(inf, 1, 2, 0, "[T,F]")
                 : !want_tensor(inf, 0, 1, 0, "[N,units]") || !want_tensor(inf, 1, -1, 1, "[N,...]"))
        return false;
    if (per_step && inf->in[0].dims[0] != inf->in[1].dims[0]) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "dense_grad_weight: steps differ: %s and %s",
                  tstr(&inf->in[0], a), tstr(&inf->in[1], b));
        return false;
    }
    int64_t in = per_step ? inf->in[1].dims[1] : dlc_type_numel(&inf->in[1]);
    set_out(inf, inf->in[0].dtype, false, 2, (int64_t[]){inf->in[0].dims[per_step], in});
    return true;
}

/* (dy, @weight) -> dx, declared: conv2d of dx must give dy's shape */
bool dlc_infer_conv2d_grad_input(DlcInfer *inf) {
    const DlcType *x = declared(inf, 0);
    if (!x || !forward_gives(inf, DLC_OP_CONV2D, x, &inf->in[0]))
        return false;
    const int64_t *k = A(KERNEL).pair;
    inf->out[inf->nout++] = *x;
    add_param(inf, "weight", x->dtype, 4,
              (int64_t[]){A(FILTERS).i, x->dims[0] / A(GROUPS).i, k[0], k[1]},
              DLC_INIT_KAIMING_UNIFORM, true);
    return check_tile(inf, x->dims[0]);
}

/* (dy, x) -> the weight's type [filters, channels/groups, kh, kw] */
bool dlc_infer_conv2d_grad_weight(DlcInfer *inf) {
    const DlcType *x = &inf->in[1];
    if (!forward_gives(inf, DLC_OP_CONV2D, x, &inf->in[0]))
        return false;
    const int64_t *k = A(KERNEL).pair;
    set_out(inf, x->dtype, false, 4,
            (int64_t[]){A(FILTERS).i, x->dims[0] / A(GROUPS).i, k[0], k[1]});
    return check_tile(inf, A(FILTERS).i);
}

/* (dy, x) -> dx: the max positions are found again in x */
bool dlc_infer_maxpool_grad(DlcInfer *inf) {
    if (!forward_gives(inf, DLC_OP_MAXPOOL, &inf->in[1], &inf->in[0]))
        return false;
    inf->out[inf->nout++] = inf->in[1];
    return true;
}

/* (x) -> (maxpool's y, its argmax: i32 of y's shape) */
bool dlc_infer_maxpool_train(DlcInfer *inf) {
    if (!dlc_infer_pool(inf))
        return false;
    const DlcType *x = &inf->in[0];
    if (!dlc_argmax_indexes_planes(x)) {
        char b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: the planes of %s have more elements than an i32 "
                  "argmax can index", OPNAME, tstr(x, b));
        return false;
    }
    const DlcType *y = &inf->out[0];
    set_out(inf, DLC_I32, y->batched, y->rank, y->dims);
    return true;
}

/* (dy, argmax) -> the declared x, which maxpool takes to dy's shape */
bool dlc_infer_maxpool_grad_argmax(DlcInfer *inf) {
    const DlcType *x = declared(inf, 0), *dy = &inf->in[0], *at = &inf->in[1];
    if (!x || !forward_gives(inf, DLC_OP_MAXPOOL, x, dy))
        return false;
    if (at->dtype != DLC_I32 || at->batched != dy->batched || at->rank != dy->rank ||
        memcmp(at->dims, dy->dims, sizeof *dy->dims * (size_t)dy->rank) != 0) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: the argmax %s is not an i32 tensor of the gradient's "
                  "shape %s", OPNAME, tstr(at, a), tstr(dy, b));
        return false;
    }
    inf->out[inf->nout++] = *x;
    return true;
}

bool dlc_infer_avgpool_grad(DlcInfer *inf) {
    const DlcType *x = declared(inf, 0);
    if (!x || !forward_gives(inf, DLC_OP_AVGPOOL, x, &inf->in[0]))
        return false;
    inf->out[inf->nout++] = *x;
    return true;
}

bool dlc_infer_globalavgpool_grad(DlcInfer *inf) {
    const DlcType *x = declared(inf, 0);
    if (!x || !forward_gives(inf, DLC_OP_GLOBALAVGPOOL, x, &inf->in[0]))
        return false;
    inf->out[inf->nout++] = *x;
    return true;
}

/* (x) -> the same elements in the declared shape */
bool dlc_infer_reshape(DlcInfer *inf) {
    const DlcType *x = &inf->in[0], *y = declared(inf, 0);
    if (!y)
        return false;
    if (y->dtype != x->dtype || y->batched != x->batched ||
        dlc_type_numel(y) != dlc_type_numel(x)) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "reshape: %s cannot be reshaped to %s", tstr(x, a),
                  tstr(y, b));
        return false;
    }
    inf->out[inf->nout++] = *y;
    return true;
}

/* (x) -> x[..., begin : begin + extent, ...] along axis; the extent is the
 * declared result's */
bool dlc_infer_slice(DlcInfer *inf) {
    const DlcType *x = &inf->in[0], *y = declared(inf, 0);
    if (!y)
        return false;
    int axis = norm_axis(A(AXIS).i, x->rank);
    int64_t begin = A(BEGIN).i;
    bool ok = axis >= 0 && y->dtype == x->dtype && y->batched == x->batched &&
              y->rank == x->rank && begin >= 0;
    for (int d = 0; ok && d < x->rank; d++)
        ok = d == axis ? y->dims[d] <= x->dims[d] - begin : y->dims[d] == x->dims[d];
    if (!ok) {
        char a[DLC_TYPE_STR_MAX], b[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "slice: %s is not a slice of %s along axis %lld from %lld",
                  tstr(y, b), tstr(x, a), (long long)A(AXIS).i, (long long)begin);
        return false;
    }
    inf->out[inf->nout++] = *y;
    return true;
}

/* (g, @param): g is the gradient of the parameter, of its type */
bool dlc_infer_param_grad(DlcInfer *inf) {
    const DlcType *g = &inf->in[0];
    if (g->batched || !is_float(g->dtype)) {
        char a[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "param_grad: %s is not a parameter's gradient", tstr(g, a));
        return false;
    }
    add_param(inf, "gradient target", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, true);
    return true;
}

/* ---- weight updates ----------------------------------------------------- */

/* Operand i must be an unbatched scalar of type dt (a learning rate). */
static bool want_scalar(DlcInfer *inf, int i, DlcDType dt, const char *what) {
    const DlcType *t = &inf->in[i];
    if (t->batched || t->rank != 0 || t->dtype != dt) {
        char a[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc, "%s: the %s must be a %s[] scalar, got %s", OPNAME, what,
                  dlc_dtype_name(dt), tstr(t, a));
        return false;
    }
    return true;
}

static bool want_unit_interval(DlcInfer *inf, DlcAttrName a, bool open_top) {
    const char *name = dlc_attr_name(a);
    double v = dlc_attrs_at(inf->kind, inf->attrs, a)->f;
    if (!(v >= 0 && (open_top ? v < 1 : v <= 1))) {
        dlc_error(inf->ctx, inf->loc, "%s: %s must be in [0, 1%c, got %g", OPNAME, name,
                  open_top ? ')' : ']', v);
        return false;
    }
    return true;
}

/* SGD's parameter (of g's type) and momentum buffer, with lr the scalar
 * operand at `lr` */
static bool sgd_params(DlcInfer *inf, const DlcType *g, int lr) {
    if (!want_scalar(inf, lr, g->dtype, "learning rate") ||
        !want_unit_interval(inf, DLC_A_MOMENTUM, true))
        return false;
    if (!(A(WEIGHT_DECAY).f >= 0)) {
        dlc_error(inf->ctx, inf->loc, "%s: weight_decay must be at least 0", OPNAME);
        return false;
    }
    add_param(inf, "weight", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, true);
    if (A(MOMENTUM).f > 0)
        add_param(inf, "momentum_buffer", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, false);
    return true;
}

/* (g, lr, @p[, @momentum_buffer]) */
bool dlc_infer_sgd_update(DlcInfer *inf) {
    return sgd_params(inf, &inf->in[0], 1);
}

/* The type of the weight gradient that a dense layer's fused update
 * computes from its first two operands (dy, x), as dense_grad_weight's,
 * without adding it as a result. */
static bool dense_gradient(DlcInfer *inf, DlcType *g) {
    if (!dlc_infer_dense_grad_weight(inf))
        return false;
    *g = inf->out[--inf->nout];
    return true;
}

/* (dy, x, lr, @p[, @p.momentum_buffer]): p's type is dense_grad_weight's */
bool dlc_infer_dense_sgd_update(DlcInfer *inf) {
    DlcType g;
    return dense_gradient(inf, &g) && sgd_params(inf, &g, 2);
}

/* Adam's operands from lr (the step count after it) and its parameters,
 * for a gradient of type g. */
static bool adam_params(DlcInfer *inf, const DlcType *g, int lr) {
    if (!want_scalar(inf, lr, g->dtype, "learning rate") ||
        !want_scalar(inf, lr + 1, DLC_I32, "step count") ||
        !want_unit_interval(inf, DLC_A_BETA1, true) || !want_unit_interval(inf, DLC_A_BETA2, true))
        return false;
    if (!(A(EPS).f > 0) || !(A(WEIGHT_DECAY).f >= 0)) {
        dlc_error(inf->ctx, inf->loc, "%s: eps must be positive and weight_decay at least 0",
                  OPNAME);
        return false;
    }
    add_param(inf, "weight", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, true);
    add_param(inf, "exp_avg", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, false);
    add_param(inf, "exp_avg_sq", g->dtype, g->rank, g->dims, DLC_INIT_ZEROS, false);
    return true;
}

/* (g, lr, step, @p, @exp_avg, @exp_avg_sq) */
bool dlc_infer_adam_update(DlcInfer *inf) {
    return adam_params(inf, &inf->in[0], 1);
}

/* (dy, x, lr, step, @p, @p.exp_avg, @p.exp_avg_sq): p's type is
 * dense_grad_weight's */
bool dlc_infer_dense_adam_update(DlcInfer *inf) {
    DlcType g;
    return dense_gradient(inf, &g) && adam_params(inf, &g, 2);
}

/* ---- gradient clipping --------------------------------------------------- */

/* Operand i must be a parameter's gradient (unbatched, floating-point) of
 * element type dt. */
static bool want_gradient(DlcInfer *inf, int i, DlcDType dt) {
    const DlcType *g = &inf->in[i];
    if (g->batched || g->dtype != dt || !is_float(dt)) {
        char a[DLC_TYPE_STR_MAX];
        dlc_error(inf->ctx, inf->loc,
                  "%s: operand %d must be a parameter's gradient (unbatched, %s), got %s", OPNAME,
                  i + 1, is_float(dt) ? dlc_dtype_name(dt) : "f32 or f64", tstr(g, a));
        return false;
    }
    return true;
}

/* (g1, ..., gk, clip) -> the coefficient, a scalar: every gi a parameter's
 * gradient, all of one element type, clip a scalar of it */
bool dlc_infer_clip_norm(DlcInfer *inf) {
    DlcDType dt = inf->in[0].dtype;
    for (int i = 0; i < inf->nin - 1; i++)
        if (!want_gradient(inf, i, dt))
            return false;
    if (!want_scalar(inf, inf->nin - 1, dt, "largest norm"))
        return false;
    set_out(inf, dt, false, 0, NULL);
    return true;
}

/* (g, coefficient) -> g's type */
bool dlc_infer_clip_scale(DlcInfer *inf) {
    if (!want_gradient(inf, 0, inf->in[0].dtype) ||
        !want_scalar(inf, 1, inf->in[0].dtype, "coefficient"))
        return false;
    inf->out[inf->nout++] = inf->in[0];
    return true;
}
