/* emit_pool.c — the C of the pooling ops over [C, H, W]: maxpool, avgpool
 * and globalavgpool, maxpool's training form (which keeps each window's
 * argmax) and the gradients of all four.  A window's geometry goes to
 * libdlrt as a DlrtPool.  maxpool and globalavgpool in a blocked layout
 * (layout=B, the layout pass) are loops of the generated code instead,
 * over registers of a block's B channels: ONNX Runtime's pooling in its
 * blocked layout was twice as fast as libdlrt's over rows of a plane
 * (bench/history.md). */
#include "emit.h"

#define put dlc_cpu_put

/* The loop `body` over `items` (a C expression) with the index i, on
 * `threads` workers where there is work enough for them (cost: a C
 * expression), and inline for one: libgomp makes a team even for a region
 * whose `if` is false (kernels.c, PARALLEL_FOR). */
static void put_blocked_loop(Emit *e, Out *o, const char *items, const char *cost,
                             const char *body) {
    e->scratch = "    int64_t w = 0;\n"; /* takes `threads` */
    put(o, "#ifdef _OPENMP /* (dlrt_workers): one function for both element types */\n"
           "    int t = (dlrt_workers)(threads, %s, %s);\n"
           "    if (t > 1) {\n"
           "#pragma omp parallel for num_threads(t) schedule(static)\n"
           "        for (int64_t i = 0; i < %s; i++) {\n%s        }\n"
           "        return;\n"
           "    }\n"
           "#else\n"
           "    (void)threads;\n"
           "#endif\n"
           "    for (int64_t i = 0; i < %s; i++) {\n%s    }\n",
        items, cost, items, body, items, body);
}

/* The vector types of a block of B elements (B an enum constant). */
static void put_block_types(Emit *e, Out *o, bool ivec) {
    put(o, "    typedef %s vec __attribute__((vector_size(B * sizeof(%s))));\n"
           "    typedef %s vecu __attribute__((vector_size(B * sizeof(%s)), aligned(sizeof(%s))));\n"
           "    (void)work;\n",
        e->real, e->real, e->real, e->real, e->real);
    if (ivec) /* the elements' bits, to select them */
        put(o, "    typedef %s ivec __attribute__((vector_size(B * sizeof(%s))));\n",
            e->f64 ? "long long" : "int", e->real);
}

/* maxpool {layout=B}: each output row of a block's plane, its windows
 * clipped to the plane (padding never wins, as in PyTorch), the maximum
 * lane by lane, a NaN kept (as max_nan in libdlrt) */
static void put_blocked_maxpool(Emit *e, Out *o, const DlcOp *op) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD);
    const int64_t *x = op->in[0]->type.dims, *y = op->out[0]->type.dims;
    int64_t b = dlc_attr_int(op, DLC_A_LAYOUT);
    put(o, "    enum { CBK = %lld, H = %lld, W = %lld, OH = %lld, OW = %lld, KH = %lld, KW = %lld,\n"
           "           SH = %lld, SW = %lld, PH = %lld, PW = %lld, B = %lld };\n",
        (long long)((x[0] + b - 1) / b), (long long)x[1], (long long)x[2], (long long)y[1],
        (long long)y[2], (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
        (long long)p[0], (long long)p[1], (long long)b);
    put_block_types(e, o, true);
    put_blocked_loop(e, o, "n * CBK * OH", "n * CBK * OH * OW * KH * KW * B",
        "            int64_t plane = i / OH;\n"
        "            int oy = (int)(i % OH), y0 = oy * SH - PH;\n"
        "            int ylo = y0 < 0 ? 0 : y0, yhi = y0 + KH < H ? y0 + KH : H;\n"
        "            const vecu *xp = (const vecu *)a0 + plane * H * W;\n"
        "            vecu *yp = (vecu *)r0 + i * OW;\n"
        "            for (int ox = 0; ox < OW; ox++) {\n"
        "                int x0 = ox * SW - PW;\n"
        "                int xlo = x0 < 0 ? 0 : x0, xhi = x0 + KW < W ? x0 + KW : W;\n"
        "                vec m = xp[ylo * W + xlo];\n"
        "                for (int iy = ylo; iy < yhi; iy++)\n"
        "                    for (int ix = xlo; ix < xhi; ix++) {\n"
        "                        vec v = xp[iy * W + ix];\n"
        "                        ivec take = (ivec)(v > m) | (ivec)(v != v);\n"
        "                        m = (vec)(((ivec)v & take) | ((ivec)m & ~take));\n"
        "                    }\n"
        "                yp[ox] = m;\n"
        "            }\n");
}

/* globalavgpool {layout=B}: a block's plane summed position by position in
 * double, as libdlrt's loop sums each plane, so the bits are the same */
static void put_blocked_globalavgpool(Emit *e, Out *o, const DlcOp *op) {
    const int64_t *x = op->in[0]->type.dims;
    int64_t b = dlc_attr_int(op, DLC_A_LAYOUT);
    put(o, "    enum { CBK = %lld, HW = %lld, B = %lld };\n", (long long)((x[0] + b - 1) / b),
        (long long)(x[1] * x[2]), (long long)b);
    put_block_types(e, o, false);
    put(o, "    typedef double dvec __attribute__((vector_size(B * sizeof(double))));\n");
    put_blocked_loop(e, o, "n * CBK", "n * CBK * HW * B",
        "            const vecu *xp = (const vecu *)a0 + i * HW;\n"
        "            dvec sum = {0};\n"
        "            for (int p = 0; p < HW; p++)\n"
        "                sum += __builtin_convertvector(xp[p], dvec);\n"
        "            ((vecu *)r0)[i] = __builtin_convertvector(sum / (double)HW, vec);\n");
}

/* The DlrtPool `pool` of a pooling op from x to y (for a gradient, the
 * forward op's input and output). */
static void put_pool(Out *o, const DlcOp *op, const DlcType *x, const DlcType *y) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD);
    int band = dlc_op_attr_slot(op->kind, DLC_A_BAND); /* maxpool's, the tile pass's choice */
    put(o, "    static const DlrtPool pool = {.c = %lld, .h = %lld, .w = %lld, .oh = %lld, "
           ".ow = %lld,\n        .kh = %lld, .kw = %lld, .sh = %lld, .sw = %lld, .ph = %lld, "
           ".pw = %lld, .count_include_pad = %s%s",
        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
        (long long)y->dims[1], (long long)y->dims[2], (long long)k[0], (long long)k[1],
        (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
        dlc_attr_true(op->kind, op->attrs, DLC_A_COUNT_INCLUDE_PAD) ? "true" : "false",
        dlc_attr_true(op->kind, op->attrs, DLC_A_RELU_GRAD) ? ", .relu_grad = true" : "");
    if (band >= 0 && op->attrs[band].i)
        put(o, ", .band = %lld", (long long)op->attrs[band].i);
    put(o, "};\n");
}

void dlc_cpu_emit_maxpool(Emit *e, Out *o, const DlcOp *op) {
    if (dlc_attr_int(op, DLC_A_LAYOUT)) {
        put_blocked_maxpool(e, o, op);
        return;
    }
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    if (op->in[0]->type.dtype == DLC_I8) /* (): the same kernel in f64 code */
        put(o, "    (dlrt_maxpool_s8)(&pool, n, a0, r0);\n");
    else
        put(o, "    dlrt_maxpool_forward(&pool, n, a0, r0);\n");
}

void dlc_cpu_emit_avgpool(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    put(o, "    dlrt_avgpool_forward(&pool, n, a0, r0);\n");
}

void dlc_cpu_emit_globalavgpool(Emit *e, Out *o, const DlcOp *op) {
    if (dlc_attr_int(op, DLC_A_LAYOUT)) {
        put_blocked_globalavgpool(e, o, op);
        return;
    }
    const int64_t *x = op->in[0]->type.dims;
    put(o, "    dlrt_globalavgpool_forward(n, %lld, %lld, a0, r0);\n", (long long)x[0],
        (long long)(x[1] * x[2]));
}

/* (x) -> (y, argmax) */
void dlc_cpu_emit_maxpool_train(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[0]->type, &op->out[0]->type);
    put(o, "    dlrt_maxpool_forward_argmax(&pool, n, a0, r0, r1);\n");
}

/* (dy, x) */
void dlc_cpu_emit_maxpool_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->in[1]->type, &op->in[0]->type);
    put(o, "    dlrt_maxpool_backward(&pool, n, a0, a1, r0);\n");
}

/* (dy, argmax) */
void dlc_cpu_emit_maxpool_grad_argmax(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->out[0]->type, &op->in[0]->type);
    put(o, "    dlrt_maxpool_backward_argmax(&pool, n, a0, a1, r0);\n");
}

/* (dy) */
void dlc_cpu_emit_avgpool_grad(Emit *e, Out *o, const DlcOp *op) {
    (void)e;
    put_pool(o, op, &op->out[0]->type, &op->in[0]->type);
    put(o, "    dlrt_avgpool_backward(&pool, n, a0, r0);\n");
}

/* (dy), or (dy, y) with a fused ReLU gradient */
void dlc_cpu_emit_globalavgpool_grad(Emit *e, Out *o, const DlcOp *op) {
    const int64_t *dx = op->out[0]->type.dims;
    put(o, "    dlrt_globalavgpool_backward(n, %lld, %lld, a0, %s, r0);\n", (long long)dx[0],
        (long long)(dx[1] * dx[2]), dlc_cpu_relu_y(e, op));
}
