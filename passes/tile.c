/* tile.c — chooses how the CPU computes each convolution: im2col and a
 * BLAS product, or dlc's own loops with a register block sized for the
 * target CPU; for each max pooling how many output rows libdlrt's loops
 * compute at a time (band=N, pool_band below); and for each recurrent
 * layer (every form: rnn, lstm_train, gru_grad, ...) the gates'
 * activations over the target's SIMD registers (vector=B) rather than the
 * C library's scalar functions, which are two thirds of an LSTM's forward
 * time otherwise.
 *
 *   %y = conv2d(%x, @w, @b) {...}   =>   %y = conv2d(%x, @w, @b) {..., tile=[6, 16], vector=32}
 *
 * The choice is recorded in two attributes of conv2d, conv2d_grad_input and
 * conv2d_grad_weight (ops.def) that the C code generator obeys: vector=0
 * (the default) calls the library, vector=B emits loops over B-byte SIMD
 * registers with a block of tile[0] result channels by tile[1] output
 * positions (kernel taps for the weight gradient).  docs/passes.md explains
 * the model; in short:
 *
 *   - dlc's loops compute a stride-1 convolution as a product over a
 *     zero-padded copy of its input, in which each kernel tap is a constant
 *     shift (codegen/cpu/direct_conv.c), so they never build im2col's
 *     columns, which cost LeNet-5 more than its products;
 *   - the register block is the one that loads the fewest operands per
 *     multiply-add (rows x columns / (rows + columns) registers) among
 *     those that fit the register file next to the operands they load,
 *     and it must load less than one (BLAS does better than that);
 *   - blocks over the padded width are chosen only where the block's
 *     operands for the whole sum (its rows of weights and its columns of
 *     every tap) fit the L1 cache, one sample's padded copy and result fit
 *     L2, and at least half of the product's multiply-adds are not padding
 *     (the gradient of a small input pads dy by nearly the kernel's size on
 *     each side).  Beyond that BLAS's packing pays for itself, and so it
 *     does for 1x1 convolutions, whose product reads the input as it is;
 *   - a forward convolution whose filters fill whole registers may put
 *     them in the lanes (filter_lanes) at any size and stride (a strided
 *     one takes no other block of dlc's): its blocks stream their
 *     weights from L2, so it needs only that they fit there, and, where all
 *     of the weights outgrow L2, enough positions to pay for copying them
 *     every call (FILTER_LANES_POSITION_REGISTERS);
 *   - a weight gradient takes them only while its product per sample is
 *     small (WEIGHT_GRADIENT_MACS): its block is the kernel's width by a
 *     few filters, and it reads a row of dy and one of the source for
 *     each few multiply-adds, where BLAS's packed panels do better once
 *     the product is large enough to pay for the packing;
 *   - a small convolution or weight gradient whose filters fill whole
 *     registers takes the lanes where the model gives that less time than
 *     the padded width: no padding columns, and for the weight gradient no sums
 *     added up lane by lane every sample, at the price of storing each
 *     result (conv2d) or each element of dy (its transposed copy) apart;
 *   - a small input gradient may take the transposed product (scatter):
 *     dy's rows in the forward's padded width times every tap, each block's
 *     sums added into the padded input gradient, so that no padding row of
 *     dy is multiplied (LeNet-5's second: the product over padded dy would
 *     be 2.6 times its multiply-adds).
 *
 * Threads are not part of the model: the generated code splits the batch
 * among the workers it is given at run time (--threads).  Ops that already
 * have a tile (written in IR text) keep it.  It runs after fuse, so the
 * block's epilogue includes a fused ReLU.
 *
 * Preconditions: the module verifies. */
#include "passes.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the target CPU -------------------------------------------------------- */

void dlc_target_cpu_host(DlcTargetCpu *t) {
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    t->l1 = l1 > 0 ? l1 : 32 << 10; /* what x86-64 cores have had for years */
    t->l2 = l2 > 0 ? l2 : 512 << 10;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    t->vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    if (__builtin_cpu_supports("avx512f"))
        t->vector = 64, t->registers = 32;
    else if (__builtin_cpu_supports("avx"))
        t->vector = 32, t->registers = 16;
    else
        t->vector = 16, t->registers = 16;
#else
    t->vector = 16, t->registers = 32; /* NEON */
    t->vnni = false;
#endif
}

/* A size with an optional K or M (KiB, MiB); -1 if it is not one. */
static int64_t parse_size(const char *s, size_t len) {
    int64_t v = 0;
    size_t i = 0;
    for (; i < len && isdigit((unsigned char)s[i]); i++) {
        if (v > (INT64_C(1) << 40))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (i == 0)
        return -1;
    if (i + 1 == len && (s[i] == 'K' || s[i] == 'k'))
        v <<= 10, i++;
    else if (i + 1 == len && (s[i] == 'M' || s[i] == 'm'))
        v <<= 20, i++;
    return i == len ? v : -1;
}

const char *dlc_target_cpu_parse(const char *spec, DlcTargetCpu *t) {
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ","), key = strcspn(p, "=");
        if (key >= len)
            return "each item is NAME=VALUE";
        int64_t v = parse_size(p + key + 1, len - key - 1);
        if (key == 2 && strncmp(p, "l1", 2) == 0 && v >= 1024 && v <= (64 << 20))
            t->l1 = v;
        else if (key == 2 && strncmp(p, "l2", 2) == 0 && v >= 1024 && v <= (INT64_C(1) << 32))
            t->l2 = v;
        else if (key == 6 && strncmp(p, "vector", 6) == 0 && (v == 16 || v == 32 || v == 64))
            t->vector = (int)v;
        else if (key == 9 && strncmp(p, "registers", 9) == 0 && v >= 8 && v <= 64)
            t->registers = (int)v;
        else if (key == 4 && strncmp(p, "vnni", 4) == 0 && (v == 0 || v == 1))
            t->vnni = v == 1;
        else
            return "the items are l1=SIZE and l2=SIZE (1K to 64M, and to 4096M; K or M "
                   "suffix), vector=16|32|64 (bytes), registers=8..64 and vnni=0|1";
        p += len + (p[len] == ',');
    }
    return NULL;
}

/* ---- the model --------------------------------------------------------------- */

/* The largest weight gradient (multiply-adds per sample) that dlc's loops
 * take: beyond it BLAS's packed panels pay for their packing.  It lies
 * between LeNet-5's two (118K and 240K), faster in dlc's loops, and the
 * smallest that BLAS won, the second convolution of models/simplecnn.dl
 * (2.2M); measured with each model's one op changed (bench/history.md). */
#define WEIGHT_GRADIENT_MACS (INT64_C(1) << 20)

/* The largest input gradient (multiply-adds per sample) that the scatter
 * block takes.  LeNet-5's (240K) is faster that way than BLAS and col2im;
 * the first of models/simplecnn.dl (2.2M, 64 filters into 32 channels) is
 * slower, since BLAS's packed panels load fewer operands per multiply-add
 * than a block of a few channels by a few registers (bench/history.md). */
#define SCATTER_MACS (INT64_C(1) << 20)

/* What dlc's loops compute for a convolution op: its product
 * (ir/ops.c), with k = channels x taps multiply-adds per result, and the
 * convolution's own multiply-adds per sample, without padding. */
typedef struct Product {
    DlcConvProduct c;
    int64_t k, macs;
    bool strided; /* a forward convolution with a stride: filter lanes only */
} Product;

/* The product of op, or false where dlc's loops do not apply (groups, the
 * gradients of a strided convolution, an input gradient's padding larger
 * than the kernel) or do not pay (1x1 convolutions read their input as it
 * is). */
static bool product_of(const DlcOp *op, Product *p) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *pad = dlc_attr_pair(op, DLC_A_PAD);
    p->strided = s[0] != 1 || s[1] != 1;
    if ((p->strided && op->kind != DLC_OP_CONV2D) || dlc_attr_int(op, DLC_A_GROUPS) != 1)
        return false;
    if (k[0] == 1 && k[1] == 1 && pad[0] == 0 && pad[1] == 0)
        return false;
    if (!dlc_conv_product(op, &p->c))
        return false;
    const DlcType *x, *y;
    dlc_conv_images(op, &x, &y);
    p->k = p->c.channels * k[0] * k[1];
    p->macs = y->dims[0] * x->dims[0] * k[0] * k[1] * y->dims[1] * y->dims[2];
    return true;
}

/* Floats of one padded source plane, and of one result plane in the padded
 * width, as codegen/cpu/direct_conv.c lays them out (without its slack). */
static int64_t source_plane(const DlcConvProduct *p) {
    return (p->h + 2 * p->ph) * (p->w + 2 * p->pw);
}
static int64_t result_plane(const DlcConvProduct *p) { return p->oh * (p->w + 2 * p->pw); }

/* A register block: tile=[rows, cols], and the block's lanes. */
typedef struct Block {
    int64_t rows, cols;
    bool filter_lanes, scatter;
} Block;

/* The time a block of a convolution takes, in cycles of one vector
 * instruction: its multiply-adds (computed, padding included, over L
 * lanes) and its loads (1 / intensity a multiply-add) at two a cycle, not
 * overlapped, and its stores at one a cycle.  Calibrated on the choice
 * between the two kinds of block, as measured (bench/history.md): with no
 * overlap it prefers filter lanes for LeNet-5's second convolution, where
 * they are faster, and not for models/simplecnn.dl's, where they are
 * slower (nine taps per store, or one load per multiply-add). */
static double block_time(int64_t computed, double intensity, int64_t lanes, int64_t stores) {
    double fmas = (double)computed / (double)lanes;
    return (fmas + fmas / intensity) / 2 + (double)stores;
}

/* The fewest positions a filter-lanes convolution of a training step whose
 * weights outgrow L2 must have, in registers' lanes: its copy of the
 * weights (made every call) then moves each weight from L3 or memory,
 * several cycles, against positions / (2 * lanes) cycles of multiply-adds
 * per weight.  Against BLAS, GoogLeNet's 7x7 planes (49 positions) with
 * 1.8 and 2.6 MB of weights and AlexNet's 13x13 (169) with 2.6 MB are
 * slower in filter lanes, GoogLeNet's 14x14 (196) with 1.5 and 1.8 MB and
 * its 7x7 with 0.2 MB faster (bench/history.md).  The inference network is
 * exempt: NAME_freeze packs its weights once (the program's bench and
 * predict do), and then GoogLeNet's two on 7x7 planes are faster in filter
 * lanes than in BLAS. */
#define FILTER_LANES_POSITION_REGISTERS 24

/* The fewest taps (channels x kernel taps), in registers' lanes, of a
 * filter-lanes convolution that no block over the padded width could take
 * instead (`alone` in choose_filter_lanes), so that it competes with BLAS: each result is stored
 * element by element, about 2 * lanes / taps of the multiply-adds' time.
 * VGG-16's first convolution (27 taps, 224x224) is slower than BLAS that
 * way, GoogLeNet's of 144 taps as fast, those of 216 and more faster
 * (bench/history.md). */
#define FILTER_LANES_TAP_REGISTERS 16

/* conv2d with the filters in the lanes (filter_lanes): the block of least
 * time among those that fit the registers and whose operands stream from
 * L2, in *b, and its time; false where the filters do not fill whole
 * registers, or where the rules for large convolutions (above) rule it
 * out: alone, it is compared with BLAS rather than with a block over the
 * padded width.  rows filters = nv registers by cols positions: nv * cols
 * accumulators, nv loaded weights and a broadcast, and a register to
 * spare: GoogLeNet's 3x3 convolutions ran slower with the blocks of 3
 * registers by 4 positions that fill AVX2's 16 than with 2 by 6.  It
 * computes every position once (rounded up to
 * the block).  The code generator gives a block of filters all of the
 * positions before the next, so its weights (in order, from a copy made
 * per call) must stay in L2, but not in L1: GoogLeNet's (55 to 110 KB a
 * block) run at BLAS's speed per multiply-add from L2 and need no im2col.
 * Blocks that load an operand or more per multiply-add are left out:
 * GoogLeNet's inception4a 3x3 convolution (208 filters, 864 taps) took a
 * block of one register by one position that way, and its batch-1
 * inference was slower than with blocks over the padded width. */
static bool choose_filter_lanes(const Product *p, const DlcTargetCpu *t, bool alone, bool packed,
                                Block *b, double *time) {
    int64_t lanes = t->vector / 4, positions = p->c.oh * p->c.ow;
    /* what a block reads for the whole sum, its weights and its positions'
       taps, must fit half of L2, or all of it where the padded sample
       fits three quarters of it (the blocks of filters pass over all of
       it in turn).  Calibrated with 512 KB of L2 (bench/history.md):
       AlexNet's 384-channel 3x3 convolution on 13x13 (a 346 KB sample,
       blocks reading 290 KB) and ResNet's 512-channel ones on 7x7 (166
       KB, 387 KB) are faster in filter lanes, VGG-16's 512-channel ones
       on 14x14 (a 512 KB sample) and 28x28 slower than BLAS */
    int64_t reads_bound =
        4 * p->c.channels * source_plane(&p->c) <= t->l2 / 4 * 3 ? t->l2 : t->l2 / 2;
    double best_intensity = 0;
    *time = 0;
    if (!packed && 4 * p->c.rows * p->k > t->l2 &&
        positions < FILTER_LANES_POSITION_REGISTERS * lanes)
        return false;
    if (alone && p->k < FILTER_LANES_TAP_REGISTERS * lanes)
        return false;
    for (int64_t nv = 1; nv <= 4; nv++) {
        if (p->c.rows % (nv * lanes))
            continue;
        for (int64_t cols = 1; nv * cols + nv + 2 <= t->registers; cols++) {
            if (4 * p->k * (nv * lanes + cols) > reads_bound)
                break; /* the block's weights and positions for the whole sum */
            int64_t computed = p->c.rows * p->k * ((positions + cols - 1) / cols * cols);
            double intensity = (double)(nv * cols) / (double)(nv + cols);
            if (intensity <= 1)
                continue; /* an operand loaded or more a multiply-add: slower, measured */
            /* stores: one element at a time, each filter at its plane */
            double time_here = block_time(computed, intensity, lanes, p->c.rows * positions);
            if (*time == 0 || time_here < *time ||
                (time_here == *time && intensity > best_intensity)) {
                *time = time_here, best_intensity = intensity;
                *b = (Block){nv * lanes, cols, true, false};
            }
        }
    }
    return *time > 0;
}

/* conv2d_grad_weight with the filters in the lanes (filter_lanes): the
 * block of nv registers of filters by the kernel's width of taps that
 * takes the least time, in *b, and its time; false where the filters do
 * not fill whole registers.  It sums over the exact positions, each
 * position's filters a register of a copy of dy transposed per sample (a
 * store per element of dy), and adds its sums to the worker's partial dw
 * register by register.  Unlike the forward blocks, a block that loads an
 * operand per multiply-add is not left out: its one register of filters
 * (16 filters on AVX-512) loads a broadcast source element per tap, which
 * the multiply-add takes as its memory operand, and the padded width it
 * competes with adds every register of sums up lane by lane every sample
 * (the time model charges both).  LeNet-5's second weight gradient took
 * the padded width on AVX-512 under that rule, and was slower there
 * (bench/history.md, 2026-12-05). */
static bool choose_weight_filter_lanes(const Product *p, int64_t kw, const DlcTargetCpu *t,
                                       Block *b, double *time) {
    int64_t lanes = t->vector / 4, positions = p->c.oh * p->c.ow;
    *time = 0;
    for (int64_t nv = 1; nv <= 4; nv++) {
        if (p->c.rows % (nv * lanes) || nv * kw + nv + 1 > t->registers)
            continue; /* accumulators, the loaded filters of dy, a broadcast */
        double intensity = (double)(nv * kw) / (double)(nv + kw);
        double time_here = block_time(p->c.rows * p->k * positions, intensity, lanes,
                                      p->c.rows * positions + p->c.rows * p->k / lanes);
        if (*time == 0 || time_here < *time)
            *time = time_here, *b = (Block){nv * lanes, kw, true, false};
    }
    return *time > 0;
}

/* conv2d_grad_input with scatter: the block of rows channels of the
 * input gradient at one tap by nv registers of dy's positions that takes
 * the least time, in *b, and its time; false where none fits the model.
 * It multiplies dy's rows in the forward's padded width by every tap
 * (the (kw-1)*dw extra columns are its only padding), from nv loaded
 * registers of dy and a broadcast weight per row, and adds each register
 * of sums into the padded input gradient (a load and a store); dy's copy
 * and that gradient stay in L2, what a block reads for its sum over the
 * filters in L1.  Like the padded-width blocks, it must multiply padding
 * at most as often as the convolution's own multiply-adds.  Ties go to
 * more rows: on LeNet-5's second convolution (6 channels) the block of 6
 * by 2 registers is faster than BLAS, those of 3 by 3 and 2 by 4 (the
 * same or less intensity) are not. */
static bool choose_scatter(const DlcOp *op, const Product *p, const DlcTargetCpu *t, Block *b,
                           double *time) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *d = dlc_attr_pair(op, DLC_A_DILATION),
                  *pad = dlc_attr_pair(op, DLC_A_PAD);
    int64_t lanes = t->vector / 4, filters = p->c.channels, channels = p->c.rows;
    int64_t wp = p->c.ow + 2 * pad[1], taps = channels * k[0] * k[1];
    int64_t positions = p->c.h * wp, shift = (k[0] - 1) * d[0] * wp + (k[1] - 1) * d[1];
    *time = 0;
    if (p->macs > SCATTER_MACS)
        return false;
    for (int64_t nv = 1; nv <= 4; nv++) {
        int64_t cols = nv * lanes, pt = (positions + cols - 1) / cols * cols;
        if (4 * (filters * pt + channels * (pt + shift)) > t->l2)
            continue;
        int64_t computed = taps * filters * pt;
        if (2 * p->macs < computed)
            continue;
        for (int64_t rows = channels; rows >= 1; rows--) {
            if (channels % rows || rows * nv + nv + 1 > t->registers ||
                4 * filters * (rows + cols) > t->l1)
                continue;
            double intensity = (double)(rows * nv) / (double)(rows + nv);
            double time_here = block_time(computed, intensity, lanes, 2 * taps * pt / lanes);
            if (*time == 0 || time_here < *time)
                *time = time_here, *b = (Block){rows, cols, false, true};
        }
    }
    return *time > 0;
}

/* The best register block for op on t, in *b; false where none fits the
 * model.  packed: op is in the inference network, whose filter-lanes
 * weights NAME_freeze packs once rather than each call copying them. */
static bool choose(const DlcOp *op, const DlcTargetCpu *t, bool packed, Block *b) {
    Product p;
    if (!product_of(op, &p))
        return false;
    int64_t lanes = t->vector / 4, plane = result_plane(&p.c);
    /* one sample's copy and result must stay in L2 for the blocks over the
       padded width (scatter and filter lanes have their own rules, in
       choose_scatter and choose_filter_lanes), whose positions are the
       padded plane's own, one apart */
    bool fits = 4 * (p.c.channels * source_plane(&p.c) + p.c.rows * plane) <= t->l2 &&
                !p.strided;
    if (!fits && op->kind == DLC_OP_CONV2D_GRAD_WEIGHT)
        return false;
    bool weight = op->kind == DLC_OP_CONV2D_GRAD_WEIGHT;
    if (weight && p.macs > WEIGHT_GRADIENT_MACS)
        return false;
    int64_t kw = dlc_attr_pair(op, DLC_A_KERNEL)[1];
    double best = 0;
    int64_t best_waste = 0, best_computed = 0;
    for (int64_t rows = 1; fits && rows <= p.c.rows && rows <= t->registers; rows++) {
        if (p.c.rows % rows)
            continue;
        for (int64_t nv = 1; nv <= 4; nv++) {
            /* columns: registers of output positions, or the kernel's width
               (one register of positions each) for the weight gradient */
            int64_t cols = weight ? kw : nv * lanes, regs = weight ? kw : nv;
            if (weight && nv > 1)
                break;
            if (rows * regs + (weight ? rows : regs) + 1 > t->registers)
                continue; /* accumulators, the loaded operands, a broadcast */
            if (!weight && cols > plane + lanes - 1)
                continue; /* a block wider than the plane computes padding */
            /* what the block reads for the whole sum stays in L1: its rows
               of weights and its columns of every tap, or (weight
               gradient) its rows of dy and one row of the source */
            int64_t l1 = weight ? 4 * (rows + 1) * plane : 4 * p.k * (rows + cols);
            if (l1 > t->l1)
                continue;
            /* the product over the padded width also multiplies padding:
               worth it while at least half its multiply-adds are the
               convolution's, since im2col and BLAS take about twice as
               long per multiply-add at these sizes (docs/passes.md) */
            int64_t computed = p.c.rows * p.k * ((plane + cols - 1) / cols * cols);
            if (2 * p.macs < computed)
                continue;
            double intensity = (double)(rows * regs) / (double)(rows + regs);
            if (intensity <= 1)
                continue; /* an operand loaded or more a multiply-add: BLAS does better */
            int64_t waste = weight ? 0 : (plane + cols - 1) / cols * cols - plane;
            if (intensity > best || (intensity == best && waste < best_waste)) {
                best = intensity, best_waste = waste, best_computed = computed;
                *b = (Block){rows, cols, false, false};
            }
        }
    }
    /* another kind of block (the filters in the lanes, or scatter), where it
       takes less time than the best block over the padded width */
    Block other;
    double other_time;
    if (weight && choose_weight_filter_lanes(&p, kw, t, &other, &other_time) &&
        (best == 0 ||
         /* its stores: each register of sums added up lane by lane at the
            end of every sample, about 4 instructions a weight; so the model
            takes filter lanes for LeNet-5's second weight gradient (150
            taps), which is faster that way, and not for models/simplecnn.dl's
            first (9 taps: the copy of dy costs as much as the product) */
         other_time < block_time(best_computed, best, lanes, 4 * p.c.rows * p.k))) {
        *b = other;
        return true;
    }
    if (op->kind == DLC_OP_CONV2D_GRAD_INPUT &&
        choose_scatter(op, &p, t, &other, &other_time) &&
        (best == 0 ||
         /* the padded-width block's stores as conv2d's below */
         other_time < block_time(best_computed, best, lanes, 3 * p.c.rows * plane / lanes))) {
        *b = other;
        return true;
    }
    if (op->kind == DLC_OP_CONV2D &&
        choose_filter_lanes(&p, t, best == 0, packed, &other, &other_time) &&
        (best == 0 ||
         /* its stores: a register of yp, then yp again and the result */
         other_time < block_time(best_computed, best, lanes, 3 * p.c.rows * plane / lanes))) {
        *b = other;
        return true;
    }
    return best > 0;
}

/* ---- blocked layouts --------------------------------------------------------- */

/* conv2d in blocks of b channels (codegen/cpu/blocked_conv.c): nv
 * registers of b filters by pb positions, the block that takes the least
 * time among those that fit the registers (nv * pb accumulators, nv loaded
 * weights, a broadcast and one to spare), in the same model as the padded-width blocks
 * above.  Its positions are pb of a row (a 1x1 convolution of stride 1
 * without padding: of its whole plane), each row's last block taking the
 * positions left, at its own intensity; or, where pb is a multiple of the
 * row, pb / OW whole rows, the last block the rows left.  Every block reads
 * its filters' weights for the whole sum (cb-channel blocks x taps x nv *
 * b), which must fit half of L2.  Streaming them from L2 once a block is
 * not in the model: charging it chose blocks of whole rows on ResNet's
 * 7x7 planes, no faster there and slower elsewhere by --autotune; what
 * slowed those planes was the weights' stream from L3, which the kernel's
 * prefetch hides (bench/history.md).  A block of one
 * register of filters (16 filters on AVX-512) loads an operand or more a
 * multiply-add, but the plain forms are no better there.  Every store is a
 * whole register.  0 where the block is not legal: a block of filters stays
 * within a group of the convolution's, a depthwise one is one register. */
double dlc_tile_blocked_block(const DlcOp *op, const DlcTargetCpu *t, int64_t b, int64_t cb,
                              int64_t nv, int64_t pb) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL);
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    int64_t groups = dlc_attr_int(op, DLC_A_GROUPS), cog = y->dims[0] / groups;
    bool depthwise = groups > 1 && x->dims[0] == groups && cog == 1;
    int64_t lanes = t->vector / 4, cob = (y->dims[0] + b - 1) / b;
    /* source elements per result: a group's channels times the kernel */
    int64_t taps = depthwise ? k[0] * k[1] : (x->dims[0] / groups + cb - 1) / cb * cb * k[0] * k[1];
    int64_t oh = y->dims[1], ow = y->dims[2];
    if (dlc_conv_is_pointwise(op))
        ow *= oh, oh = 1;
    int64_t regs = nv * b / lanes; /* registers of the target a row of filters takes */
    int64_t rows = pb > ow ? pb / ow : 1;
    if (nv < 1 || nv > cob || cob % nv || (depthwise && nv > 1) ||
        (groups > 1 && !depthwise && cog % (nv * b)) || pb < 1 ||
        (rows > 1 && (pb % ow || rows > oh)) || regs * pb + regs + 2 > t->registers)
        return 0; /* a register to spare: the blocks that filled all 32 ran at half speed */
    /* a depthwise block loads a weight and a register of the source a
       position: its intensity is the same pb / (1 + pb) */
    int64_t per_position = cob * b * taps; /* multiply-adds */
    double in = (double)(nv * pb) / (double)(nv + pb), time;
    if (rows > 1) {
        int64_t nyb = (oh + rows - 1) / rows, tail = (oh - (nyb - 1) * rows) * ow;
        double in_tail = (double)(nv * tail) / (double)(nv + tail);
        time = (double)(nyb - 1) * block_time(per_position * pb, in, lanes, 0) +
               block_time(per_position * tail, in_tail, lanes, 0);
    } else {
        int64_t nxb = (ow + pb - 1) / pb, pbt = ow - (nxb - 1) * pb;
        double in_tail = (double)(nv * pbt) / (double)(nv + pbt);
        time = (double)oh * ((double)(nxb - 1) * block_time(per_position * pb, in, lanes, 0) +
                             block_time(per_position * pbt, in_tail, lanes, 0));
    }
    return time + (double)(cob * b * oh * ow / lanes);
}

double dlc_tile_blocked_conv(const DlcOp *op, const DlcTargetCpu *t, int64_t b, int64_t cb,
                             int64_t *rows, int64_t *cols) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL);
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    int64_t cob = (y->dims[0] + b - 1) / b;
    int64_t taps = (x->dims[0] + cb - 1) / cb * cb * k[0] * k[1];
    double best = 0;
    for (int64_t nv = 1; nv <= 8 && nv <= cob; nv++) {
        if (4 * taps * nv * b > t->l2 / 2)
            continue;
        for (int64_t pb = 1; pb <= t->registers; pb++) { /* a register each, at least */
            double time = dlc_tile_blocked_block(op, t, b, cb, nv, pb);
            if (time > 0 && (best == 0 || time < best))
                best = time, *rows = nv * b, *cols = pb;
        }
    }
    return best;
}

/* ---- pooling ---------------------------------------------------------------- */

/* The band of a max pooling (maxpool {band=N}): how many output rows of a
 * plane libdlrt's loops compute at a time (runtime/kernels/pool.inc), from L1.
 *
 *   - Windows of 2x2 that tile the plane exactly run as row pairs whatever
 *     the band: none is chosen.
 *   - Whole planes (band = the output's rows) where libdlrt has a loop
 *     over a whole plane that streams it: windows a stride of 2 or more
 *     apart without padding (maxpool_strided_plane: the maxima down each
 *     window's rows, then across, one pass each), and windows centred at
 *     stride 1 that span at most 3 rows and 3 columns (maxpool_same_plane:
 *     one fused pass each way).  Wider centred windows take a pass per row
 *     and column of the window over the plane's input, its maxima down and
 *     its result, which then must stay in L1 (half of it, the rest for the
 *     lines the loops bring in); a 5x5 pooling of 56x56 planes (37 KB of
 *     them) is faster in bands.
 *   - Otherwise bands: the most output rows whose padded input rows, their
 *     maxima down the windows and the band's results fit half of L1.
 *
 * Calibrated with bench/pool_band.c (bench/history.md): ResNet's 3x3
 * stride-2 padded pooling of 112x112 planes is fastest in bands of 4 to 16
 * rows (the rule gives 10), slower in the 35 rows that libdlrt's buffers
 * hold; the whole-plane loops beat the best band where they apply. */
static int64_t pool_band(const DlcOp *op, const DlcTargetCpu *t) {
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *pad = dlc_attr_pair(op, DLC_A_PAD);
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    int64_t h = x->dims[1], w = x->dims[2], oh = y->dims[1], ow = y->dims[2];
    int64_t elem = x->dtype == DLC_F64 ? 8 : 4, half_l1 = t->l1 / 2 / elem;
    bool unpadded = pad[0] == 0 && pad[1] == 0;
    if (k[0] == 2 && k[1] == 2 && s[0] == 2 && s[1] == 2 && unpadded && h == 2 * oh &&
        w == 2 * ow)
        return 0;
    bool strided = unpadded && s[0] >= 2 && s[1] >= 2 && k[0] <= 2 * s[0] && k[1] <= 2 * s[1];
    bool centred = s[0] == 1 && s[1] == 1 && k[0] == 2 * pad[0] + 1 && k[1] == 2 * pad[1] + 1;
    if (strided || (centred && ((k[0] <= 3 && k[1] <= 3) || 3 * h * w <= half_l1)))
        return oh;
    int64_t wp = (ow - 1) * s[1] + k[1]; /* a padded input row */
    int64_t band = 1;
    while (band < oh && ((band * s[0] + k[0]) * wp + (band + 1) * (wp + ow)) <= half_l1)
        band++; /* band + 1 rows fit: their (band * sh + kh) input rows, v and y */
    return band;
}

bool dlc_pass_tile(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt) {
    (void)ctx;
    DlcTargetCpu t = opt->cpu; /* --target-cpu, over the machine's own */
    if (!t.vector)
        dlc_target_cpu_host(&t);
    for (int i = 0; i < m->nnetworks; i++) {
        DlcNetwork *net = m->networks[i];
        bool packed = !dlc_is_derived_network(net->name);
        for (int j = 0; j < net->nops; j++) {
            DlcOp *op = net->ops[j];
            if (op->kind == DLC_OP_MAXPOOL) {
                DlcAttr *band = dlc_attrs_at(op->kind, op->attrs, DLC_A_BAND);
                if (band->i == 0) /* else chosen in IR text */
                    band->i = pool_band(op, &t);
                continue;
            }
            if (dlc_recurrent_cell(op->kind) != DLC_OP_COUNT) {
                /* a recurrent layer's gates: libdlrt's vectorized sigmoid
                   and tanh, which are most of its time without them */
                DlcAttr *vector = dlc_attrs_at(op->kind, op->attrs, DLC_A_VECTOR);
                if (vector->i == 0) /* else chosen in IR text */
                    vector->i = t.vector;
                continue;
            }
            if (op->kind != DLC_OP_CONV2D && op->kind != DLC_OP_CONV2D_GRAD_INPUT &&
                op->kind != DLC_OP_CONV2D_GRAD_WEIGHT)
                continue;
            DlcAttr *tile = dlc_attrs_at(op->kind, op->attrs, DLC_A_TILE),
                    *vector = dlc_attrs_at(op->kind, op->attrs, DLC_A_VECTOR);
            if (vector->i != 0)
                continue; /* chosen in IR text */
            Block block = {0, 0, false, false};
            if (!choose(op, &t, packed, &block))
                continue;
            tile->pair[0] = block.rows, tile->pair[1] = block.cols;
            vector->i = t.vector;
            if (block.filter_lanes)
                dlc_attrs_at(op->kind, op->attrs, DLC_A_FILTER_LANES)->b = true;
            if (block.scatter)
                dlc_attrs_at(op->kind, op->attrs, DLC_A_SCATTER)->b = true;
        }
    }
    return true;
}
