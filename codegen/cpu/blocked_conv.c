/* blocked_conv.c — conv2d in a blocked layout (layout=B, the layout pass):
 * the result in blocks of B channels, each block's positions with its B
 * channels innermost (y[s][f / B][oy][ox][f % B]), read from a source in
 * the same layout or plain (the first convolution of an image network).
 *
 * A plain source is a blocked one whose block is one channel, so one loop
 * nest takes both: with CB channels a block of the source (B, or 1),
 *
 *   y[f][oy][ox] = sum over (cb, ky, kx, cl) of
 *       wt[f / FB][cb][ky][kx][cl][f % FB] * xp[cb][oy*SH + ky*DH][ox*SW + kx*DW][cl],
 *
 * xp the source padded with zeros (a copy, where the convolution pads) and
 * wt the weights packed once in the order the loops read them (by
 * NAME_freeze for inference, else on each call), zero for the padding
 * channels of both operands.  The register block is NV registers of B
 * filters (FB = NV * B: the tile's rows) by PB positions along a row (its
 * columns): for each tap and source channel, NV loads of weights and PB
 * broadcast elements of the source for NV * PB multiply-adds, every load
 * contiguous, and the results stored a whole register at a time: where the
 * plain layout's filter lanes (direct_conv.c) stored each filter apart and
 * read each source channel from its own plane.  A 1x1 convolution of stride
 * 1 without padding runs over its plane as one row, so its blocks do not
 * stop at the ends of rows.  A row's last block takes the positions left
 * (its own copy of the loops, with that constant).
 *
 * A grouped convolution whose groups are whole blocks of filters (and of
 * source channels, unless the source is plain) is the same sum over its
 * group's source blocks.  A depthwise one (a group per channel, one filter
 * each) has each lane its own channel: a block of channels' weights times
 * a register of the blocked source, per tap and position.
 *
 * The epilogue applies the bias (or the folded batchnorm's scale and
 * shift, padded with zeros past the filters), adds the residual's register
 * at the same place (residual=true, the fuse_residual pass: r has y's
 * type and layout) and applies the fused activation: ReLU on the
 * register, the others element by element.  The padding
 * filters' results are then the activation of 0: finite, and read by no
 * one, since every reader in a blocked layout multiplies them by zero
 * weights or drops them (reorder, docs/ir.md#layouts).
 *
 * Threads: a batch of at least as many samples as workers splits the
 * samples; a smaller one (batch 1) splits each sample's units, a unit
 * being a block of filters' row of positions (or part of the plane, for a
 * 1x1 convolution: one block), in an order that keeps a worker on the
 * same filters, whose weights then stream from L2.  The workers pack the
 * weights and pad such a shared sample together, a barrier after each.
 * Each result is summed in the same order whatever the split, so the bits
 * do not depend on the thread count.
 *
 * Preconditions: the op passed check_tile and check_layout (ir/shape.c). */
#include <string.h>

#include "direct_conv.h"

#define put dlc_cpu_put

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The loops' sizes, named as in the generated code. */
typedef struct Blocked {
    int64_t ci, cb, cib, h, w, ph, pw, hp, wp; /* the source: channels, in blocks of cb
                                                  (B, or 1: plain), cib blocks, size,
                                                  padding, padded size */
    int64_t co, b, cob, oh, ow;                /* the result: filters, in cob blocks of b */
    int64_t kh, kw, sh, sw, dh, dw;            /* the kernel, stride and dilation */
    int64_t grp, cig, cibg, cog;               /* the convolution's groups: source channels
                                                  and blocks, and filters, of one */
    bool depthwise;                            /* a group per channel, one filter each */
    int64_t nv, pb, nxb, pbt, fblocks;         /* the register block: nv registers of b
                                                  filters by pb positions; blocks a row;
                                                  the last one's positions; blocks of
                                                  nv * b filters */
    int64_t pr, nyb, prt;                      /* rows a block (pb then the row's
                                                  width), blocks a plane, the last
                                                  one's rows */
    int64_t xs, ws;                            /* a padded sample's and the packed
                                                  weights' elements (xs 0: no copy) */
} Blocked;

/* The loops of op, in f32 at the tile's register block.  f64 code (the
 * gradient check's copy of the network, built for its precision, not its
 * speed) takes one register of filters by at most 4 positions: the tile's
 * blocks, twice as wide in doubles, made GCC spend minutes unrolling
 * them.  The packed weights are the same size either way. */
static Blocked blocked(const DlcOp *op, bool f64) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *d = dlc_attr_pair(op, DLC_A_DILATION), *p = dlc_attr_pair(op, DLC_A_PAD),
                  *tile = dlc_attr_pair(op, DLC_A_TILE);
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    Blocked g = {.ci = x->dims[0], .h = x->dims[1], .w = x->dims[2], .ph = p[0], .pw = p[1],
                 .co = y->dims[0], .b = dlc_attr_int(op, DLC_A_LAYOUT), .oh = y->dims[1],
                 .ow = y->dims[2], .kh = k[0], .kw = k[1], .sh = s[0], .sw = s[1], .dh = d[0],
                 .dw = d[1], .pb = tile[1], .grp = dlc_attr_int(op, DLC_A_GROUPS)};
    g.cb = dlc_value_layout(op->in[0]) ? g.b : 1;
    g.cib = (g.ci + g.cb - 1) / g.cb;
    g.cob = (g.co + g.b - 1) / g.b;
    g.cig = g.ci / g.grp, g.cog = g.co / g.grp;
    g.cibg = (g.cig + g.cb - 1) / g.cb;
    g.depthwise = g.grp > 1 && g.cig == 1 && g.cog == 1;
    g.nv = g.depthwise || f64 ? 1 : tile[0] / g.b;
    if (f64 && g.pb > 4)
        g.pb = 4;
    g.fblocks = g.cob / g.nv;
    if (dlc_conv_is_pointwise(op)) /* its plane as one row */
        g.w *= g.h, g.h = 1, g.ow *= g.oh, g.oh = 1;
    g.hp = g.h + 2 * g.ph, g.wp = g.w + 2 * g.pw;
    g.pr = 1;
    if (g.pb > g.ow) /* whole rows */
        g.pr = g.pb / g.ow < g.oh ? g.pb / g.ow : g.oh, g.pb = g.ow;
    g.nxb = (g.ow + g.pb - 1) / g.pb;
    g.pbt = g.ow - (g.nxb - 1) * g.pb;
    g.nyb = (g.oh + g.pr - 1) / g.pr;
    g.prt = g.oh - (g.nyb - 1) * g.pr;
    g.xs = g.ph || g.pw ? round_up(g.cib * g.hp * g.wp * g.cb, 16) : 0;
    g.ws = round_up(g.depthwise ? g.cob * g.b * g.kh * g.kw
                                : g.cob * g.b * g.cibg * g.cb * g.kh * g.kw, 16);
    return g;
}

bool dlc_cpu_is_blocked_conv(const DlcOp *op) {
    return op->kind == DLC_OP_CONV2D && dlc_attr_int(op, DLC_A_LAYOUT) > 0;
}

int64_t dlc_cpu_blocked_conv_packed(const DlcOp *op) { return blocked(op, false).ws; }

void dlc_cpu_blocked_conv_pack(const Emit *e, Out *o, const DlcOp *op, const char *name) {
    const char *real = e->real;
    Blocked g = blocked(op, e->f64);
    if (g.depthwise) {
        put(o, "\n/* The weights of %s's depthwise convolution a block of B channels at a\n"
               " * time, the channels innermost: wt[cb][ky][kx][l] = w[cb * B + l][0][ky][kx],\n"
               " * zero past the channels; worker me of t packs its share of the blocks. */\n"
               "static void %s(const %s *restrict w, %s *restrict wt, int me, int t) {\n"
               "    enum { CO = %lld, B = %lld, COB = %lld, KK = %lld };\n"
               "    for (int cb = COB * me / t; cb < COB * (me + 1) / t; cb++)\n"
               "        for (int k = 0; k < KK; k++)\n"
               "            for (int l = 0; l < B; l++)\n"
               "                wt[((int64_t)cb * KK + k) * B + l] = cb * B + l < CO ? w[(int64_t)(cb * B + l) * KK + k] : 0;\n"
               "}\n",
            op->out[0]->name, name, real, real, (long long)g.co, (long long)g.b,
            (long long)g.cob, (long long)(g.kh * g.kw));
        return;
    }
    put(o, "\n/* The weights of %s's convolution in the order its loops read them:\n"
           " * wt[g][cb][ky][kx][cl][i] = w[g * FB + i][cb * CB + cl][ky][kx] (the channel\n"
           " * within the filter's group), zero past the filters and channels; worker\n"
           " * me of t packs its share of the blocks of FB filters. */\n"
           "static void %s(const %s *restrict w, %s *restrict wt, int me, int t) {\n"
           "    enum { CO = %lld, CIG = %lld, CB = %lld, CIBG = %lld, KH = %lld, KW = %lld, "
           "FB = %lld, G = %lld };\n"
           "    for (int g = G * me / t; g < G * (me + 1) / t; g++)\n"
           "        for (int cb = 0; cb < CIBG; cb++)\n"
           "            for (int ky = 0; ky < KH; ky++)\n"
           "                for (int kx = 0; kx < KW; kx++)\n"
           "                    for (int cl = 0; cl < CB; cl++) {\n"
           "                        %s *to = wt + ((((int64_t)g * CIBG + cb) * KH + ky) * KW + kx) * CB * FB\n"
           "                                 + cl * FB;\n"
           "                        int c = cb * CB + cl;\n"
           "                        for (int i = 0; i < FB; i++) {\n"
           "                            int f = g * FB + i;\n"
           "                            to[i] = f < CO && c < CIG ? w[(((int64_t)f * CIG + c) * KH + ky) * KW + kx] : 0;\n"
           "                        }\n"
           "                    }\n"
           "}\n",
        op->out[0]->name, name, real, real, (long long)g.co, (long long)g.cig, (long long)g.cb,
        (long long)g.cibg, (long long)g.kh, (long long)g.kw, (long long)(g.nv * g.b),
        (long long)g.fblocks, real);
}

/* One register block of `pr` rows of `pb` positions (constants) from ox0
 * of row oy, for the block of filters g, into y: the sum, then the
 * epilogue; its position (r, c) is acc[.][r * pb + c]. */
static void put_block(Out *o, const DlcOp *op, const Blocked *g, const char *real, int64_t pr,
                      int64_t pb) {
    int64_t n = pr * pb;
    put(o, "                vec acc[NV][%lld];\n"
           "                for (int i = 0; i < NV; i++)\n"
           "                    for (int j = 0; j < %lld; j++)\n"
           "                        acc[i][j] = (vec){0};\n",
        (long long)n, (long long)n);
    if (g->depthwise) /* each lane its channel: a register of the source per tap */
        put(o, "                const %s *x0 = src + (((int64_t)g * HP + oy * SH) * WP + ox0 * SW) * B;\n"
               "                const %s *w0 = wt + (int64_t)g * KH * KW * B;\n"
               "                for (int ky = 0; ky < KH; ky++)\n"
               "                    for (int kx = 0; kx < KW; kx++) {\n"
               "                        vec wv = *(const vecu *)(w0 + (ky * KW + kx) * B);\n"
               "                        IN_REGISTER(wv);\n"
               "                        const %s *xr = x0 + ((int64_t)ky * DH * WP + kx * DW) * B;\n"
               "                        for (int r = 0; r < %lld; r++)\n"
               "                            for (int c = 0; c < %lld; c++)\n"
               "                                acc[0][r * %lld + c] += wv * *(const vecu *)(xr + (r * SH * WP + c * SW) * B);\n"
               "                    }\n",
            real, real, real, (long long)pr, (long long)pb, (long long)pb);
    else
        put(o, "                const %s *x0 = src + ((int64_t)oy * SH * WP + ox0 * SW) * CB%s;\n"
               "                const %s *w0 = wt + (int64_t)g * CIBG * KH * KW * CB * FB;\n"
               "                for (int cb = 0; cb < CIBG; cb++)\n"
               "                    for (int ky = 0; ky < KH; ky++) {\n"
               "                        const %s *xr = x0 + ((int64_t)cb * HP + ky * DH) * WP * CB;\n"
               "                        const %s *wr = w0 + ((int64_t)cb * KH + ky) * KW * CB * FB;\n"
               "                        for (int kx = 0; kx < KW; kx++)\n"
               "                            for (int cl = 0; cl < CB; cl++) {\n"
               "                                vec wv[NV];\n"
               "                                for (int i = 0; i < NV; i++) {\n"
               "                                    wv[i] = *(const vecu *)(wr + (kx * CB + cl) * FB + i * B);\n"
               "                                    IN_REGISTER(wv[i]);\n"
               "                                    PREFETCH(wr + (kx * CB + cl) * FB + i * B + 4096 / sizeof *wr); /* 4 KB on */\n"
               "                                }\n"
               "                                for (int r = 0; r < %lld; r++)\n"
               "                                    for (int c = 0; c < %lld; c++) {\n"
               "                                        %s xv = xr[(r * SH * WP + c * SW + kx * DW) * CB + cl];\n"
               "                                        for (int i = 0; i < NV; i++)\n"
               "                                            acc[i][r * %lld + c] += wv[i] * xv;\n"
               "                                    }\n"
               "                            }\n"
               "                    }\n",
            real, g->grp > 1 ? "\n                    + (int64_t)(g * FB / COG) * CIBG * HP * WP * CB /* its group's */"
                             : "",
            real, real, real, (long long)pr, (long long)pb, real, (long long)pb);
    DlcOpKind act = dlc_op_fused_activation(op);
    put(o, "                for (int i = 0; i < NV; i++) {\n"
           "                    vec scale = *(const vecu *)(sc + g * FB + i * B);\n"
           "                    vec shift = *(const vecu *)(sh + g * FB + i * B);\n"
           "                    %s *yb = y + (((int64_t)(g * NV + i) * OH + oy) * OW + ox0) * B;\n"
           "                    for (int r = 0; r < %lld; r++)\n"
           "                    for (int c = 0; c < %lld; c++) {\n"
           "                        vec v = acc[i][r * %lld + c] * scale + shift;\n",
        real, (long long)pr, (long long)pb, (long long)pb);
    if (dlc_attr_bool(op, DLC_A_RESIDUAL)) /* the sum's other term, where y goes */
        put(o, "                        v += *(const vecu *)(res + (((int64_t)(g * NV + i) * OH + oy) * OW + ox0\n"
               "                                                    + r * OW + c) * B);\n");
    if (act == DLC_OP_RELU) /* v < 0 ? 0 : v, NaN kept, as relu_forward */
        put(o, "                        v = (vec)((ivec)v & ~(ivec)(v < (vec){0}));\n");
    put(o, "                        %s *yj = yb + (r * OW + c) * B;\n"
           "                        *(vecu *)yj = v;\n", real);
    if (act != DLC_OP_COUNT && act != DLC_OP_RELU)
        put(o, "                        for (int l = 0; l < B; l++) {\n"
               "                            %s v = yj[l];\n"
               "                            yj[l] = %s;\n"
               "                        }\n",
            real, dlc_cpu_conv_activation(op, real));
    put(o, "                    }\n"
           "                }\n");
}

void dlc_cpu_blocked_conv(Emit *e, Out *o, const DlcOp *op, const char *pack) {
    const char *real = e->real, *w = dlc_cpu_weight(e, op);
    bool f64 = e->f64;
    Blocked g = blocked(op, f64);
    int64_t macs = g.co * g.ci * g.kh * g.kw * g.oh * g.ow;
    int64_t units = g.fblocks * g.nyb * g.nxb;
    e->scratch = dlc_arena_printf(e->arena, "    int64_t w = %lld + %lld * (int64_t)threads;\n",
                                  (long long)g.ws, (long long)g.xs);
    dlc_cpu_put_batchnorm_fold(e, o, op);
    dlc_cpu_conv_activation_param(e, o, op);
    put(o, "    enum { CI = %lld, CB = %lld, CIB = %lld, H = %lld, W = %lld, PH = %lld, PW = %lld,\n"
           "           HP = %lld, WP = %lld, CO = %lld, B = %lld, COB = %lld, OH = %lld, OW = %lld,\n"
           "           KH = %lld, KW = %lld, SH = %lld, SW = %lld, DH = %lld, DW = %lld,\n"
           "           NV = %lld, FB = NV * B, G = COB / NV, PB = %lld, NXB = %lld, PBT = %lld,\n"
           "           PR = %lld, NYB = %lld, PRT = %lld,\n"
           "           CIG = %lld, CIBG = %lld, COG = %lld, XS = %lld, WS = %lld, UNITS = %lld };\n",
        (long long)g.ci, (long long)g.cb, (long long)g.cib, (long long)g.h, (long long)g.w,
        (long long)g.ph, (long long)g.pw, (long long)g.hp, (long long)g.wp, (long long)g.co,
        (long long)g.b, (long long)g.cob, (long long)g.oh, (long long)g.ow, (long long)g.kh,
        (long long)g.kw, (long long)g.sh, (long long)g.sw, (long long)g.dh, (long long)g.dw,
        (long long)g.nv, (long long)g.pb, (long long)g.nxb, (long long)g.pbt,
        (long long)g.pr, (long long)g.nyb, (long long)g.prt, (long long)g.cig, (long long)g.cibg, (long long)g.cog, (long long)g.xs,
        (long long)g.ws, (long long)units);
    put(o, "    /* a block of B channels, and the same for loads and stores at any element */\n"
           "    typedef %s vec __attribute__((vector_size(B * sizeof(%s))));\n"
           "    typedef %s vecu __attribute__((vector_size(B * sizeof(%s)), aligned(sizeof(%s))));\n",
        real, real, real, real, real);
    if (dlc_op_fused_activation(op) == DLC_OP_RELU) /* its bits, for the ReLU */
        put(o, "    typedef %s ivec __attribute__((vector_size(B * sizeof(%s))));\n",
            f64 ? "long long" : "int", real);
    dlc_cpu_direct_conv_in_register(o, g.b * (f64 ? 8 : 4));
    dlc_cpu_direct_conv_prefetch(o);
    /* the epilogue's scale and shift per filter, zero for the padding ones */
    put(o, "    %s sc[COB * B], sh[COB * B];\n"
           "    for (int f = 0; f < COB * B; f++) {\n"
           "        sc[f] = f < CO ? %s : 0;\n"
           "        sh[f] = f < CO ? %s : 0;\n"
           "    }\n",
        real, dlc_op_folded_batchnorm(op) >= 0 ? "bn_scale[f]" : "1",
        dlc_op_folded_batchnorm(op) >= 0 ? "bn_shift[f]"
        : dlc_op_bias(op) ? dlc_arena_printf(e->arena, "%s[f]", dlc_cpu_bias(e, op))
                          : "0");
    dlc_cpu_direct_conv_region(o, "UNITS", dlc_arena_printf(e->arena, "%lld", (long long)macs));
    put(o, "        const %s *wt = packed;\n"
           "        if (!wt) { /* not frozen: pack the weights now, together */\n"
           "            %s(%s, work, me, t);\n"
           "#ifdef _OPENMP\n"
           "#pragma omp barrier\n"
           "#endif\n"
           "            wt = work;\n"
           "        }\n"
           "        /* whole samples each, or (fewer samples than workers) a share of each\n"
           "           sample's units, the sample padded together into the first slice */\n"
           "        bool whole = n >= t;\n",
        real, pack, w);
    if (g.xs)
        put(o, "        %s *mine = work + WS + (whole ? (int64_t)me * XS : 0);\n", real);
    put(o, "        for (int64_t s = whole ? n * me / t : 0; s < (whole ? n * (me + 1) / t : n); s++) {\n"
           "            const %s *src = a0 + s * (int64_t)(CIB * H * W * CB);\n"
           "            %s *y = r0 + s * (int64_t)(COB * OH * OW * B);\n",
        real, real);
    if (dlc_attr_bool(op, DLC_A_RESIDUAL))
        put(o, "            const %s *res = a1 + s * (int64_t)(COB * OH * OW * B); /* its layout */\n",
            real);
    if (g.xs) {
        put(o, "            /* the source padded with zeros, a block's row at a time */\n"
               "            for (int cb = whole ? 0 : CIB * me / t; cb < (whole ? CIB : CIB * (me + 1) / t); cb++)\n"
               "                for (int iy = 0; iy < HP; iy++) {\n"
               "                    %s *to = mine + ((int64_t)cb * HP + iy) * WP * CB;\n"
               "                    if (iy < PH || iy >= PH + H) {\n"
               "                        memset(to, 0, sizeof *to * WP * CB);\n"
               "                        continue;\n"
               "                    }\n"
               "                    memset(to, 0, sizeof *to * PW * CB);\n"
               "                    memcpy(to + PW * CB, src + ((int64_t)cb * H + iy - PH) * W * CB,\n"
               "                           sizeof *to * W * CB);\n"
               "                    memset(to + (PW + W) * CB, 0, sizeof *to * PW * CB);\n"
               "                }\n"
               "#ifdef _OPENMP\n"
               "            if (!whole) {\n"
               "#pragma omp barrier\n"
               "            }\n"
               "#endif\n"
               "            src = mine;\n",
            real);
    }
    put(o, "            for (int u = whole ? 0 : UNITS * me / t; u < (whole ? UNITS : UNITS * (me + 1) / t); u++) {\n"
           "                int g = u / (NYB * NXB), yb = u / NXB %% NYB, xb = u %% NXB;\n"
           "                int oy = yb * PR, ox0 = xb * PB;\n"
           "                if ((xb < NXB - 1 || PBT == PB) && (yb < NYB - 1 || PRT == PR)) {\n");
    put_block(o, op, &g, real, g.pr, g.pb);
    put(o, "                } else {\n");
    if (g.pbt != g.pb) /* a row's last positions */
        put_block(o, op, &g, real, 1, g.pbt);
    else if (g.prt != g.pr) /* a plane's last rows */
        put_block(o, op, &g, real, g.prt, g.pb);
    put(o, "                }\n"
           "            }\n");
    if (g.xs)
        put(o, "#ifdef _OPENMP\n"
               "            if (!whole) { /* the next sample overwrites the padded one */\n"
               "#pragma omp barrier\n"
               "            }\n"
               "#endif\n");
    put(o, "        }\n"
           "    }\n");
}
