/* emit_gemm.c — the GPU kernels of the matrix products: dense,
 * dense_grad_input, dense_grad_weight, and, as implicit GEMMs that gather
 * their operands straight from the tensors (no im2col buffer), conv2d,
 * conv2d_grad_input and conv2d_grad_weight.
 *
 * One tiled kernel computes them all (gemm_kernel): tiles of TILE x TILE
 * outputs go through shared memory TILE_K steps of the sum at a time, the
 * next TILE_K loaded while the current ones are multiplied, by
 * GEMM_THREADS threads keeping a 4x4 block of outputs each (FMA), or by 8
 * warps of mma's on the tensor cores: TF32 (--gpu-math=tf32), or bf16
 * (--gpu-math=bf16), whose shared tiles hold pairs of steps of the sum
 * packed in 32 bits, as the mma's fragments take them.  A product
 * with few tiles and a long sum (the weight gradients) splits the sum
 * across blocks into scratch memory and adds the parts in a second kernel,
 * in order, so that results do not depend on timing.
 *
 * What differs between the six ops is where A's, B's and C's elements
 * live: each op gives its own three functions (Gemm's a, b and store),
 * its sizes, and which index of each operand is contiguous.  With
 * per_step=true the dense ops' rows are the batch's steps, n * T of one
 * step's features each, as on the CPU.  nv_product lends the dense
 * products to other families (emit_recurrent.c), on operands of its
 * choice, in the scratch memory among them. */
#include <string.h>

#include "emit.h"

#define TILE 64        /* outputs per tile side (2 TILE on the tensor cores, gemm_tile) */
#define TILE_K 16      /* steps of the sum per shared-memory tile */
#define GEMM_THREADS 256
#define GEMM_LOADS (2 * TILE * TILE_K / GEMM_THREADS) /* the most of each operand, per thread and tile */

/* The rows of a shared tile: TILE_K steps of the sum, or with bf16 their
 * pairs, each element two bf16 in 32 bits. */
static int gemm_rows(const NvKernels *nk) { return nk->math == DLC_GPU_MATH_BF16 ? TILE_K / 2 : TILE_K; }

typedef struct Gemm Gemm;
/* Element (x, y) of operand A (x = m, y = k) or B (x = k, y = j) of group
 * grp, loaded from the kernel's pointers p where valid (m, k, j in range),
 * else 0. */
typedef LLVMValueRef GemmLoad(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                              LLVMValueRef x, LLVMValueRef y, LLVMValueRef valid);
/* The final value v of C(grp, m, j): its bias and ReLU, and where it goes
 * (pointer p[out]). */
typedef void GemmStore(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                       LLVMValueRef m, LLVMValueRef j, LLVMValueRef v);

/* C[g][m][j] = sum over k of A(g, m, k) B(g, k, j) for m < M, j < N
 * (N = n_per_n * n + n_fixed), k < K (likewise), in G independent groups. */
struct Gemm {
    GemmLoad *a, *b;            /* the op's gathers */
    GemmStore *store;           /* and its epilogue */
    int inputs;                 /* the pointer operands before the result */
    int64_t m, n_pn, n_fx, k_pn, k_fx, groups, splits;
    bool a_kfast, b_kfast;      /* which index the loading threads walk consecutively */
    /* the convolution's geometry (conv ops) */
    int64_t c, h, w, f, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t units, in;          /* dense ops */
    int tile;                   /* outputs per tile side (gemm_tile) */
    bool relu, bias;
    bool accumulate;            /* dense ops' store: C += rather than = */
    /* nv_product's: the kernel's name after the tag, and the slots of the
       inputs and then the result, with their offsets in the scratch
       memory (io_slots 0: the op's own operands and result) */
    const char *suffix;
    int io_slots;
    int io[4];
    int64_t io_pn[4], io_fx[4];
};

/* ---- the tiled product ------------------------------------------------------------ */

/* The elements of each operand's shared tile that a thread stores. */
static int gemm_slots(const NvKernels *nk, const Gemm *g) { return gemm_rows(nk) * g->tile / GEMM_THREADS; }

/* The blocks a multiprocessor holds at once: two in tiles of TILE (which
 * the tensor-core kernels ask for, gemm_kernel, and the FMA kernels are
 * taken to hold), one in tiles of 2 TILE, whose registers fill it. */
static int gemm_blocks_per_sm(const Gemm *g) { return g->tile == TILE ? 2 : 1; }


/* A thread's results of its block's tile: value i sits at (row[i], col[i])
 * of the tile.  Which depends on how they are computed. */
typedef struct Accumulators {
    int count;                    /* 16, or 64 in a tensor-core tile of 2 TILE */
    int wm, wn;                   /* tensor cores: each warp's mma tiles down and across */
    LLVMValueRef v[64];           /* f32 variables */
    LLVMValueRef row[64], col[64];
    /* the thread's place, for reading the shared tiles: FMA: (ty, tx) of
       16 x 16; tensor cores: its warp's first row and column of the tile,
       and its lane's group (gid) and place in the group (tig) */
    LLVMValueRef ty, tx, wrow, wcol, gid, tig;
} Accumulators;

/* The layouts.  FMA: 256 threads as 16 x 16; thread (ty, tx) has rows
 * ty + 16 i and columns tx + 16 j, i, j < 4, so that a warp's shared-memory
 * reads are broadcasts or consecutive.  Tensor cores: 8 warps as 2 (rows)
 * x 4 (columns), each a tile / 2 x tile / 4 part as wm x wn tiles of
 * mma's 16 x 8 (2 x 2 in a tile of 64, 4 x 4 in one of 128), in the PTX
 * ISA's accumulator layout (kb.h). */
static void gemm_acc_init(Kb *kb, Accumulators *acc, bool mma, int tile) {
    *acc = (Accumulators){.count = 16};
    if (mma)
        acc->wm = tile / 32, acc->wn = tile / 32, acc->count = 4 * acc->wm * acc->wn;
    for (int i = 0; i < acc->count; i++)
        acc->v[i] = kb_var(kb, kb->f32, kb_float(kb, 0));
    LLVMValueRef t = kb_tid(kb);
    if (!mma) {
        acc->tx = kb_remi(kb, t, 16), acc->ty = kb_divi(kb, t, 16);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc->row[4 * i + j] = kb_addi(kb, acc->ty, 16 * i), acc->col[4 * i + j] = kb_addi(kb, acc->tx, 16 * j);
        return;
    }
    LLVMValueRef warp = kb_divi(kb, t, 32), lane = kb_remi(kb, t, 32);
    acc->wrow = kb_muli(kb, kb_remi(kb, warp, 2), tile / 2), acc->wcol = kb_muli(kb, kb_divi(kb, warp, 2), tile / 4);
    acc->gid = kb_divi(kb, lane, 4), acc->tig = kb_remi(kb, lane, 4);
    LLVMValueRef tig2 = kb_muli(kb, acc->tig, 2);
    for (int mi = 0; mi < acc->wm; mi++)
        for (int ni = 0; ni < acc->wn; ni++)
            for (int c = 0; c < 4; c++) {
                int i = 4 * (acc->wn * mi + ni) + c;
                acc->row[i] = kb_add(kb, acc->wrow, kb_addi(kb, acc->gid, 16 * mi + 8 * (c / 2)));
                acc->col[i] = kb_add(kb, acc->wcol, kb_addi(kb, tig2, 8 * ni + c % 2));
            }
}

/* acc += the shared tiles' product, with FMA: As[k][m], Bs[k][j], rows of TILE. */
static void gemm_tile_fma(Kb *kb, LLVMValueRef As, LLVMValueRef Bs, Accumulators *acc) {
    LLVMValueRef tx = acc->tx, ty = acc->ty;
    for (int kk = 0; kk < TILE_K; kk++) {
        LLVMValueRef a[4], bv[4];
        for (int i = 0; i < 4; i++) {
            a[i] = kb_sload(kb, As, kb_add(kb, kb_int(kb, kk * TILE + 16 * i), ty));
            bv[i] = kb_sload(kb, Bs, kb_add(kb, kb_int(kb, kk * TILE + 16 * i), tx));
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                kb_set(kb, acc->v[4 * i + j], kb_fma(kb, a[i], bv[j], kb_get(kb, acc->v[4 * i + j])));
    }
}

/* acc += the shared tiles' product on the tensor cores, rows of ld
 * elements: per 8 rows (8 steps of the sum in TF32, 16 in bf16 pairs),
 * each warp's wm x wn mma's.  The two fragments' layouts index the rows
 * alike (kb.h): TF32's a[0] = A[g][t] is row t, bf16's A[g][2t,2t+1] is
 * the pair in row t. */
static void gemm_tile_mma(Kb *kb, LLVMValueRef As, LLVMValueRef Bs, int ld, int rows, bool bf16,
                          Accumulators *acc) {
    LLVMValueRef wrow = acc->wrow, wcol = acc->wcol, gid = acc->gid, tig = acc->tig;
    for (int k8 = 0; k8 < rows; k8 += 8) {
        /* element (k, x) of a tile is at (k8 + tig + k) * ld + x */
        LLVMValueRef row0 = kb_muli(kb, kb_addi(kb, tig, k8), ld), row4 = kb_muli(kb, kb_addi(kb, tig, k8 + 4), ld);
        LLVMValueRef a[4][4], bf[4][2];
        for (int mi = 0; mi < acc->wm; mi++) {
            LLVMValueRef m = kb_add(kb, wrow, kb_addi(kb, gid, 16 * mi));
            a[mi][0] = kb_sload(kb, As, kb_add(kb, row0, m));
            a[mi][1] = kb_sload(kb, As, kb_add(kb, row0, kb_addi(kb, m, 8)));
            a[mi][2] = kb_sload(kb, As, kb_add(kb, row4, m));
            a[mi][3] = kb_sload(kb, As, kb_add(kb, row4, kb_addi(kb, m, 8)));
        }
        for (int ni = 0; ni < acc->wn; ni++) {
            LLVMValueRef j = kb_add(kb, wcol, kb_addi(kb, gid, 8 * ni));
            bf[ni][0] = kb_sload(kb, Bs, kb_add(kb, row0, j));
            bf[ni][1] = kb_sload(kb, Bs, kb_add(kb, row4, j));
        }
        for (int mi = 0; mi < acc->wm; mi++)
            for (int ni = 0; ni < acc->wn; ni++) {
                LLVMValueRef c[4];
                int at = 4 * (acc->wn * mi + ni);
                for (int e = 0; e < 4; e++)
                    c[e] = kb_get(kb, acc->v[at + e]);
                if (bf16)
                    kb_mma_bf16(kb, a[mi], bf[ni], c);
                else
                    kb_mma_tf32(kb, a[mi], bf[ni], c);
                for (int e = 0; e < 4; e++)
                    kb_set(kb, acc->v[at + e], c[e]);
            }
    }
}

/* Where thread t's r-th element of a shared tile goes: (kk, x) of the
 * rows x tile tile; kfast: consecutive threads take consecutive kk (the
 * operand is contiguous along the sum), else consecutive x. */
static void gemm_tile_spot(LLVMValueRef t, int r, bool kfast, int rows, int tile, Kb *kb, LLVMValueRef *kk,
                           LLVMValueRef *x) {
    LLVMValueRef e = kb_addi(kb, t, r * GEMM_THREADS);
    *kk = kfast ? kb_remi(kb, e, rows) : kb_divi(kb, e, tile);
    *x = kfast ? kb_divi(kb, e, rows) : kb_remi(kb, e, tile);
}

/* Element (x, row) of a shared tile from the operand's gather `load` at x
 * (in range below x_end) and step k0 + row of the sum, in the arithmetic's form:
 * as it is, rounded to TF32, or the steps 2 row and 2 row + 1 rounded to
 * bf16 and packed. */
static LLVMValueRef gemm_element(Kb *kb, const Gemm *g, GemmLoad *load, bool kx, LLVMValueRef *p,
                                 LLVMValueRef grp, LLVMValueRef x, LLVMValueRef x_end, LLVMValueRef k0,
                                 LLVMValueRef row, LLVMValueRef k_end, DlcGpuMath math) {
    int per = math == DLC_GPU_MATH_BF16 ? 2 : 1;
    LLVMValueRef v[2];
    for (int i = 0; i < per; i++) {
        LLVMValueRef k = kb_add(kb, k0, kb_addi(kb, kb_muli(kb, row, per), i));
        LLVMValueRef ok = kb_and(kb, kb_lt(kb, x, x_end), kb_lt(kb, k, k_end));
        v[i] = kx ? load(kb, g, p, grp, x, k, ok) : load(kb, g, p, grp, k, x, ok);
    }
    return math == DLC_GPU_MATH_BF16 ? kb_bf16x2(kb, v[0], v[1])
         : math == DLC_GPU_MATH_TF32 ? kb_tf32(kb, v[0]) : v[0];
}

/* This thread's gemm_slots elements of A's shared tile and then of B's
 * for the steps [k0, k0 + TILE_K) of the sum, into the variables v (A's
 * from v[0], B's from v[GEMM_LOADS]). */
static void gemm_load_tile(Kb *kb, const NvKernels *nk, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                           LLVMValueRef m0, LLVMValueRef j0, LLVMValueRef N, LLVMValueRef k0,
                           LLVMValueRef k_end, LLVMValueRef *v) {
    LLVMValueRef t = kb_tid(kb);
    int rows = gemm_rows(nk);
    for (int r = 0; r < gemm_slots(nk, g); r++) {
        LLVMValueRef kk, mm, jj;
        gemm_tile_spot(t, r, g->a_kfast, rows, g->tile, kb, &kk, &mm);
        LLVMValueRef m = kb_add(kb, m0, mm);
        kb_set(kb, v[r], gemm_element(kb, g, g->a, true, p, grp, m, kb_int(kb, g->m), k0, kk,
                                      k_end, nk->math));
        gemm_tile_spot(t, r, g->b_kfast, rows, g->tile, kb, &kk, &jj);
        LLVMValueRef j = kb_add(kb, j0, jj);
        kb_set(kb, v[GEMM_LOADS + r], gemm_element(kb, g, g->b, false, p, grp, j, N, k0, kk,
                                                   k_end, nk->math));
    }
}

/* The tiled product: grid (column tiles, row tiles, groups * splits). */
static void gemm_kernel(NvKernels *nk, const DlcOp *op, const char *tag, const Gemm *g) {
    Build b;
    int ni = g->inputs;
    int slots[6] = {0, 1, 2};
    slots[ni] = g->splits > 1 ? NV_WORKSPACE : NV_RESULT;
    if (g->io_slots)
        memcpy(slots, g->io, sizeof g->io);
    nv_start(&b, nk, op, tag, g->suffix ? g->suffix : g->splits > 1 ? "part" : "", slots, ni + 1,
             NULL, 0, GEMM_THREADS);
    for (int i = 0; g->io_slots && i <= ni; i++)
        if (slots[i] == NV_WORKSPACE)
            nv_set_workspace(&b, i, g->io_pn[i], g->io_fx[i]);
    Kb *kb = b.kb;
    /* tensor cores: two blocks per multiprocessor (128 registers a thread,
       which the mma kernels in tiles of 64 fit without spilling), so that
       one block's loads and barriers overlap the other's arithmetic.  The
       FMA kernels would spill, and gain nothing; those in tiles of 128
       would spill too, and hold one block. */
    bool mma = nk->math != DLC_GPU_MATH_F32;
    if (mma && gemm_blocks_per_sm(g) == 2)
        kb_min_blocks(kb, 2);
    NvLaunch *l = b.l;
    int tile = g->tile;
    l->gx_per_n = g->n_pn, l->gx_fixed = g->n_fx, l->gx_div = tile;
    l->gy = (g->m + tile - 1) / tile, l->gz = g->groups * g->splits;
    if (g->splits > 1)
        l->workspace = g->splits * g->groups * g->m * g->n_fx;
    LLVMValueRef N = nv_count(&b, g->n_pn, g->n_fx), K = nv_count(&b, g->k_pn, g->k_fx);
    LLVMValueRef z = kb_ctaid(kb, 'z');
    LLVMValueRef grp = kb_divi(kb, z, g->splits), split = kb_remi(kb, z, g->splits);
    /* this split's range of k, in whole tiles */
    LLVMValueRef chunk = kb_muli(kb, kb_divi(kb, kb_addi(kb, kb_divi(kb, kb_addi(kb, K, g->splits - 1), g->splits), TILE_K - 1), TILE_K), TILE_K);
    LLVMValueRef k_begin = kb_mul(kb, split, chunk), k_end = kb_min(kb, K, kb_add(kb, k_begin, chunk));
    LLVMValueRef m0 = kb_muli(kb, kb_ctaid(kb, 'y'), tile), j0 = kb_muli(kb, kb_ctaid(kb, 'x'), tile);
    LLVMValueRef t = kb_tid(kb);
    /* tensor cores read the tiles in 8x8 fragments: rows padded by 8 floats
       put a warp's 32 reads in 32 banks */
    int ld = mma ? tile + 8 : tile, rows = gemm_rows(nk);
    LLVMValueRef As = kb_shared(kb, rows * ld), Bs = kb_shared(kb, rows * ld);
    Accumulators acc;
    gemm_acc_init(kb, &acc, mma, tile);
    /* Software pipelining: the tile of k0 + TILE_K is loaded into registers
       while the tile of k0 is multiplied from shared memory, so that the
       loads' latency hides behind the arithmetic (a load past k_end is
       none, and gives 0). */
    LLVMValueRef next[2 * GEMM_LOADS];
    for (int r = 0; r < 2 * GEMM_LOADS; r++)
        next[r] = kb_var(kb, kb->f32, kb_float(kb, 0));
    gemm_load_tile(kb, nk, g, b.p, grp, m0, j0, N, k_begin, k_end, next);
    LLVMValueRef k0v = kb_for(kb, k_begin, k_end, kb_int(kb, TILE_K));
    LLVMValueRef k0 = kb_get(kb, k0v);
    for (int r = 0; r < gemm_slots(nk, g); r++) {
        LLVMValueRef kk, mm, jj;
        gemm_tile_spot(t, r, g->a_kfast, rows, tile, kb, &kk, &mm);
        kb_sstore(kb, As, kb_add(kb, kb_muli(kb, kk, ld), mm), kb_get(kb, next[r]));
        gemm_tile_spot(t, r, g->b_kfast, rows, tile, kb, &kk, &jj);
        kb_sstore(kb, Bs, kb_add(kb, kb_muli(kb, kk, ld), jj), kb_get(kb, next[GEMM_LOADS + r]));
    }
    kb_barrier(kb);
    gemm_load_tile(kb, nk, g, b.p, grp, m0, j0, N, kb_addi(kb, k0, TILE_K), k_end, next);
    if (mma)
        gemm_tile_mma(kb, As, Bs, ld, rows, nk->math == DLC_GPU_MATH_BF16, &acc);
    else
        gemm_tile_fma(kb, As, Bs, &acc);
    kb_barrier(kb);
    kb_endfor(kb);
    for (int i = 0; i < acc.count; i++) {
        LLVMValueRef m = kb_add(kb, m0, acc.row[i]), jn = kb_add(kb, j0, acc.col[i]);
        kb_if(kb, kb_and(kb, kb_lt(kb, m, kb_int(kb, g->m)), kb_lt(kb, jn, N)));
        if (g->splits > 1) /* the part: ws[z][m][j] */
            kb_store(kb, b.p[ni], kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, z, g->m), m), g->n_fx), jn),
                     kb_get(kb, acc.v[i]));
        else
            g->store(kb, g, b.p, ni, grp, m, jn, kb_get(kb, acc.v[i]));
        kb_endif(kb);
    }
    kb_end(kb);
}

/* The parts of a split product, added in order, through the epilogue. */
static void gemm_sum_parts(NvKernels *nk, const DlcOp *op, const char *tag, const Gemm *g) {
    Build b;
    int ni = g->inputs;
    int slots[6] = {0, 1, 2};
    slots[ni] = NV_RESULT;
    slots[ni + 1] = NV_WORKSPACE;
    nv_start(&b, nk, op, tag, "sum", slots, ni + 2, NULL, 0, MAP_THREADS);
    Kb *kb = b.kb;
    int64_t mn = g->m * g->n_fx;
    LLVMValueRef i = nv_begin_map(&b, 0, g->groups * mn);
    LLVMValueRef grp = kb_divi(kb, i, mn), r = kb_remi(kb, i, mn);
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_float(kb, 0));
    for (int s = 0; s < g->splits; s++)
        kb_set(kb, sum, kb_fadd(kb, kb_get(kb, sum),
                                kb_load(kb, b.p[ni + 1], kb_add(kb, kb_muli(kb, kb_addi(kb, kb_muli(kb, grp, g->splits), s), mn), r))));
    g->store(kb, g, b.p, ni, grp, kb_divi(kb, r, g->n_fx), kb_remi(kb, r, g->n_fx), kb_get(kb, sum));
    nv_end_map(&b);
}

/* The time of a product of `tiles` tiles split into s parts, in the time
 * of one part's block: its waves of `slots` blocks, each 1 / s as long. */
static double split_time(int64_t tiles, int64_t s, int64_t slots) {
    return (double)((tiles * s + slots - 1) / slots) / (double)s;
}

/* How many parts a weight gradient's sum over the batch is split into.
 * Such a product has few output tiles and a long sum, and its blocks run
 * in waves of `slots` (gemm_blocks_per_sm per multiprocessor): a wave that
 * is only partly full costs as long as a full one; 288 blocks on 264
 * slots take two waves, 261 take one.  The least s within 5% of the best
 * split_time is taken, since each part costs scratch memory and a read in
 * the parts' sum.  A part keeps at least 256 steps at a batch of 32, and
 * there are no more parts than slots. */
static int64_t gemm_wave_splits(const NvKernels *nk, const Gemm *g) {
    int64_t tiles = (g->m + g->tile - 1) / g->tile * ((g->n_fx + g->tile - 1) / g->tile) * g->groups;
    int64_t slots = gemm_blocks_per_sm(g) * (int64_t)nk->multiprocessors, k32 = g->k_pn * 32;
    int64_t most = k32 / 256 < slots ? k32 / 256 : slots;
    double best = 1e300;
    for (int64_t s = 1; s <= most; s++) {
        double t = split_time(tiles, s, slots);
        best = t < best ? t : best;
    }
    for (int64_t s = 1; s <= most; s++)
        if (split_time(tiles, s, slots) <= best * 1.05)
            return s;
    return 1;
}

/* A tile's side: TILE, or with DLC_NVPTX_TILE=128 2 TILE on the tensor
 * cores where the product has more than TILE rows and columns (at a batch
 * of 32).  A warp's 64 x 32 part of a tile of 128 reads 1.5 shared values
 * per mma where one of 32 x 16 reads 3, and each element a thread gathers
 * feeds twice the products: both bound the mma kernels' issue rate.  But
 * such a kernel needs 160 (bf16) to 240 (TF32) registers, so one block per
 * multiprocessor where the tiles of 64 fit two.  Not measured yet: the
 * default stays 64 until a GPU session compares them
 * (bench/gpu_session.sh).  The FMA kernels keep 64. */
static int gemm_tile(const NvKernels *nk, const Gemm *g) {
    bool large = g->m > TILE && g->n_pn * 32 + g->n_fx > TILE;
    return nk->math != DLC_GPU_MATH_F32 && large && nk->big_tiles ? 2 * TILE : TILE;
}

/* The kernels of product g: the tiled product, then the parts' sum if the
 * sum is split. */
static void gemm_run(NvKernels *nk, const DlcOp *op, const char *tag, Gemm *g) {
    g->tile = gemm_tile(nk, g);
    if (g->n_pn == 0 && g->k_pn > 0)
        g->splits = gemm_wave_splits(nk, g);
    gemm_kernel(nk, op, tag, g);
    if (g->splits > 1)
        gemm_sum_parts(nk, op, tag, g);
}

/* ---- dense layers: (x, @W[, @b]) -> y; (dy, @W) -> dx; (dy, x) -> dW ----------------- */

/* W[m, k] */
static LLVMValueRef dense_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                            LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[1], kb_add(kb, kb_muli(kb, m, g->in), k));
}

/* x[j, k] */
static LLVMValueRef dense_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                            LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[0], kb_add(kb, kb_muli(kb, j, g->in), k));
}

/* y[j, m], with the bias and a fused ReLU */
static void dense_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                        LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    (void)grp;
    if (g->bias)
        v = kb_fadd(kb, v, kb_load(kb, p[2], m));
    LLVMValueRef at = kb_add(kb, kb_muli(kb, j, g->units), m);
    if (g->accumulate)
        v = kb_fadd(kb, v, kb_load(kb, p[out], at));
    kb_store(kb, p[out], at, nv_relu_if(kb, g->relu, v));
}

/* Rows per sample of a dense op's product: 1, or with per_step=true the
 * steps of its sequences (v: any operand or result, [T, features]). */
static int64_t dense_rows(const DlcOp *op, const DlcValue *v) {
    return dlc_attr_true(op->kind, op->attrs, DLC_A_PER_STEP) ? v->type.dims[0] : 1;
}

/* The features of one row of v. */
static int64_t dense_row_size(const DlcOp *op, const DlcValue *v) {
    return nv_numel(v) / dense_rows(op, v);
}

/* y^T = W x^T */
void nv_emit_dense(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = {.a = dense_a, .b = dense_b, .store = dense_store, .groups = 1, .splits = 1};
    g.in = dense_row_size(op, op->in[0]), g.units = dense_row_size(op, op->out[0]);
    g.m = g.units, g.n_pn = dense_rows(op, op->in[0]), g.k_fx = g.in;
    g.a_kfast = true, g.b_kfast = true;
    g.relu = dlc_op_fused_relu(op), g.bias = op->nparams == 2;
    g.inputs = g.bias ? 3 : 2;
    gemm_run(nk, op, tag, &g);
}

/* W[k, m] */
static LLVMValueRef dense_grad_input_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                       LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[1], kb_add(kb, kb_muli(kb, k, g->in), m));
}

/* dy[j, k] */
static LLVMValueRef dense_grad_input_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                       LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[0], kb_add(kb, kb_muli(kb, j, g->units), k));
}

/* dx[j, m] */
static void dense_grad_input_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                                   LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    (void)grp;
    LLVMValueRef at = kb_add(kb, kb_muli(kb, j, g->in), m);
    if (g->accumulate)
        v = kb_fadd(kb, v, kb_load(kb, p[out], at));
    kb_store(kb, p[out], at, v);
}

/* dx^T = W^T dy^T */
void nv_emit_dense_grad_input(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = {.a = dense_grad_input_a, .b = dense_grad_input_b, .store = dense_grad_input_store,
              .inputs = 2, .groups = 1, .splits = 1};
    g.units = dense_row_size(op, op->in[0]), g.in = dense_row_size(op, op->out[0]);
    g.m = g.in, g.n_pn = dense_rows(op, op->in[0]), g.k_fx = g.units;
    g.a_kfast = false, g.b_kfast = true;
    gemm_run(nk, op, tag, &g);
}

/* dy[k, m] */
static LLVMValueRef dense_grad_weight_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                        LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[0], kb_add(kb, kb_muli(kb, k, g->units), m));
}

/* x[k, j] */
static LLVMValueRef dense_grad_weight_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                        LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    (void)grp;
    return kb_load_if(kb, valid, p[1], kb_add(kb, kb_muli(kb, k, g->in), j));
}

/* dW[m, j] */
static void dense_grad_weight_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                                    LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    (void)grp;
    kb_store(kb, p[out], kb_add(kb, kb_muli(kb, m, g->in), j), v);
}

/* dW = dy^T x */
void nv_emit_dense_grad_weight(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = {.a = dense_grad_weight_a, .b = dense_grad_weight_b, .store = dense_grad_weight_store,
              .inputs = 2, .groups = 1, .splits = 1};
    g.units = dense_row_size(op, op->in[0]), g.in = dense_row_size(op, op->in[1]);
    g.m = g.units, g.n_fx = g.in, g.k_pn = dense_rows(op, op->in[0]);
    g.a_kfast = false, g.b_kfast = false;
    gemm_run(nk, op, tag, &g);
}

void nv_product(NvKernels *nk, const DlcOp *op, const char *tag, const char *suffix,
                const NvProduct *p) {
    Gemm g = {.groups = 1, .splits = 1, .suffix = suffix, .io_slots = 1,
              .accumulate = p->accumulate, .bias = p->bias.slot >= 0};
    if (p->w_by_k) /* dense_grad_input's: W[k][m], x[j][k] of units */
        g.a = dense_grad_input_a, g.b = dense_grad_input_b, g.store = dense_grad_input_store,
        g.units = p->ins, g.in = p->outs, g.a_kfast = false;
    else /* dense's: W[m][k], x[j][k] of in */
        g.a = dense_a, g.b = dense_b, g.store = dense_store, g.in = p->ins, g.units = p->outs,
        g.a_kfast = true;
    g.b_kfast = true;
    g.m = p->outs, g.n_pn = p->rows, g.k_fx = p->ins;
    if (g.bias && p->w_by_k)
        dlc_unreachable("nvptx: a product with w[k][m] has no bias");
    const NvOperand *ops[4] = {&p->x, &p->w, g.bias ? &p->bias : &p->out, &p->out};
    g.inputs = g.bias ? 3 : 2;
    for (int i = 0; i <= g.inputs; i++)
        g.io[i] = ops[i]->slot, g.io_pn[i] = ops[i]->ws_per_n, g.io_fx[i] = ops[i]->ws_fixed;
    gemm_run(nk, op, tag, &g);
}

/* ---- convolutions: (x, @W[, @b]) -> y; (dy, @W) -> dx; (dy, x) -> dW ----------------- */

/* A convolution's product, with its geometry from the input and output images. */
static Gemm conv_gemm(const DlcOp *op, GemmLoad *a, GemmLoad *b, GemmStore *store) {
    Gemm g = {.a = a, .b = b, .store = store, .inputs = 2, .groups = 1, .splits = 1};
    const DlcType *img, *out;
    dlc_conv_images(op, &img, &out);
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD), *d = dlc_attr_pair(op, DLC_A_DILATION);
    g.c = img->dims[0], g.h = img->dims[1], g.w = img->dims[2];
    g.f = out->dims[0], g.oh = out->dims[1], g.ow = out->dims[2];
    g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
    g.groups = dlc_attr_int(op, DLC_A_GROUPS);
    return g;
}

/* The input image's element (s, c, y, x) of a convolution, 0 in the padding. */
static LLVMValueRef image_at(Kb *kb, const Gemm *g, LLVMValueRef img, LLVMValueRef s,
                             LLVMValueRef c, LLVMValueRef iy, LLVMValueRef ix, LLVMValueRef valid) {
    LLVMValueRef inside = kb_and(kb, valid, kb_and(kb, kb_in_range(kb, iy, g->h), kb_in_range(kb, ix, g->w)));
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->c), c), g->h), iy), g->w), ix);
    return kb_load_if(kb, inside, img, at);
}

/* Element (c, r) of output position (s, q) of the unrolled input of a
 * convolution (im2col, never built): the input pixel under kernel tap r of
 * channel c of group grp, 0 in the padding. */
static LLVMValueRef im2col(Kb *kb, const Gemm *g, LLVMValueRef img, LLVMValueRef grp,
                           LLVMValueRef position, LLVMValueRef column, LLVMValueRef valid) {
    int64_t q = g->oh * g->ow, kk = g->kh * g->kw, cg = g->c / g->groups;
    LLVMValueRef s = kb_divi(kb, position, q), pq = kb_remi(kb, position, q);
    LLVMValueRef oy = kb_divi(kb, pq, g->ow), ox = kb_remi(kb, pq, g->ow);
    LLVMValueRef c = kb_divi(kb, column, kk), r = kb_remi(kb, column, kk);
    LLVMValueRef ky = kb_divi(kb, r, g->kw), kx = kb_remi(kb, r, g->kw);
    LLVMValueRef iy = kb_add(kb, kb_addi(kb, kb_muli(kb, oy, g->sh), -g->ph), kb_muli(kb, ky, g->dh));
    LLVMValueRef ix = kb_add(kb, kb_addi(kb, kb_muli(kb, ox, g->sw), -g->pw), kb_muli(kb, kx, g->dw));
    return image_at(kb, g, img, s, kb_add(kb, kb_muli(kb, grp, cg), c), iy, ix, valid);
}

/* W[g fg + m, k] */
static LLVMValueRef conv2d_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                             LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    int64_t fg = g->f / g->groups, kc = g->c / g->groups * (g->kh * g->kw);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), m), kc), k);
    return kb_load_if(kb, valid, p[1], at);
}

/* x at (s, q) = j, (c, r) = k */
static LLVMValueRef conv2d_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                             LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    return im2col(kb, g, p[0], grp, j, k, valid);
}

/* y[s, g fg + m, q] with j = (s, q), with the bias and a fused ReLU */
static void conv2d_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                         LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    int64_t q = g->oh * g->ow, fg = g->f / g->groups;
    LLVMValueRef f = kb_add(kb, kb_muli(kb, grp, fg), m);
    if (g->bias)
        v = kb_fadd(kb, v, kb_load(kb, p[2], f));
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_divi(kb, j, q), g->f), f), q), kb_remi(kb, j, q));
    kb_store(kb, p[out], at, nv_relu_if(kb, g->relu, v));
}

/* y = W im2col(x), per group; a folded batchnorm (and then the ReLU) is a
 * second kernel's, over the result */
void nv_emit_conv2d(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = conv_gemm(op, conv2d_a, conv2d_b, conv2d_store);
    int64_t cg = g.c / g.groups, fg = g.f / g.groups, kk = g.kh * g.kw;
    g.m = fg, g.n_pn = g.oh * g.ow, g.k_fx = cg * kk;
    g.a_kfast = true, g.b_kfast = false;
    bool folded = dlc_op_folded_batchnorm(op) >= 0;
    g.relu = dlc_op_fused_relu(op) && !folded;
    g.bias = dlc_op_bias(op) != NULL;
    g.inputs = g.bias ? 3 : 2;
    gemm_run(nk, op, tag, &g);
    if (folded)
        nv_batchnorm_map(nk, op, tag, NV_BN_FOLDED);
}

/* W[g fg + f, m, r] with k = (f, r) */
static LLVMValueRef conv2d_grad_input_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                        LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    int64_t kk = g->kh * g->kw, fg = g->f / g->groups, cg = g->c / g->groups;
    LLVMValueRef f = kb_divi(kb, k, kk), r = kb_remi(kb, k, kk);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), f), cg), m), kk), r);
    return kb_load_if(kb, valid, p[1], at);
}

/* dy at (s, oy, ox) for input pixel j = (s, y, x), k = (f, r) */
static LLVMValueRef conv2d_grad_input_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                        LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    int64_t kk = g->kh * g->kw, hw = g->h * g->w, fg = g->f / g->groups;
    LLVMValueRef s = kb_divi(kb, j, hw), pq = kb_remi(kb, j, hw);
    LLVMValueRef y = kb_divi(kb, pq, g->w), x = kb_remi(kb, pq, g->w);
    LLVMValueRef f = kb_divi(kb, k, kk), r = kb_remi(kb, k, kk);
    LLVMValueRef ky = kb_divi(kb, r, g->kw), kx = kb_remi(kb, r, g->kw);
    LLVMValueRef ty = kb_sub(kb, kb_addi(kb, y, g->ph), kb_muli(kb, ky, g->dh));
    LLVMValueRef tx = kb_sub(kb, kb_addi(kb, x, g->pw), kb_muli(kb, kx, g->dw));
    /* ty must be a non-negative multiple of the stride; the remainder is
       taken of ty shifted to be non-negative */
    LLVMValueRef oy = kb_divi(kb, ty, g->sh), ox = kb_divi(kb, tx, g->sw);
    LLVMValueRef ok = kb_and(kb, kb_le(kb, kb_int(kb, 0), ty), kb_le(kb, kb_int(kb, 0), tx));
    ok = kb_and(kb, ok, kb_and(kb, kb_eq(kb, kb_remi(kb, ty, g->sh), kb_int(kb, 0)),
                               kb_eq(kb, kb_remi(kb, tx, g->sw), kb_int(kb, 0))));
    ok = kb_and(kb, ok, kb_and(kb, kb_in_range(kb, oy, g->oh), kb_in_range(kb, ox, g->ow)));
    LLVMValueRef fi = kb_add(kb, kb_muli(kb, grp, fg), f);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->f), fi), g->oh), oy), g->ow), ox);
    return kb_load_if(kb, kb_and(kb, valid, ok), p[0], at);
}

/* dx[s, g cg + m, y, x] with j = (s, y, x) */
static void conv2d_grad_input_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                                    LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    int64_t hw = g->h * g->w, cg = g->c / g->groups;
    LLVMValueRef c = kb_add(kb, kb_muli(kb, grp, cg), m);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, kb_divi(kb, j, hw), g->c), c), hw), kb_remi(kb, j, hw));
    kb_store(kb, p[out], at, v);
}

/* dx = W^T dy per group, each input pixel summing over the outputs whose
 * windows hold it (no atomics) */
void nv_emit_conv2d_grad_input(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = conv_gemm(op, conv2d_grad_input_a, conv2d_grad_input_b, conv2d_grad_input_store);
    int64_t cg = g.c / g.groups, fg = g.f / g.groups, kk = g.kh * g.kw;
    g.m = cg, g.n_pn = g.h * g.w, g.k_fx = fg * kk;
    g.a_kfast = false, g.b_kfast = false;
    gemm_run(nk, op, tag, &g);
}

/* dy[s, g fg + m, q] with k = (s, q) */
static LLVMValueRef conv2d_grad_weight_a(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                         LLVMValueRef m, LLVMValueRef k, LLVMValueRef valid) {
    int64_t fg = g->f / g->groups, q = g->oh * g->ow;
    LLVMValueRef s = kb_divi(kb, k, q), r = kb_remi(kb, k, q);
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, s, g->f), kb_add(kb, kb_muli(kb, grp, fg), m)), q), r);
    return kb_load_if(kb, valid, p[0], at);
}

/* x at (s, q) = k, (c, r) = j */
static LLVMValueRef conv2d_grad_weight_b(Kb *kb, const Gemm *g, LLVMValueRef *p, LLVMValueRef grp,
                                         LLVMValueRef k, LLVMValueRef j, LLVMValueRef valid) {
    return im2col(kb, g, p[1], grp, k, j, valid);
}

/* dW[g fg + m, j] */
static void conv2d_grad_weight_store(Kb *kb, const Gemm *g, LLVMValueRef *p, int out, LLVMValueRef grp,
                                     LLVMValueRef m, LLVMValueRef j, LLVMValueRef v) {
    int64_t fg = g->f / g->groups, n = g->n_fx;
    LLVMValueRef at = kb_add(kb, kb_muli(kb, kb_add(kb, kb_muli(kb, grp, fg), m), n), j);
    kb_store(kb, p[out], at, v);
}

/* dW = dy im2col(x)^T, per group (a sum over the batch: gemm_run splits it) */
void nv_emit_conv2d_grad_weight(NvKernels *nk, const DlcOp *op, const char *tag) {
    Gemm g = conv_gemm(op, conv2d_grad_weight_a, conv2d_grad_weight_b, conv2d_grad_weight_store);
    int64_t cg = g.c / g.groups, fg = g.f / g.groups, kk = g.kh * g.kw;
    g.m = fg, g.n_fx = cg * kk, g.k_pn = g.oh * g.ow;
    g.a_kfast = true, g.b_kfast = true;
    gemm_run(nk, op, tag, &g);
}
