/* direct_conv.c — convolutions computed by dlc's own loops, where the tile
 * pass chose them (an op with vector > 0; passes/tile.c says when).
 *
 * A stride-1 convolution over a copy of its input padded with zeros is a
 * product in which every kernel tap is a constant shift.  With the result
 * kept in the padded width WP (the columns past the output's width are
 * computed and dropped),
 *
 *   y[f, p] = sum over (c, ki, kj) of w[f, c, ki, kj] * xp[c, p + ki*DH*WP + kj*DW],
 *
 * p = oy*WP + ox.  So the loops read the input where im2col would have
 * copied it from, and the innermost block is a register tile: FB filters
 * by PB positions (NV registers of L elements), loaded once per tap for
 * FB multiply-adds each, the weights broadcast.  GCC's and Clang's vector
 * types say which values are registers, so the block does not depend on
 * the compiler's vectorizer.
 *
 *   - conv2d: the product above, then the bias (or a folded batchnorm's
 *     scale and shift) and a fused ReLU while the sample's result is in
 *     the caches.
 *   - conv2d with filter_lanes: the same sum with the filters in the
 *     register's lanes, for a convolution whose result is narrow next to
 *     its padded width (LeNet-5's second: 10 of 14 columns) and whose
 *     filters fill whole registers.  The block is FB filters (FB / L
 *     registers) by PB positions counted in the result itself (p = oy*OW
 *     + ox), so no padding column is computed; each tap loads FB / L
 *     registers of weights (from a copy with the filters innermost, made
 *     once by the API's NAME_freeze for inference, else once per call) and
 *     broadcasts one input element per position.  The epilogue stores
 *     each register's L filters of a position apart, at their planes'
 *     strides.  A block of filters takes all of the
 *     positions before the next block starts, so that its weights (a
 *     copy per block, in order) stream from L2; this is what makes the
 *     form pay for large convolutions too (GoogLeNet's and ResNet's 3x3
 *     ones), where it needs no im2col.  Since each position's taps are
 *     found through its own offset, the positions may be a stride apart
 *     (oy*SH*WP + ox*SW): the only form here that takes strided
 *     convolutions, such as the first ones of GoogLeNet, ResNet and AlexNet.
 *   - conv2d_grad_input: the same product over dy, padded by the dilated
 *     kernel less the forward padding, with the weights flipped and their
 *     two channel axes swapped (a copy made once per call).
 *   - conv2d_grad_input with scatter: the transposed product, which
 *     multiplies no padding rows.  With dy's rows copied into the forward's
 *     padded width WP (zeros in the last (KW-1)*DW columns), position q of
 *     dy adds w[f, c, ki, kj] * dy[f, q] to the padded input gradient at q
 *     + ki*DH*WP + kj*DW, so
 *
 *       dxp[c, q + shift(ki, kj)] += sum over f of w[f, c, ki, kj] * dyp[f, q].
 *
 *     The block is FB channels of one tap by PB positions: the sum over
 *     the filters in registers (a register of dy and FB broadcast weights
 *     per filter), then added into the padded gradient, which the worker
 *     keeps in L1 and crops into dx at the end of the sample.  The zero
 *     columns run on into the next row's padding or are cropped away.
 *     LeNet-5's second convolution, whose gradient over dy padded by 4 on
 *     each side is 2.6 times its multiply-adds, takes this form.
 *   - conv2d_grad_weight: dw[f, (c, ki, kj)] sums dy[f, p] * xp[c, p +
 *     shift] over p, dy copied into the padded width with zeros in the
 *     dropped columns; a block of FB filters by the KW taps of a kernel
 *     row, each a register of partial sums over positions, added up at the
 *     end of each sample.
 *
 * Multiply-adds: each `acc += w * x` of the loops should be one FMA
 * instruction, but GCC in ISO C mode (-std=c11, as dlc compiles its
 * programs and as many builds do) never fuses a multiply and an add, since
 * that rounds once where the source rounds twice.  The functions are
 * therefore wrapped in GCC's optimize pragma for -ffp-contract=fast (Clang
 * fuses within an expression by default and ignores it).  The rest of the
 * generated file, and libdlrt, keep ISO rounding (the optimizers round as
 * torch.optim's).
 *
 * Registers: a vector loaded once per tap for several multiply-adds (a
 * register of weights, of input, of dy) passes through IN_REGISTER, an
 * empty asm statement that says the value is in a vector register and
 * may have changed there.  Without it GCC 12 folds the load into each FMA
 * that uses it, as a memory operand: a load per multiply-add instead of
 * one per block, so the blocks waited on loads (LeNet-5's weight gradient
 * of the first convolution, 5 input registers for 2 filters: 12 loads per
 * 10 FMAs).  It is defined only where the compiler targets the vector's
 * width (GCC's and Clang's "v" constraint), and is a no-op otherwise.
 *
 * Threads: the samples are split statically among the workers, each with
 * its own slice of `work` (the padded copies; for the weight gradient, a
 * partial dw, added up in worker order afterwards), so a thread count
 * always gives the same bits.  A batch of fewer samples than workers
 * (inference at batch 1) splits each sample of the forward products among
 * them instead: the rows of the padded-width result, each worker copying
 * the sample's source for itself, or, with filter lanes, its blocks of
 * filters or of positions, the workers padding the sample together
 * (put_filter_lanes_product).  The blocks and their sums are those of the
 * whole sample, so the bits are the same.  The loops over the blocks keep
 * their constant bounds and skip another part's blocks: with the part's
 * bounds in them, GCC compiled them into slower code.
 *
 * Preconditions: the op's attributes passed check_tile (ir/shape.c). */
#include <string.h>

#include "direct_conv.h"

#define put dlc_cpu_put

/* The three convolutions with the tile pass's `vector` (which recurrent
 * layers carry too, for their activations: emit_recurrent.c). */
bool dlc_cpu_is_direct_conv(const DlcOp *op) {
    int v = dlc_op_attr_slot(op->kind, DLC_A_VECTOR);
    return v >= 0 && op->attrs[v].i > 0 && dlc_recurrent_cell(op->kind) == DLC_OP_COUNT;
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The loops' sizes, in elements, named as in the generated code. */
typedef struct Geometry {
    int64_t ci, h, w, ph, pw, hp, wp; /* the source: channels, size, padding, padded size */
    int64_t co, oh, ow;               /* the result's channels and size */
    int64_t kh, kw, sh, sw, dh, dw, k; /* the kernel, its stride (filter lanes only) and
                                          dilation, ci * kh * kw */
    int64_t p, pt, xps;               /* result plane in the padded width (with filter
                                         lanes, the result's positions), rounded up to
                                         the block; a padded source plane with slack */
    int64_t fb, pb, lanes, bytes;     /* the register block; elements and bytes of a
                                         register */
    bool filter_lanes;                /* the block's lanes are filters */
    bool scatter;                     /* an input gradient's transposed product; then
                                         CI, H, W are dy's, CO, OH, OW dx's, PH, PW
                                         the forward's padding, K = CO * KH * KW
                                         (a filter's weights), P = H * WP, XPS a
                                         padded dx plane with slack */
    int64_t shared, slice;            /* scratch: once, and per worker */
} Geometry;

static Geometry geometry(const DlcOp *op, const char *real) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *d = dlc_attr_pair(op, DLC_A_DILATION), *tile = dlc_attr_pair(op, DLC_A_TILE);
    DlcConvProduct c;
    if (!dlc_conv_product(op, &c))
        dlc_unreachable("direct_conv: a padding check_tile accepts is negative");
    Geometry g = {.ci = c.channels, .h = c.h, .w = c.w, .ph = c.ph, .pw = c.pw,
                  .co = c.rows, .oh = c.oh, .ow = c.ow,
                  .kh = k[0], .kw = k[1], .sh = s[0], .sw = s[1], .dh = d[0], .dw = d[1],
                  .fb = tile[0],
                  .bytes = dlc_attr_int(op, DLC_A_VECTOR)};
    g.lanes = g.bytes / (strcmp(real, "double") == 0 ? 8 : 4);
    g.hp = g.h + 2 * g.ph, g.wp = g.w + 2 * g.pw, g.k = g.ci * g.kh * g.kw;
    g.p = g.oh * g.wp;
    g.filter_lanes = dlc_attr_true(op->kind, op->attrs, DLC_A_FILTER_LANES);
    g.scatter = dlc_attr_true(op->kind, op->attrs, DLC_A_SCATTER);
    if (g.scatter) {
        const int64_t *pad = dlc_attr_pair(op, DLC_A_PAD);
        g.ph = pad[0], g.pw = pad[1];
        g.hp = g.oh + 2 * g.ph, g.wp = g.ow + 2 * g.pw, g.k = g.co * g.kh * g.kw;
        g.p = g.h * g.wp;
        g.pb = tile[1];
        g.pt = round_up(g.p, g.pb);
        /* a tap's block writes up to pt - 1 + its shift */
        g.xps = round_up(g.pt + (g.kh - 1) * g.dh * g.wp + (g.kw - 1) * g.dw, 16);
        g.slice = round_up(g.ci * g.pt + g.co * g.xps, 16); /* dyp, dxp */
        g.shared = 0;
    } else if (g.filter_lanes && op->kind == DLC_OP_CONV2D_GRAD_WEIGHT) {
        g.p = g.oh * g.ow;
        g.pb = tile[1]; /* the kernel's width */
        g.pt = g.p;
        g.xps = round_up(g.hp * g.wp, 16);
        g.slice = round_up(g.ci * g.xps + g.p * g.co + g.k * g.co, 16); /* xp, dyt, part */
        g.shared = 0;
    } else if (g.filter_lanes) {
        g.p = g.oh * g.ow;
        g.pb = tile[1];
        g.pt = round_up(g.p, g.pb);
        g.xps = round_up(g.hp * g.wp, 16); /* positions past p repeat the last one */
        g.slice = g.ci * g.xps;             /* xp */
        g.shared = round_up(g.k * g.co, 16); /* the weights, filters innermost */
    } else if (op->kind == DLC_OP_CONV2D_GRAD_WEIGHT) {
        g.pb = g.lanes;
        g.pt = round_up(g.p, g.lanes);
        /* rows of taps read past the plane by at most pt - p + (kw-1) dw */
        g.xps = round_up(g.hp * g.wp + g.pt - g.p + (g.kw - 1) * g.dw, 16);
        g.slice = round_up(g.ci * g.xps + g.co * g.pt + g.co * g.k, 16); /* xp, dyp, dw */
        g.shared = 0;
    } else {
        g.pb = tile[1];
        g.pt = round_up(g.p, g.pb);
        g.xps = round_up(g.hp * g.wp + g.pb + (g.kw - 1) * g.dw, 16);
        g.slice = round_up(g.ci * g.xps + g.co * g.pt, 16); /* xp, yp */
        g.shared = op->kind == DLC_OP_CONV2D_GRAD_INPUT ? round_up(g.co * g.k, 16) : 0;
    }
    return g;
}

/* The constants and vector types every body starts with. */
static void put_prologue(Out *o, const Geometry *g, const char *real) {
    put(o, "    enum { CI = %lld, H = %lld, W = %lld, PH = %lld, PW = %lld, HP = %lld, WP = %lld,\n"
           "           CO = %lld, OH = %lld, OW = %lld, KH = %lld, KW = %lld, SH = %lld, SW = %lld,\n"
           "           DH = %lld, DW = %lld, K = %lld, P = %lld, PT = %lld, XPS = %lld, FB = %lld,\n"
           "           PB = %lld, L = %lld, SHARED = %lld, SLICE = %lld };\n",
        (long long)g->ci, (long long)g->h, (long long)g->w, (long long)g->ph, (long long)g->pw,
        (long long)g->hp, (long long)g->wp, (long long)g->co, (long long)g->oh,
        (long long)g->ow, (long long)g->kh, (long long)g->kw, (long long)g->sh,
        (long long)g->sw, (long long)g->dh, (long long)g->dw, (long long)g->k, (long long)g->p,
        (long long)g->pt, (long long)g->xps, (long long)g->fb, (long long)g->pb,
        (long long)g->lanes, (long long)g->shared, (long long)g->slice);
    put(o, "    /* a register, and the same for loads and stores at any element */\n"
           "    typedef %s vec __attribute__((vector_size(%lld)));\n"
           "    typedef %s vecu __attribute__((vector_size(%lld), aligned(sizeof(%s))));\n",
        real, (long long)g->bytes, real, (long long)g->bytes, real);
    dlc_cpu_direct_conv_in_register(o, g->bytes);
}

void dlc_cpu_direct_conv_prefetch(Out *o) {
    /* blocked_conv.c's blocks prefetch the weights they read next: a
       block of filters' weights stream from L3 or memory once a call at
       batch 1, and the hardware's prefetchers do not bring them in time
       (bench/history.md, "Prefetching the weights") */
    put(o, "#undef PREFETCH\n"
           "#if defined(__GNUC__)\n"
           "#define PREFETCH(p) __builtin_prefetch(p)\n"
           "#else\n"
           "#define PREFETCH(p) (void)(p)\n"
           "#endif\n");
}

void dlc_cpu_direct_conv_in_register(Out *o, int64_t bytes) {
    /* a vector wider than the target's registers (f64 in a block of 16)
       spans several: no single "v" operand holds it */
    const char *isa = bytes == 64 ? "__AVX512F__" : bytes == 32 ? "__AVX__"
                      : bytes == 16 ? "__SSE2__" : NULL;
    put(o, "#undef IN_REGISTER /* a loaded vector stays in a register: see direct_conv.c */\n");
    if (isa)
        put(o, "#if defined(__GNUC__) && defined(%s)\n"
               "#define IN_REGISTER(v) __asm__(\"\" : \"+v\"(v))\n"
               "#else\n"
               "#define IN_REGISTER(v) (void)(v)\n"
               "#endif\n", isa);
    else
        put(o, "#define IN_REGISTER(v) (void)(v)\n");
}

/* The rows of a source plane `src` (H x W, a C expression) copied into the
 * interior of a padded plane `dst` (HP x WP, its border left as it is), at
 * `indent` spaces: every padded copy of the forward's source is made so. */
static void put_pad_plane(Out *o, int indent, const char *dst, const char *src) {
    put(o, "%*sfor (int iy = 0; iy < H; iy++)\n"
           "%*s    memcpy(%s + (iy + PH) * WP + PW,\n"
           "%*s           %s + iy * W, sizeof *work * W);\n",
        indent, "", indent, "", dst, indent, "", src);
}

/* The opening of a parallel region of t workers for n samples of `units`
 * parts and `macs` multiply-adds each (C expressions), up to the worker's
 * index `me`; one worker where the generated code is compiled without
 * OpenMP. */
void dlc_cpu_direct_conv_region(Out *o, const char *units, const char *macs) {
    put(o, "#ifdef _OPENMP\n"
           "    int t = dlrt_workers(threads, n * (int64_t)(%s), n * (int64_t)%s);\n"
           "#pragma omp parallel num_threads(t) if (t > 1)\n"
           "#else /* compiled without OpenMP: one worker */\n"
           "    int t = 1;\n"
           "    (void)threads;\n"
           "#endif\n"
           "    {\n"
           "        int me = dlrt_worker();\n",
        units, macs);
}

/* The parallel region (one worker where the generated code is compiled
 * without OpenMP).  Its items are the samples, statically split among the
 * workers; with `units` (a C expression: the rows or position blocks of
 * one sample's result) a batch of fewer samples than workers (inference at
 * batch 1) splits each sample into ceil(t / n) parts of its units.  A part
 * computes the same blocks in the same order as a whole sample does, so a
 * worker count always gives the same bits.  Each worker's slice `mine` is
 * zeroed for its first `zero` elements, then for each of its items the
 * body continues with the sample s, whose operand `source` (unless NULL) is
 * copied into the interior of the padded planes at the start of `mine`
 * (xp), and, with units, the part's units [u0, u1). */
static void put_workers(Out *o, const char *real, const char *macs, const char *units,
                        const char *source, const char *zero) {
    dlc_cpu_direct_conv_region(o, units ? units : "1", macs);
    put(o, "        %s *mine = work + SHARED + (int64_t)me * SLICE;\n", real);
    if (units)
        put(o, "        /* parts per sample: 1, or more when the samples are fewer than the workers\n"
               "           (t <= n * units, so a part has a unit at least) */\n"
               "        int64_t parts = n >= t ? 1 : (t + n - 1) / n;\n"
               "        int64_t first = n * parts * me / t, end = n * parts * (me + 1) / t;\n");
    else
        put(o, "        int64_t first = n * me / t, end = n * (me + 1) / t, parts = 1;\n");
    put(o, "        memset(mine, 0, sizeof *mine * %s);\n"
           "        for (int64_t item = first; item < end; item++) {\n"
           "            int64_t s = item / parts;\n",
        zero);
    if (units)
        put(o, "            int u0 = (int)((%s) * (item %% parts) / parts);\n"
               "            int u1 = (int)((%s) * (item %% parts + 1) / parts);\n",
            units, units);
    if (source) {
        char plane[256];
        snprintf(plane, sizeof plane, "%s + (s * CI + c) * (H * W)", source);
        put(o, "            for (int c = 0; c < CI; c++)\n");
        put_pad_plane(o, 16, "mine + c * XPS", plane);
    }
}

/* The epilogue of a result element v of filter f, as two C fragments:
 * what follows v's sum (the bias, or a folded batchnorm's scale and shift,
 * bn_scale and bn_shift: dlc_cpu_put_batchnorm_fold) and the value stored
 * (after a fused activation, or an input gradient's fused ReLU gradient,
 * which reads the ReLU's result ym[ox] at the element: relu_y names that
 * operand).  The fused activations are pattern matching on what the fuse
 * pass merges: each is written out inline here, as its kernel computes it. */
typedef struct Epilogue {
    const char *add, *store, *relu_y;
} Epilogue;

static Epilogue epilogue(const DlcOp *op, const char *real) {
    bool bias = dlc_op_bias(op) != NULL; /* conv2d's */
    if (dlc_op_relu_grad_mask(op) >= 0) /* conv2d_grad_input (dy, y, @w) */
        return (Epilogue){.add = "", .store = "ym[ox] > 0 ? v : 0 /* as relu_backward */",
                          .relu_y = "a1"};
    return (Epilogue){
        .add = dlc_op_folded_batchnorm(op) >= 0 ? " * bn_scale[f] + bn_shift[f]"
               : bias                           ? " + a2[f]"
                                                : "",
        .store = dlc_cpu_conv_activation(op, real)};
}

void dlc_cpu_conv_activation_param(Emit *e, Out *o, const DlcOp *op) {
    if (dlc_op_fused_activation(op) == DLC_OP_LEAKY_RELU)
        put(o, "    const %s slope = %s; /* the fused leaky ReLU's */\n", e->real,
            dlc_cpu_activation_param(e, op));
    if (dlc_op_fused_activation(op) == DLC_OP_ELU)
        put(o, "    const %s alpha = %s; /* the fused ELU's */\n", e->real,
            dlc_cpu_activation_param(e, op));
}

const char *dlc_cpu_conv_activation(const DlcOp *op, const char *real) {
    bool f32 = strcmp(real, "float") == 0;
    const char *store = "v";
    switch (dlc_op_fused_activation(op)) {
    case DLC_OP_RELU: store = "v < 0 ? 0 : v /* NaN stays NaN, as in relu_forward */"; break;
    /* the functions libdlrt's sigmoid_forward and tanh_forward call through
       <tgmath.h> for the element type, so the bits are the same */
    case DLC_OP_SIGMOID: store = f32 ? "1 / (1 + expf(-v))" : "1 / (1 + exp(-v))"; break;
    case DLC_OP_TANH: store = f32 ? "tanhf(v)" : "tanh(v)"; break;
    /* slope: dlc_cpu_direct_conv declares it, as the literal libdlrt's
       leaky_relu_forward would get */
    case DLC_OP_LEAKY_RELU: store = "v > 0 ? v : slope * v"; break;
    /* alpha, declared as slope is; expm1 as libdlrt's elu_forward calls it */
    case DLC_OP_ELU: store = f32 ? "v > 0 ? v : alpha * expm1f(v)" : "v > 0 ? v : alpha * expm1(v)"; break;
    default: break;
    }
    return store;
}

/* conv2d with filter_lanes: the product and its epilogue, per block.
 *
 * Its own parallel region rather than put_workers', since the workers
 * share two things.  They repack the weights together (a block of FB
 * filters each, contiguous, so that a block reads its weights in order and
 * GoogLeNet's 3x3 convolutions, 55 to 110 KB of weights a block, stream
 * them from L2), and, when a batch has fewer samples than workers, they
 * pad the samples together into the slices (a sample's channels split
 * among them) instead of each worker padding the whole sample for itself.
 * A barrier follows each.  With the weights copied by one thread and the
 * sample padded by each worker for itself, the copies kept a second worker
 * at batch 1 well short of halving the time.
 *
 * A shared sample is split by blocks of filters where its weights outweigh
 * its padded source, so that each worker copies and reads only its own
 * filters' weights, and by blocks of positions otherwise. */
static void put_filter_lanes_product(Out *o, const DlcOp *op, const Geometry *g,
                                     const char *real, const char *w, const char *pack) {
    bool by_filters = g->co * g->k > g->ci * g->xps;
    put(o, "    /* a sample shared by workers is split by %s */\n"
           "    enum { BY_FILTERS = %d, UNITS = BY_FILTERS ? CO / FB : PT / PB };\n",
        by_filters ? "blocks of filters (its weights outweigh its source)"
                   : "blocks of positions (its source outweighs its weights)",
        by_filters);
    dlc_cpu_direct_conv_region(o, "UNITS", "(CO * K * OH * OW)");
    put(o, "        /* the weights in blocked order: packed beforehand by the API's freeze,\n"
           "           or copied here, each worker its share of the blocks */\n"
           "        const %s *restrict wt = packed;\n"
           "        if (!packed) {\n"
           "            %s(%s, work, me, t);\n"
           "            wt = work;\n"
           "        }\n",
        real, pack, w);
    put(o, "        /* parts per sample: 1, each worker padding its samples into its own slice,\n"
           "           or more when the samples are fewer than the workers (t <= n * units,\n"
           "           so a part has a unit at least), sample s padded into slice s by all */\n"
           "        int64_t parts = n >= t ? 1 : (t + n - 1) / n;\n"
           "        int64_t first = n * parts * me / t, end = n * parts * (me + 1) / t;\n"
           "        %s *mine = work + SHARED + (int64_t)me * SLICE;\n"
           "        if (parts == 1)\n"
           "            memset(mine, 0, sizeof *mine * CI * XPS);\n"
           "        else\n"
           "            for (int64_t sc = n * CI * me / t; sc < n * CI * (me + 1) / t; sc++) {\n"
           "                %s *plane = work + SHARED + sc / CI * SLICE + sc %% CI * XPS;\n"
           "                memset(plane, 0, sizeof *plane * XPS);\n",
        real, real);
    put_pad_plane(o, 16, "plane", "a0 + sc * (H * W)");
    put(o, "            }\n"
           "#ifdef _OPENMP\n"
           "#pragma omp barrier\n"
           "#endif\n");
    put(o, "        for (int64_t item = first; item < end; item++) {\n"
           "            int64_t s = item / parts;\n"
           "            int u0 = (int)(UNITS * (item %% parts) / parts);\n"
           "            int u1 = (int)(UNITS * (item %% parts + 1) / parts);\n"
           "            const %s *xp = parts == 1 ? mine : work + SHARED + s * SLICE;\n"
           "            if (parts == 1)\n"
           "                for (int c = 0; c < CI; c++)\n",
        real);
    put_pad_plane(o, 20, "mine + c * XPS", "a0 + (s * CI + c) * (H * W)");
    Epilogue e = epilogue(op, real);
    put(o, "            /* a block of filters over all of the part's positions, so that its\n"
           "               weights stay in the caches while the source passes by */\n"
           "            for (int f0 = 0; f0 < CO; f0 += FB)\n"
           "            for (int p0 = 0; p0 < P; p0 += PB) {\n"
           "                int unit = BY_FILTERS ? f0 / FB : p0 / PB;\n"
           "                if (unit < u0 || unit >= u1)\n"
           "                    continue; /* another part's blocks */\n"
           "                /* each position's first tap in the padded plane (a stride\n"
           "                   apart); those past P repeat the last one and are not stored */\n"
           "                int at[PB];\n"
           "                for (int j = 0; j < PB; j++) {\n"
           "                    int p = p0 + j < P ? p0 + j : P - 1;\n"
           "                    at[j] = p / OW * SH * WP + p %% OW * SW;\n"
           "                }\n"
           "                vec acc[FB / L][PB];\n"
           "                for (int i = 0; i < FB / L; i++)\n"
           "                    for (int j = 0; j < PB; j++)\n"
           "                        acc[i][j] = (vec){0};\n"
           "                for (int c = 0; c < CI; c++)\n"
           "                    for (int ki = 0; ki < KH; ki++)\n"
           "                        for (int kj = 0; kj < KW; kj++) {\n"
           "                            const %s *src = xp + c * XPS + ki * DH * WP + kj * DW;\n"
           "                            const %s *wf = wt + (f0 / FB * K + (c * KH + ki) * KW + kj) * FB;\n"
           "                            vec wv[FB / L];\n"
           "                            for (int i = 0; i < FB / L; i++) {\n"
           "                                wv[i] = *(const vecu *)(wf + i * L);\n"
           "                                IN_REGISTER(wv[i]);\n"

           "                            }\n"
           "                            for (int j = 0; j < PB; j++) {\n"
           "                                %s xv = src[at[j]];\n"
           "                                for (int i = 0; i < FB / L; i++)\n"
           "                                    acc[i][j] += xv * wv[i];\n"
           "                            }\n"
           "                        }\n"
           "                for (int i = 0; i < FB / L; i++)\n"
           "                    for (int j = 0; j < PB && p0 + j < P; j++)\n"
           "                        for (int l = 0; l < L; l++) {\n"
           "                            int f = f0 + i * L + l;\n"
           "                            %s v = acc[i][j][l]%s;\n"
           "                            r0[(s * CO + f) * P + p0 + j] = %s;\n"
           "                        }\n"
           "            }\n"
           "        }\n"
           "    }\n",
        real, real, real, real, e.add, e.store);
}

/* conv2d and conv2d_grad_input: the product, then the epilogue; w is the
 * weight operand. */
static void put_product(Out *o, const DlcOp *op, const char *real, const char *w) {
    bool input_grad = op->kind == DLC_OP_CONV2D_GRAD_INPUT;
    if (input_grad) {
        put(o, "    /* the weights flipped, their channel axes swapped: wk[c][f][KH-1-ki][KW-1-kj]\n"
               "       = w[f][c][ki][kj] */\n"
               "    %s *restrict wk = work;\n"
               "    for (int c = 0; c < CO; c++)\n"
               "        for (int f = 0; f < CI; f++)\n"
               "            for (int ki = 0; ki < KH; ki++)\n"
               "                for (int kj = 0; kj < KW; kj++)\n"
               "                    wk[((c * CI + f) * KH + ki) * KW + kj] =\n"
               "                        %s[((f * CO + c) * KH + KH - 1 - ki) * KW + KW - 1 - kj];\n",
            real, w);
    } else
        put(o, "    const %s *restrict wk = %s;\n", real, w);
    put_workers(o, real, "(CO * K * OH * OW)", "OH", "a0", "CI * XPS");
    put(o, "            const %s *xp = mine;\n"
           "            %s *yp = mine + CI * XPS;\n"
           "            for (int f0 = 0; f0 < CO; f0 += FB)\n"
           "                for (int p0 = 0; p0 < PT; p0 += PB) {\n"
           "                    /* the blocks that hold the part's rows [u0, u1) of the padded\n"
           "                       width (constant bounds: GCC's code is a third faster) */\n"
           "                    if (p0 + PB <= u0 * WP || p0 >= u1 * WP)\n"
           "                        continue;\n", real, real);
    put(o, "                    vec acc[FB][PB / L];\n"
           "                    for (int i = 0; i < FB; i++)\n"
           "                        for (int j = 0; j < PB / L; j++)\n"
           "                            acc[i][j] = (vec){0};\n"
           "                    const %s *wf = wk + f0 * K;\n"
           "                    for (int c = 0; c < CI; c++)\n"
           "                        for (int ki = 0; ki < KH; ki++)\n"
           "                            for (int kj = 0; kj < KW; kj++) {\n"
           "                                const %s *src = xp + c * XPS + ki * DH * WP + kj * DW + p0;\n"
           "                                int k = (c * KH + ki) * KW + kj;\n"
           "                                vec xv[PB / L];\n"
           "                                for (int j = 0; j < PB / L; j++) {\n"
           "                                    xv[j] = *(const vecu *)(src + j * L);\n"
           "                                    IN_REGISTER(xv[j]);\n"
           "                                }\n"
           "                                for (int i = 0; i < FB; i++) {\n"
           "                                    %s wv = wf[i * K + k];\n"
           "                                    for (int j = 0; j < PB / L; j++)\n"
           "                                        acc[i][j] += wv * xv[j];\n"
           "                                }\n"
           "                            }\n"
           "                    for (int i = 0; i < FB; i++)\n"
           "                        for (int j = 0; j < PB / L; j++)\n"
           "                            *(vecu *)(yp + (f0 + i) * PT + p0 + j * L) = acc[i][j];\n"
           "                }\n", real, real, real);
    /* the epilogue: the output's columns of the padded width */
    Epilogue e = epilogue(op, real);
    put(o, "            for (int f = 0; f < CO; f++)\n"
           "                for (int oy = u0; oy < u1; oy++) {\n"
           "                    const %s *src = yp + f * PT + oy * WP;\n"
           "                    %s *dst = r0 + (s * CO + f) * (OH * OW) + oy * OW;\n", real, real);
    if (e.relu_y)
        put(o, "                    const %s *ym = %s + (s * CO + f) * (OH * OW) + oy * OW;\n", real,
            e.relu_y);
    put(o, "                    for (int ox = 0; ox < OW; ox++) {\n"
           "                        %s v = src[ox]%s;\n"
           "                        dst[ox] = %s;\n"
           "                    }\n"
           "                }\n"
           "        }\n"
           "    }\n",
        real, e.add, e.store);
}

/* After a weight gradient's parallel region: dw[f][k] is the sum of the
 * workers' partial sums, added in worker order; `at` is the offset of
 * (f, k)'s partial sum in a worker's slice, a C expression of f and k. */
static void put_worker_sums(Out *o, const char *real, const char *at) {
    put(o, "    /* the workers' sums, in worker order */\n"
           "    for (int f = 0; f < CO; f++)\n"
           "        for (int k = 0; k < K; k++) {\n"
           "            %s sum = work[SHARED + %s];\n"
           "            for (int j = 1; j < t; j++)\n"
           "                sum += work[SHARED + (int64_t)j * SLICE + %s];\n"
           "            r0[f * K + k] = sum;\n"
           "        }\n",
        real, at, at);
}

/* conv2d_grad_weight: dw from dy (a0) and x (a1). */
static void put_weight_gradient(Out *o, const char *real) {
    put_workers(o, real, "(CO * K * OH * OW)", NULL, "a1", "SLICE");
    put(o, "            const %s *xp = mine;\n"
           "            %s *dyp = mine + CI * XPS, *part = dyp + CO * PT;\n", real, real);
    put(o, "            for (int f = 0; f < CO; f++)\n"
           "                for (int oy = 0; oy < OH; oy++)\n"
           "                    memcpy(dyp + f * PT + oy * WP, a0 + (s * CO + f) * (OH * OW) + oy * OW,\n"
           "                           sizeof *dyp * OW);\n"
           "            for (int f0 = 0; f0 < CO; f0 += FB)\n"
           "                for (int c = 0; c < CI; c++)\n"
           "                    for (int ki = 0; ki < KH; ki++) {\n"
           "                        vec acc[FB][KW];\n"
           "                        for (int i = 0; i < FB; i++)\n"
           "                            for (int kj = 0; kj < KW; kj++)\n"
           "                                acc[i][kj] = (vec){0};\n"
           "                        const %s *src = xp + c * XPS + ki * DH * WP;\n"
           "                        for (int p = 0; p < PT; p += L) {\n"
           "                            vec dv[FB];\n"
           "                            for (int i = 0; i < FB; i++) {\n"
           "                                dv[i] = *(const vecu *)(dyp + (f0 + i) * PT + p);\n"
           "                                IN_REGISTER(dv[i]);\n"
           "                            }\n"
           "                            for (int kj = 0; kj < KW; kj++) {\n"
           "                                vec xv = *(const vecu *)(src + kj * DW + p);\n"
           "                                IN_REGISTER(xv);\n"
           "                                for (int i = 0; i < FB; i++)\n"
           "                                    acc[i][kj] += dv[i] * xv;\n"
           "                            }\n"
           "                        }\n"
           "                        for (int i = 0; i < FB; i++)\n"
           "                            for (int kj = 0; kj < KW; kj++) {\n"
           "                                %s sum = 0;\n"
           "                                for (int l = 0; l < L; l++)\n"
           "                                    sum += acc[i][kj][l];\n"
           "                                part[(f0 + i) * K + (c * KH + ki) * KW + kj] += sum;\n"
           "                            }\n"
           "                    }\n"
           "        }\n"
           "    }\n", real, real);
    put_worker_sums(o, real, "CI * XPS + CO * PT + f * K + k");
}

/* conv2d_grad_weight with filter_lanes: dw from dy (a0) and x (a1), the
 * filters in the lanes. */
static void put_filter_lanes_weight_gradient(Out *o, const char *real) {
    put_workers(o, real, "(CO * K * OH * OW)", NULL, "a1", "SLICE");
    put(o, "            const %s *xp = mine;\n"
           "            /* dy with the filters innermost, and the worker's sums part[k][f] */\n"
           "            %s *dyt = mine + CI * XPS, *part = dyt + P * CO;\n"
           "            for (int f = 0; f < CO; f++)\n"
           "                for (int p = 0; p < P; p++)\n"
           "                    dyt[p * CO + f] = a0[(s * CO + f) * P + p];\n"
           "            for (int f0 = 0; f0 < CO; f0 += FB)\n"
           "                for (int c = 0; c < CI; c++)\n"
           "                    for (int ki = 0; ki < KH; ki++) {\n"
           "                        vec acc[KW][FB / L];\n"
           "                        for (int kj = 0; kj < KW; kj++)\n"
           "                            for (int i = 0; i < FB / L; i++)\n"
           "                                acc[kj][i] = (vec){0};\n"
           "                        const %s *src = xp + c * XPS + ki * DH * WP;\n"
           "                        for (int oy = 0; oy < OH; oy++)\n"
           "                            for (int ox = 0; ox < OW; ox++) {\n"
           "                                const %s *g = dyt + (oy * OW + ox) * CO + f0;\n"
           "                                vec gv[FB / L];\n"
           "                                for (int i = 0; i < FB / L; i++) {\n"
           "                                    gv[i] = *(const vecu *)(g + i * L);\n"
           "                                    IN_REGISTER(gv[i]);\n"
           "                                }\n"
           "                                for (int kj = 0; kj < KW; kj++) {\n"
           "                                    %s xv = src[oy * WP + ox + kj * DW];\n"
           "                                    for (int i = 0; i < FB / L; i++)\n"
           "                                        acc[kj][i] += xv * gv[i];\n"
           "                                }\n"
           "                            }\n"
           "                        for (int kj = 0; kj < KW; kj++)\n"
           "                            for (int i = 0; i < FB / L; i++)\n"
           "                                *(vecu *)(part + ((c * KH + ki) * KW + kj) * CO + f0 + i * L) +=\n"
           "                                    acc[kj][i];\n"
           "                    }\n"
           "        }\n"
           "    }\n", real, real, real, real, real);
    put_worker_sums(o, real, "CI * XPS + P * CO + k * CO + f"); /* back to [f][k] */
}

/* conv2d_grad_input with scatter: dx from dy (a0) and w (a1, or a2 after
 * the ReLU result a1 of a fused relu_grad). */
static void put_scatter_product(Out *o, const DlcOp *op, const char *real, const char *w) {
    put_workers(o, real, "(CI * K * H * W)", NULL, NULL, "CI * PT");
    put(o, "            /* dy's rows in the padded width (the rest stays zero), and the\n"
           "               padded input gradient */\n"
           "            %s *dyp = mine, *dxp = mine + CI * PT;\n"
           "            for (int f = 0; f < CI; f++)\n"
           "                for (int iy = 0; iy < H; iy++)\n"
           "                    memcpy(dyp + f * PT + iy * WP, a0 + (s * CI + f) * (H * W) + iy * W,\n"
           "                           sizeof *dyp * W);\n"
           "            memset(dxp, 0, sizeof *dxp * CO * XPS);\n"
           "            for (int p0 = 0; p0 < PT; p0 += PB)\n"
           "                for (int ki = 0; ki < KH; ki++)\n"
           "                    for (int kj = 0; kj < KW; kj++)\n"
           "                        for (int c0 = 0; c0 < CO; c0 += FB) {\n"
           "                            vec acc[FB][PB / L];\n"
           "                            for (int i = 0; i < FB; i++)\n"
           "                                for (int j = 0; j < PB / L; j++)\n"
           "                                    acc[i][j] = (vec){0};\n"
           "                            const %s *wt = %s + (c0 * KH + ki) * KW + kj;\n"
           "                            for (int f = 0; f < CI; f++) {\n"
           "                                vec dv[PB / L];\n"
           "                                for (int j = 0; j < PB / L; j++) {\n"
           "                                    dv[j] = *(const vecu *)(dyp + f * PT + p0 + j * L);\n"
           "                                    IN_REGISTER(dv[j]);\n"
           "                                }\n"
           "                                for (int i = 0; i < FB; i++) {\n"
           "                                    %s wv = wt[f * K + i * KH * KW];\n"
           "                                    for (int j = 0; j < PB / L; j++)\n"
           "                                        acc[i][j] += wv * dv[j];\n"
           "                                }\n"
           "                            }\n"
           "                            for (int i = 0; i < FB; i++) {\n"
           "                                %s *d = dxp + (c0 + i) * XPS + ki * DH * WP + kj * DW + p0;\n"
           "                                for (int j = 0; j < PB / L; j++)\n"
           "                                    *(vecu *)(d + j * L) += acc[i][j];\n"
           "                            }\n"
           "                        }\n", real, real, w, real, real);
    /* the crop into dx, through the ReLU's gradient when one is fused.  The
       element is loaded before the select, not in it: with the load inside
       the select (a masked load once vectorized), GCC 12 at -O3
       -march=native on an AVX2 machine compiled this function into one that
       gave wrong gradients in f64 (gradcheck found it; a copy of the
       function alone reproduced it, not at -O2 nor without vectorization);
       the cause is not known */
    if (dlc_op_relu_grad_mask(op) >= 0)
        put(o, "            for (int c = 0; c < CO; c++)\n"
               "                for (int oy = 0; oy < OH; oy++) {\n"
               "                    int64_t at = ((s * CO + c) * OH + oy) * OW;\n"
               "                    const %s *src = dxp + c * XPS + (oy + PH) * WP + PW;\n"
               "                    for (int ox = 0; ox < OW; ox++) {\n"
               "                        %s v = src[ox];\n"
               "                        r0[at + ox] = a1[at + ox] > 0 ? v : 0; /* as relu_backward */\n"
               "                    }\n"
               "                }\n", real, real);
    else
        put(o, "            for (int c = 0; c < CO; c++)\n"
               "                for (int oy = 0; oy < OH; oy++)\n"
               "                    memcpy(r0 + ((s * CO + c) * OH + oy) * OW, dxp + c * XPS + (oy + PH) * WP + PW,\n"
               "                           sizeof *r0 * OW);\n");
    put(o, "        }\n"
           "    }\n");
}

void dlc_cpu_direct_conv_contract(Out *o, bool begin) {
    if (begin)
        put(o, "#if defined(__GNUC__) && !defined(__clang__)\n"
               "#pragma GCC push_options\n"
               "#pragma GCC optimize(\"fp-contract=fast\") /* FMA: direct_conv.c in dlc */\n"
               "#endif\n");
    else
        put(o, "#if defined(__GNUC__) && !defined(__clang__)\n"
               "#pragma GCC pop_options\n"
               "#endif\n");
}

int64_t dlc_cpu_direct_conv_packed(const Emit *e, const DlcOp *op) {
    if (dlc_cpu_is_direct_conv(op) && dlc_cpu_is_blocked_conv(op))
        return dlc_cpu_blocked_conv_packed(op);
    if (!dlc_cpu_is_direct_conv(op) || op->kind != DLC_OP_CONV2D ||
        !dlc_attr_true(op->kind, op->attrs, DLC_A_FILTER_LANES))
        return 0;
    return geometry(op, e->real).shared;
}

void dlc_cpu_direct_conv_pack(const Emit *e, Out *o, const DlcOp *op, const char *name) {
    if (dlc_cpu_is_blocked_conv(op)) {
        dlc_cpu_blocked_conv_pack(e, o, op, name);
        return;
    }
    const char *real = e->real;
    Geometry g = geometry(op, real);
    put(o, "\n/* The weights of %s's convolution a block of FB filters at a time, the filters\n"
           " * innermost: wt[f / FB][k][f %% FB] = w[f][k]; worker me of t copies its share\n"
           " * of the blocks. */\n"
           "static void %s(const %s *restrict w, %s *restrict wt, int me, int t) {\n"
           "    enum { CO = %lld, K = %lld, FB = %lld };\n"
           "    for (int b = CO / FB * me / t; b < CO / FB * (me + 1) / t; b++)\n"
           "        for (int i = 0; i < FB; i++)\n"
           "            for (int k = 0; k < K; k++)\n"
           "                wt[(b * K + k) * FB + i] = w[(b * FB + i) * K + k];\n"
           "}\n",
        op->out[0]->name, name, real, real, (long long)g.co, (long long)g.k, (long long)g.fb);
}

void dlc_cpu_direct_conv(Emit *e, Out *o, const DlcOp *op, const char *pack) {
    if (dlc_cpu_is_blocked_conv(op)) {
        dlc_cpu_blocked_conv(e, o, op, pack);
        return;
    }
    const char *real = e->real, *w = dlc_cpu_weight(e, op);
    Geometry g = geometry(op, real);
    e->scratch = dlc_arena_printf(e->arena, "    int64_t w = %lld + %lld * (int64_t)threads;\n",
                                  (long long)g.shared, (long long)g.slice);
    dlc_cpu_put_batchnorm_fold(e, o, op);
    put_prologue(o, &g, real);
    dlc_cpu_conv_activation_param(e, o, op);
    if (g.scatter)
        put_scatter_product(o, op, real, w);
    else if (g.filter_lanes && op->kind == DLC_OP_CONV2D_GRAD_WEIGHT)
        put_filter_lanes_weight_gradient(o, real);
    else if (g.filter_lanes)
        put_filter_lanes_product(o, op, &g, real, w, pack);
    else if (op->kind == DLC_OP_CONV2D_GRAD_WEIGHT)
        put_weight_gradient(o, real);
    else
        put_product(o, op, real, w);
}
