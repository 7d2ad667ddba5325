/* quantize.c — int8 post-training quantization of the inference network
 * (dlc --quantize=int8; docs/quantization.md).
 *
 * For each network NAME that no pass derived, it builds a new NAME whose
 * convolutions and dense layers compute in int8 with int32 sums, and keeps
 * the f32 network it came from as NAME.calib, which calibration runs:
 *
 *   %c = conv2d(%x, @c1.weight, @c1.bias,           %x.q = quantize(%x, @c1.input_scale)
 *          @n.weight, @n.bias, @n.running_mean,     %c = qconv2d(%x.q, @c1.qweight, @c1.weight_scale,
 *          @n.running_var)                 =>             @c1.qbias, @c1.input_scale, @c1.output_scale)
 *          {filters=6, kernel=5, batchnorm=true,             {filters=6, kernel=5, relu=true}
 *           relu=true}                              %p = maxpool(%c) {kernel=2}          (i8)
 *   %p = maxpool(%c) {kernel=2}                     %y = qdense(%p, ...) {units=10, float_out=true}
 *   %y = dense(%p, @f.weight, @f.bias) {units=10}
 *
 * - a conv2d (a batchnorm folded in or not) or a dense layer (not over
 *   steps) with no activation or a ReLU becomes qconv2d or qdense: its
 *   weight int8, symmetric per output channel, with an f32 scale each; its
 *   bias f32 (the batchnorm folded into weight and bias by calibration,
 *   before the weight is quantized); the ReLU folded into the
 *   requantization.  Its parameters are named after the layer (the f32
 *   weight's name less ".weight"): L.qweight, L.weight_scale, L.qbias,
 *   L.output_scale, and L.input_scale where it quantizes its operand;
 * - an activation is int8 per tensor, symmetric: one f32[] scale
 *   parameter per tensor, which calibration sets.  A layer's result keeps
 *   its f32 op's name, so calibration finds each layer's f32 weights by it;
 * - max pooling and flatten of an int8 tensor stay in int8 with its scale
 *   (a maximum of integers of one scale is the integer of the maximum);
 * - an add of two int8 tensors (a residual sum, its ReLU folded in by fuse),
 *   a concatenation of int8 tensors and global average pooling of one
 *   become qadd, qconcat and qglobalavgpool: int8 into a scale of their
 *   own, VALUE.scale, calibrated on the f32 op's result (the operands of
 *   these ops have scales of their own, unlike pooling's, so the result
 *   cannot keep one: requantizing into a scale fitted to it loses least);
 * - dropout of an int8 tensor, the identity at inference, goes (its result
 *   is its operand);
 * - every other op stays f32; `dequantize` goes where an f32 op reads an
 *   int8 tensor, `quantize` where an int8 layer reads an f32 one, one per
 *   tensor however many read it;
 * - a layer whose result the network returns gives f32 scores
 *   (float_out=true) instead of requantizing them;
 * - --quantize-skip=L keeps layer L in f32 (an unknown L is an error);
 * - vnni=true where the target CPU has AVX-512 VNNI (--target-cpu), the
 *   same integers as the portable loops.
 *
 * NAME.calib is the f32 network as it was, returning besides its outputs
 * the f32 tensor each activation scale of NAME is calibrated on, in the
 * order of NAME's scalar parameters (the scales).  Its parameters keep the
 * f32 names that NAME.train trains and a checkpoint of the f32 program
 * holds.  NAME.train stays f32 and as it was.
 *
 * Where it runs: after fuse and before layout and tile.  After fuse,
 * because fuse folds a batchnorm into the convolution before it and a ReLU
 * into its producer, which are exactly the forms quantization needs (the
 * batchnorm in the weights before they are quantized, the ReLU in the
 * requantization): one pattern, conv2d {batchnorm, relu}, instead of the
 * same folds done twice.  Before layout, so that layout sees the int8 ops
 * and leaves them alone: they have no layout attribute, so layout treats
 * them as ops that read plain tensors (a skipped f32 convolution may still
 * go blocked, with a reorder to plain before the int8 op that reads it),
 * and NAME.calib, a derived network, stays plain.
 *
 * Preconditions: the module verifies; fuse has run (or not: an unfused
 * batchnorm or relu then stays an f32 op).  Nothing happens without
 * --quantize=int8. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct Quant {
    DlcCtx *ctx;
    DlcModule *m;
    DlcNetwork *old;   /* the f32 network, which becomes NAME.calib */
    DlcNetwork *net;   /* the int8 network being built, NAME */
    DlcMap now;        /* old value's name -> the new network's value for it */
    DlcMap scale;      /* new i8 value's name -> its scale parameter */
    DlcMap as_f32;     /* new i8 value's name -> its dequantized twin */
    DlcMap as_i8;      /* new f32 value's name -> its quantized twin */
    DlcValue **observed; /* the old values calibration observes, one per scale */
    int nobserved, capobserved;
    bool vnni;         /* the target CPU has AVX-512 VNNI */
} Quant;

/* A layer's name: its f32 weight's, less ".weight". */
static const char *layer_name(DlcModule *m, const DlcOp *op) {
    const char *w = op->in[op->nin - op->nparams]->name;
    size_t n = strlen(w);
    if (n > 7 && strcmp(w + n - 7, ".weight") == 0)
        return dlc_arena_strndup(&m->arena, w, n - 7);
    return w;
}

/* conv2d and dense: the layers the pass may quantize */
static bool is_layer(const DlcOp *op) {
    return op->kind == DLC_OP_CONV2D || op->kind == DLC_OP_DENSE;
}

static bool skipped(const DlcPassOptions *opt, const char *layer) {
    for (int i = 0; opt->quantize_skip && opt->quantize_skip[i]; i++)
        if (strcmp(opt->quantize_skip[i], layer) == 0)
            return true;
    return false;
}

/* Whether op becomes an int8 layer: a conv2d or dense layer with no
 * activation but a ReLU, in the plain layout, not over steps, and (in IR
 * text that fuse-residual has seen) without a residual sum. */
static bool quantizable(const DlcModule *m, const DlcOp *op, const DlcPassOptions *opt) {
    if (!is_layer(op) || skipped(opt, layer_name((DlcModule *)m, op)))
        return false;
    DlcOpKind act = dlc_op_fused_activation(op);
    if (act != DLC_OP_COUNT && act != DLC_OP_RELU)
        return false;
    if (op->kind == DLC_OP_DENSE)
        return !dlc_attr_bool(op, DLC_A_PER_STEP);
    return dlc_attr_int(op, DLC_A_LAYOUT) == 0 && !dlc_attr_bool(op, DLC_A_RESIDUAL);
}

/* A name for a new value that neither network has. */
static const char *fresh_name(Quant *q, const char *base) {
    const char *name = base;
    for (int k = 1; dlc_map_get(&q->net->names, name) || dlc_map_get(&q->old->names, name); k++)
        name = dlc_arena_printf(&q->m->arena, "%s.%d", base, k);
    return dlc_arena_strdup(&q->m->arena, name);
}

/* A parameter of the new network: the one named so, or a new one. */
static DlcValue *param(Quant *q, const char *name, DlcType type, DlcInit init, bool trainable,
                       DlcLoc loc) {
    DlcValue *p = dlc_map_get(&q->net->names, name);
    return p ? p : dlc_network_add_param(q->m, q->net, name, type, init, trainable, loc);
}

/* Appends op kind to the new network, its result types from its shape
 * rule; an internal error where the rule refuses it. */
static DlcOp *add(Quant *q, DlcOpKind kind, DlcValue **in, int nin, int nparams,
                  const DlcAttr *attrs, const char *const *names, DlcLoc loc) {
    DlcType tensors[16];
    if (nin - nparams > 16)
        dlc_unreachable("quantize: an op of %d tensors", nin - nparams);
    for (int i = 0; i < nin - nparams; i++)
        tensors[i] = in[i]->type;
    DlcAttr a[DLC_MAX_ATTRS];
    memcpy(a, attrs, sizeof a);
    DlcInfer inf = {.ctx = q->ctx, .loc = loc, .kind = kind, .in = tensors,
                    .nin = nin - nparams, .attrs = a};
    if (!dlc_infer(&inf))
        dlc_unreachable("quantize: %s refused", dlc_op_info(kind)->name);
    DlcOp *op = dlc_network_add_op(q->m, q->net, kind, in, nin, nparams, a, inf.out, names,
                                   inf.nout, loc);
    if (!op)
        dlc_unreachable("quantize: a name taken twice");
    return op;
}

static DlcAttr *defaults(DlcOpKind kind, DlcAttr *attrs) {
    memset(attrs, 0, sizeof(DlcAttr) * DLC_MAX_ATTRS);
    dlc_op_fill_defaults(kind, attrs);
    return attrs;
}

/* v as f32: itself, or its dequantized twin (made once). */
static DlcValue *f32_of(Quant *q, DlcValue *v, DlcLoc loc) {
    if (v->type.dtype != DLC_I8)
        return v;
    DlcValue *twin = dlc_map_get(&q->as_f32, v->name);
    if (twin)
        return twin;
    DlcAttr attrs[DLC_MAX_ATTRS];
    const char *name = fresh_name(q, dlc_arena_printf(&q->m->arena, "%s.f32", v->name));
    DlcOp *op = add(q, DLC_OP_DEQUANTIZE, (DlcValue *[]){v, dlc_map_get(&q->scale, v->name)}, 2,
                    1, defaults(DLC_OP_DEQUANTIZE, attrs), &name, loc);
    dlc_map_put(&q->as_f32, v->name, op->out[0]);
    return op->out[0];
}

/* A new scale parameter, calibrated on the old network's value seen. */
static DlcValue *scale_param(Quant *q, const char *name, DlcValue *seen, DlcLoc loc) {
    DlcType t = {.dtype = DLC_F32};
    DlcValue *p = param(q, name, t, DLC_INIT_ONES, false, loc);
    DLC_PUSH(&q->m->arena, q->observed, q->nobserved, q->capobserved, seen);
    return p;
}

/* The operand old (of the old network) as int8 for layer L: the new
 * value, or its quantized twin (made once, its scale L.input_scale). */
static DlcValue *i8_of(Quant *q, DlcValue *old, const char *layer, DlcLoc loc) {
    DlcValue *v = dlc_map_get(&q->now, old->name);
    if (v->type.dtype == DLC_I8)
        return v;
    DlcValue *twin = dlc_map_get(&q->as_i8, v->name);
    if (twin)
        return twin;
    DlcValue *s = scale_param(q, dlc_arena_printf(&q->m->arena, "%s.input_scale", layer), old, loc);
    DlcAttr attrs[DLC_MAX_ATTRS];
    const char *name = fresh_name(q, dlc_arena_printf(&q->m->arena, "%s.q", v->name));
    DlcOp *op = add(q, DLC_OP_QUANTIZE, (DlcValue *[]){v, s}, 2, 1,
                    defaults(DLC_OP_QUANTIZE, attrs), &name, loc);
    dlc_map_put(&q->as_i8, v->name, op->out[0]);
    dlc_map_put(&q->scale, op->out[0]->name, s);
    return op->out[0];
}

static bool is_output(const DlcNetwork *net, const DlcValue *v) {
    for (int i = 0; i < net->noutputs; i++)
        if (net->outputs[i] == v)
            return true;
    return false;
}

/* conv2d or dense -> qconv2d or qdense */
static void quantize_layer(Quant *q, const DlcOp *op) {
    const char *layer = layer_name(q->m, op);
    DlcValue *x = i8_of(q, op->in[0], layer, op->loc);
    const DlcValue *w = op->in[op->nin - op->nparams];
    int64_t n = w->type.dims[0];
    DlcType tw = w->type, tn = {.dtype = DLC_F32, .rank = 1, .dims = {n}};
    tw.dtype = DLC_I8;
    bool float_out = is_output(q->old, op->out[0]);
    DlcValue *in[6] = {
        x,
        param(q, dlc_arena_printf(&q->m->arena, "%s.qweight", layer), tw, DLC_INIT_ZEROS, false,
              w->loc),
        param(q, dlc_arena_printf(&q->m->arena, "%s.weight_scale", layer), tn, DLC_INIT_ONES,
              false, w->loc),
        param(q, dlc_arena_printf(&q->m->arena, "%s.qbias", layer), tn, DLC_INIT_ZEROS, false,
              w->loc),
        dlc_map_get(&q->scale, x->name),
        NULL,
    };
    if (!float_out)
        in[5] = scale_param(q, dlc_arena_printf(&q->m->arena, "%s.output_scale", layer),
                            op->out[0], op->loc);
    DlcOpKind kind = op->kind == DLC_OP_CONV2D ? DLC_OP_QCONV2D : DLC_OP_QDENSE;
    DlcAttr attrs[DLC_MAX_ATTRS];
    dlc_attrs_like(kind, op->kind, op->attrs, attrs);
    dlc_op_fill_defaults(kind, attrs);
    dlc_attrs_at(kind, attrs, DLC_A_RELU)->b = dlc_op_fused_relu(op);
    dlc_attrs_at(kind, attrs, DLC_A_FLOAT_OUT)->b = float_out;
    dlc_attrs_at(kind, attrs, DLC_A_VNNI)->b = q->vnni;
    const char *name = op->out[0]->name;
    DlcOp *qop = add(q, kind, in, float_out ? 5 : 6, float_out ? 4 : 5, attrs, &name, op->loc);
    dlc_map_put(&q->now, name, qop->out[0]);
    if (!float_out)
        dlc_map_put(&q->scale, name, in[5]);
}

/* add, concat or globalavgpool whose tensors are all int8 already (in the
 * new network) -> qadd, qconcat or qglobalavgpool: int8, into a scale of
 * its own (VALUE.scale, calibrated on the f32 op's result), with each
 * operand's scale beside it.  false, and nothing made, for any other op and
 * where an operand is f32 (a layer kept f32 feeds it, which the user kept
 * f32 for its precision: quantizing its result only to add or copy it
 * would round it anyway), and for an add of more than two terms or with a
 * ReLU's gradient (training's, not in an inference network). */
static bool quantize_join(Quant *q, const DlcOp *op) {
    int ntensors = op->nin - op->nparams;
    DlcOpKind kind = op->kind == DLC_OP_ADD             ? DLC_OP_QADD
                     : op->kind == DLC_OP_CONCAT        ? DLC_OP_QCONCAT
                     : op->kind == DLC_OP_GLOBALAVGPOOL ? DLC_OP_QGLOBALAVGPOOL
                                                        : DLC_OP_COUNT;
    if (kind == DLC_OP_COUNT || op->nparams || ntensors > DLC_MAX_PARAMS_PER_OP - 1 ||
        dlc_attr_int(op, DLC_A_LAYOUT) != 0 ||
        (kind == DLC_OP_QADD && (ntensors != 2 || dlc_attr_bool(op, DLC_A_RELU_GRAD))))
        return false;
    DlcValue *in[2 * DLC_MAX_PARAMS_PER_OP];
    for (int i = 0; i < ntensors; i++) {
        in[i] = dlc_map_get(&q->now, op->in[i]->name);
        if (in[i]->type.dtype != DLC_I8)
            return false;
        in[ntensors + i] = dlc_map_get(&q->scale, in[i]->name);
    }
    const char *name = op->out[0]->name;
    in[2 * ntensors] = scale_param(q, fresh_name(q, dlc_arena_printf(&q->m->arena, "%s.scale",
                                                                     name)),
                                   op->out[0], op->loc);
    DlcAttr attrs[DLC_MAX_ATTRS];
    defaults(kind, attrs);
    if (kind == DLC_OP_QADD)
        dlc_attrs_at(kind, attrs, DLC_A_RELU)->b = dlc_attr_bool(op, DLC_A_RELU);
    if (kind == DLC_OP_QCONCAT)
        dlc_attrs_at(kind, attrs, DLC_A_AXIS)->i = dlc_attr_int(op, DLC_A_AXIS);
    DlcOp *nop = add(q, kind, in, 2 * ntensors + 1, ntensors + 1, attrs, &name, op->loc);
    dlc_map_put(&q->now, name, nop->out[0]);
    dlc_map_put(&q->scale, name, in[2 * ntensors]);
    return true;
}

/* Any other op: in int8 where it moves an int8 tensor (maxpool, flatten;
 * dropout, the identity at inference, is dropped), else as it was, reading
 * f32 operands. */
static void copy_op(Quant *q, const DlcOp *op) {
    DlcValue **in = dlc_arena_alloc(&q->m->arena, sizeof *in * (size_t)(op->nin + 1));
    int ntensors = op->nin - op->nparams;
    DlcValue *x0 = ntensors ? dlc_map_get(&q->now, op->in[0]->name) : NULL;
    if (op->kind == DLC_OP_DROPOUT && x0 && x0->type.dtype == DLC_I8) {
        /* the identity at inference: its result is its operand, int8 */
        dlc_map_put(&q->now, op->out[0]->name, x0);
        return;
    }
    bool int8 = x0 && x0->type.dtype == DLC_I8 && ntensors == 1 &&
                (op->kind == DLC_OP_MAXPOOL || op->kind == DLC_OP_FLATTEN);
    for (int i = 0; i < op->nin; i++) {
        const DlcValue *v = op->in[i];
        in[i] = i >= ntensors ? param(q, v->name, v->type, v->init, v->trainable, v->loc)
                : int8        ? x0
                              : f32_of(q, dlc_map_get(&q->now, v->name), op->loc);
    }
    const char *names[DLC_MAX_RESULTS];
    for (int r = 0; r < op->nout; r++)
        names[r] = op->out[r]->name;
    DlcOp *nop = add(q, op->kind, in, op->nin, op->nparams, op->attrs, names, op->loc);
    for (int r = 0; r < op->nout; r++)
        dlc_map_put(&q->now, names[r], nop->out[r]);
    if (int8)
        dlc_map_put(&q->scale, names[0], dlc_map_get(&q->scale, x0->name));
}

/* Whether every --quantize-skip names a layer of some network to quantize. */
static bool check_skips(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    bool ok = true;
    for (int s = 0; opt->quantize_skip && opt->quantize_skip[s]; s++) {
        const char *want = opt->quantize_skip[s], **names = NULL;
        int n = 0, cap = 0;
        bool found = false;
        for (int i = 0; i < m->nnetworks; i++) {
            const DlcNetwork *net = m->networks[i];
            for (int j = 0; !dlc_is_derived_network(net->name) && j < net->nops; j++)
                if (is_layer(net->ops[j])) {
                    const char *l = layer_name(m, net->ops[j]);
                    found |= strcmp(l, want) == 0;
                    DLC_PUSH(&m->arena, names, n, cap, l);
                }
        }
        if (found)
            continue;
        const char *close = dlc_closest(want, names, n);
        char *list = dlc_arena_strdup(&m->arena, "");
        for (int i = 0; i < n && i < 12; i++)
            list = dlc_arena_printf(&m->arena, "%s%s%s", list, i ? ", " : "", names[i]);
        dlc_error(ctx, DLC_NOLOC, "--quantize-skip=%s: no convolution or dense layer is named "
                  "'%s'%s%s%s (the layers: %s%s)", want, want, close ? "; did you mean '" : "",
                  close ? close : "", close ? "'?" : "", n ? list : "none", n > 12 ? ", ..." : "");
        ok = false;
    }
    return ok;
}

static void quantize_network(DlcCtx *ctx, DlcModule *m, int index, const DlcPassOptions *opt,
                             bool vnni) {
    DlcNetwork *old = m->networks[index];
    Quant q = {.ctx = ctx, .m = m, .old = old, .vnni = vnni};
    bool any = false;
    for (int i = 0; i < old->nops; i++)
        any |= quantizable(m, old->ops[i], opt);
    if (!any)
        return;
    const char *name = old->name;
    old->name = dlc_arena_printf(&m->arena, "%s.calib", name);
    q.net = dlc_network_new(m, name, old->loc);
    /* NAME where the f32 network was, NAME.calib last */
    m->networks[index] = q.net;
    m->networks[m->nnetworks - 1] = old;
    dlc_map_init(&q.now, &m->arena);
    dlc_map_init(&q.scale, &m->arena);
    dlc_map_init(&q.as_f32, &m->arena);
    dlc_map_init(&q.as_i8, &m->arena);
    for (int i = 0; i < old->ninputs; i++) {
        DlcValue *in = old->inputs[i];
        dlc_map_put(&q.now, in->name,
                    dlc_network_add_input(m, q.net, in->name, in->type, in->loc));
    }
    for (int i = 0; i < old->nops; i++) {
        if (quantizable(m, old->ops[i], opt))
            quantize_layer(&q, old->ops[i]);
        else if (!quantize_join(&q, old->ops[i]))
            copy_op(&q, old->ops[i]);
    }
    for (int i = 0; i < old->noutputs; i++)
        dlc_network_add_output(m, q.net,
                               f32_of(&q, dlc_map_get(&q.now, old->outputs[i]->name),
                                      old->outputs[i]->loc));
    for (int i = 0; i < q.nobserved; i++)
        dlc_network_add_output(m, old, q.observed[i]);
}

/* For a GPU pipeline (--target=cpu,cuda, --emit=ptx): whether every op
 * of the int8 networks that reads or writes int8 has GPU kernels (its
 * ops.def row's ptx column; codegen/nvptx refuses further an op whose
 * kernel handles only floats); false after an error naming the first
 * that has none. */
static bool gpu_has_kernels(DlcCtx *ctx, const DlcModule *m) {
    static const char *const refused[DLC_OP_COUNT] = {
#define PTX(x) NULL
#define PTX_NONE(why) why
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) [DLC_OP_##id] = ptx,
#include "../ir/ops.def"
#undef OP
#undef PTX_NONE
#undef PTX
    };
    for (int n = 0; n < m->nnetworks; n++)
        for (int i = 0; i < m->networks[n]->nops; i++) {
            const DlcOp *op = m->networks[n]->ops[i];
            bool int8 = false;
            for (int k = 0; k < op->nin + op->nout; k++)
                int8 |= (k < op->nin ? op->in[k] : op->out[k - op->nin])->type.dtype == DLC_I8;
            if (int8 && refused[op->kind]) {
                dlc_error(ctx, op->loc, "--quantize=int8: %s of int8 has no GPU kernel (%s); "
                          "build it for the CPU alone (--target=cpu)",
                          dlc_op_info(op->kind)->name, refused[op->kind]);
                return false;
            }
        }
    return true;
}

bool dlc_pass_quantize(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    if (!opt || opt->quantize == DLC_QUANTIZE_NONE)
        return true;
    if (!check_skips(ctx, m, opt))
        return false;
    DlcTargetCpu t = opt->cpu;
    if (t.vector == 0)
        dlc_target_cpu_host(&t);
    int n = m->nnetworks;
    for (int i = 0; i < n; i++) {
        const char *name = m->networks[i]->name;
        /* a network quantized already (IR text) has its NAME.calib */
        if (!dlc_is_derived_network(name) &&
            !dlc_module_find_network(m, dlc_arena_printf(&m->arena, "%s.calib", name)))
            quantize_network(ctx, m, i, opt, t.vnni);
    }
    return !opt->gpu || gpu_has_kernels(ctx, m);
}
