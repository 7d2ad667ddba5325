/* layout.c — chooses the memory layout of every tensor of the inference
 * network: plain (NCHW: each channel a plane) or blocked (layout=B: B
 * channels a block, each block's positions with its B channels innermost,
 * as oneDNN's nChw16c and ONNX Runtime's NCHWc), B the floats of the
 * target's vector register, and puts a reorder where a reader needs the
 * other layout.
 *
 *   %c = conv2d(%x, @w, @b) {filters=64, ...}        %c = conv2d(%x, @w, @b) {..., tile=[32, 14], vector=64, layout=16}
 *   %p = maxpool(%c) {kernel=2}                =>    %p = maxpool(%c) {kernel=2, layout=16}
 *   %y = dense(%p, @w2, @b2) {units=10}              %p.plain = reorder(%p)
 *                                                    %y = dense(%p.plain, @w2, @b2) {units=10}
 *
 * Why: in a blocked layout a convolution's register block stores whole
 * registers of filters and reads its source a block of channels at a
 * time, so a direct convolution needs neither im2col nor BLAS's packing,
 * and pooling, residual additions and activations work on whole registers
 * of channels (codegen/cpu/blocked_conv.c, emit_pool.c).  ONNX Runtime's
 * lead at batch-1 inference came from that (bench/history.md).
 *
 * The choice, op by op in execution order:
 *   - a convolution goes blocked where the tile pass's model finds it a
 *     register block (dlc_tile_blocked_conv, which the pass records as its
 *     tile and vector) and its filters fill their blocks to two thirds at
 *     least (LeNet-5's 6 filters in a block of 16 would waste 10 lanes of
 *     every register); it reads a blocked source as it is and a plain one
 *     as blocks of one channel, so no reorder ever precedes it;
 *   - pooling (max, global average), add, dropout and concatenation
 *     (of whole blocks of channels) go blocked where one of their operands
 *     is, the plain ones reordered;
 *   - every other op reads plain tensors, and a network returns plain ones:
 *     a blocked operand gets a reorder to plain, one per value however many
 *     read it, and an op whose result the network returns stays plain.
 *
 * Only the inference network: a training step keeps the plain layout (the
 * gradients' kernels are plain; docs/passes.md says what that leaves).
 * Nothing changes for a GPU pipeline, whose kernels are plain, nor in f64
 * programs' precision: the pass's layouts are the same for both, and the
 * code generator makes each element type's loops.
 *
 * Preconditions: the module verifies; runs after fuse (a batchnorm folded
 * and a ReLU fused into their convolution) and before tile, which keeps the
 * register blocks it sets. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* The most filters a blocked convolution may leave empty, as a share of
 * its blocks' lanes: a third (a block of 16 then holds 11 filters or
 * more, 24 filters take two blocks). */
#define WASTE_NUM 1
#define WASTE_DEN 3

static DlcAttr *layout_of(DlcOp *op) { return dlc_attrs_at(op->kind, op->attrs, DLC_A_LAYOUT); }

static bool has_layout(const DlcOp *op) { return dlc_op_attr_slot(op->kind, DLC_A_LAYOUT) >= 0; }

/* Whether op (not a convolution) can compute in blocks of b, given its
 * operands' types. */
static bool blockable(const DlcOp *op, int64_t b) {
    if (!has_layout(op) || op->kind == DLC_OP_CONV2D)
        return false;
    if (op->kind == DLC_OP_ADD && dlc_op_relu_grad_mask(op) >= 0)
        return false;
    int ntensors = op->nin - op->nparams;
    for (int i = 0; i < ntensors; i++) {
        const DlcType *t = &op->in[i]->type;
        if (!t->batched || t->rank != 3 || (op->kind == DLC_OP_CONCAT && t->dims[0] % b))
            return false;
    }
    if (op->kind == DLC_OP_CONCAT && dlc_attr_int(op, DLC_A_AXIS) != 0 &&
        dlc_attr_int(op, DLC_A_AXIS) != -3)
        return false; /* not along the channels */
    return true;
}

static bool is_output(const DlcNetwork *net, const DlcValue *v) {
    for (int i = 0; i < net->noutputs; i++)
        if (net->outputs[i] == v)
            return true;
    return false;
}

/* Whether conv can go blocked (by b) on t, and then its register block. */
static bool block_conv(const DlcOp *op, const DlcTargetCpu *t, int64_t b, int64_t *rows,
                       int64_t *cols) {
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    if (x->dtype != DLC_F32 || x->rank != 3)
        return false;
    int64_t filters = y->dims[0], lanes = (filters + b - 1) / b * b;
    if ((lanes - filters) * WASTE_DEN > lanes * WASTE_NUM)
        return false;
    int64_t cb = dlc_value_layout(op->in[0]) ? b : 1;
    int64_t groups = dlc_attr_int(op, DLC_A_GROUPS), cig = x->dims[0] / groups;
    if (groups > 1) {
        bool depthwise = cig == 1 && filters == groups;
        /* a depthwise one needs its source blocked; a grouped one whole
           blocks of filters per group, and of channels if the source is
           blocked */
        if (depthwise ? cb != b : (filters / groups) % b || cig % cb)
            return false;
    }
    return dlc_tile_blocked_conv(op, t, b, cb, rows, cols) > 0;
}

/* A reorder of v into layout `to` just before position `at` of net. */
static DlcValue *reorder(DlcModule *m, DlcNetwork *net, DlcValue *v, int64_t to, int at) {
    DlcAttr attrs[DLC_MAX_ATTRS];
    memset(attrs, 0, sizeof attrs);
    dlc_op_fill_defaults(DLC_OP_REORDER, attrs);
    dlc_attrs_at(DLC_OP_REORDER, attrs, DLC_A_LAYOUT)->i = to;
    char base[256];
    snprintf(base, sizeof base, "%s.%s", v->name, to ? "blocked" : "plain");
    const char *name = dlc_network_unique_name(m, net, base);
    DlcOp *op = dlc_network_add_op(m, net, DLC_OP_REORDER, &v, 1, 0, attrs, &v->type, &name, 1,
                                   v->kind == DLC_VAL_OP ? v->def->loc : v->loc);
    memmove(net->ops + at + 1, net->ops + at, sizeof *net->ops * (size_t)(net->nops - 1 - at));
    net->ops[at] = op;
    return op->out[0];
}

static void layout_network(DlcModule *m, DlcNetwork *net, const DlcTargetCpu *t) {
    int64_t b = t->vector / 4;
    /* each value's reorder into the other layout, made once: its plain or
       blocked twin */
    DlcMap twins;
    dlc_map_init(&twins, &m->arena);
    for (int j = 0; j < net->nops; j++) {
        DlcOp *op = net->ops[j];
        if (op->kind == DLC_OP_REORDER || dlc_attr_true(op->kind, op->attrs, DLC_A_RESIDUAL))
            continue; /* written in IR text (or by fuse-residual): kept as it is */
        int ntensors = op->nin - op->nparams;
        bool returned = false;
        for (int r = 0; r < op->nout; r++)
            returned |= is_output(net, op->out[r]);
        int64_t to = 0, rows = 0, cols = 0;
        if (returned)
            to = 0;
        else if (op->kind == DLC_OP_CONV2D) {
            if (dlc_attr_int(op, DLC_A_VECTOR) == 0 && block_conv(op, t, b, &rows, &cols))
                to = b;
        } else if (blockable(op, b)) {
            for (int i = 0; i < ntensors; i++)
                if (dlc_value_layout(op->in[i]) == b)
                    to = b;
        }
        /* the operands this op cannot read as they are: their twins */
        for (int i = 0; i < ntensors; i++) {
            DlcValue *v = op->in[i];
            int64_t have = dlc_value_layout(v);
            if (have == to || (op->kind == DLC_OP_CONV2D && have == 0))
                continue;
            char key[300];
            snprintf(key, sizeof key, "%s/%lld", v->name, (long long)to);
            DlcValue *twin = dlc_map_get(&twins, key);
            if (!twin) {
                twin = reorder(m, net, v, to, j);
                dlc_map_put(&twins, dlc_arena_strdup(&m->arena, key), twin);
                j++; /* op moved one on */
            }
            op->in[i] = twin;
        }
        if (to) {
            layout_of(op)->i = to;
            if (op->kind == DLC_OP_CONV2D) {
                dlc_attrs_at(op->kind, op->attrs, DLC_A_TILE)->pair[0] = rows;
                dlc_attrs_at(op->kind, op->attrs, DLC_A_TILE)->pair[1] = cols;
                dlc_attrs_at(op->kind, op->attrs, DLC_A_VECTOR)->i = t->vector;
            }
        }
    }
}

bool dlc_pass_layout(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)ctx;
    if (opt && opt->gpu)
        return true; /* the GPU's kernels read plain tensors */
    DlcTargetCpu t = opt ? opt->cpu : (DlcTargetCpu){0};
    if (!t.vector)
        dlc_target_cpu_host(&t);
    for (int i = 0; i < m->nnetworks; i++)
        if (!dlc_is_derived_network(m->networks[i]->name))
            layout_network(m, m->networks[i], &t);
    return true;
}
