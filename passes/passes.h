/* passes.h — the pass registry.
 *
 * Every pass is Module -> Module (it rewrites the module in place), states
 * its preconditions at the top of its file, and is registered by name in
 * passes.c, which is the one table the driver's --passes and --print-after
 * read. */
#ifndef DLC_PASSES_H
#define DLC_PASSES_H

#include "../ir/ir.h"
#include "plan_memory.h"

/* The CPU the tile pass chooses for (docs/passes.md). */
typedef struct DlcTargetCpu {
    int64_t l1, l2; /* bytes of data cache per core */
    int vector;     /* bytes of a SIMD register: 16 (SSE, NEON), 32 (AVX), 64 (AVX-512) */
    int registers;  /* SIMD registers */
    bool vnni;      /* AVX-512 VNNI (vpdpbusd): the quantize pass's int8 kernels */
} DlcTargetCpu;

/* --quantize=: the element type the quantize pass gives the inference
 * network's layers (passes/quantize.c). */
typedef enum DlcQuantize {
    DLC_QUANTIZE_NONE, /* the pass leaves the module as it is */
    DLC_QUANTIZE_INT8, /* int8 with int32 sums, scales from calibration */
} DlcQuantize;

/* What the command line tells the passes. */
typedef struct DlcPassOptions {
    int64_t mem_budget; /* --mem-budget: bytes a training step may take at the
                           train section's batch size; 0 for no budget */
    DlcTargetCpu cpu;   /* --target-cpu over the machine's own; vector 0 for
                           the machine's own */
    bool gpu;           /* the GPU code generator also reads the result
                           (--target=cpu,cuda, --emit=ptx): fuse leaves out
                           the patterns it has no kernels for */
    DlcQuantize quantize; /* --quantize= */
    const char *const *quantize_skip; /* --quantize-skip: layers kept in f32
                                         (NULL-terminated), or NULL */
} DlcPassOptions;

typedef struct DlcPass {
    const char *name;    /* as written in --passes= and --print-after= */
    const char *summary; /* one line for --list-passes */
    /* Rewrites m; returns false after reporting errors. */
    bool (*run)(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
} DlcPass;

/* passes.c */
const DlcPass *dlc_pass_lookup(const char *name);
const DlcPass *dlc_pass_table(int *n);
/* The pipeline a .dl input gets when --passes is not given. */
extern const char *const dlc_default_pipeline[];

/* one file each */
bool dlc_pass_dce(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_autodiff(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_optimizer(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_cse(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_fuse(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_recompute(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_tile(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_step(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_layout(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_quantize(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);
bool dlc_pass_fuse_residual(DlcCtx *ctx, DlcModule *m, const DlcPassOptions *opt);

/* fuse.c: how many ops (and outputs) read each value of net, by name, into
 * uses (fuse-residual's test of a sole reader too). */
void dlc_fuse_count_uses(DlcModule *m, const DlcNetwork *net, DlcMap *uses);

/* tile.c: the register block of conv2d (f32; grouped by whole blocks of
 * filters, or depthwise) computed in blocks of b channels from a source in
 * blocks of cb (b, or 1: plain), for the layout pass
 * (codegen/cpu/blocked_conv.c computes it): rows filters (whole blocks) by
 * cols positions of a row (or, past the row's width, cols / OW whole rows),
 * in *rows and *cols; its modelled time in cycles, or 0 where no block fits
 * the model. */
double dlc_tile_blocked_conv(const DlcOp *op, const DlcTargetCpu *t, int64_t b, int64_t cb,
                             int64_t *rows, int64_t *cols);
/* The same model's time for the block of nv registers of b filters by pb
 * positions, or 0 where it is not a legal block (nv not dividing the
 * filters' blocks or a group's, pb past the row but not whole rows, too
 * many registers); the weights' share of L2 is not checked (the
 * autotuner, codegen/cpu/autotune.c, times every legal block). */
double dlc_tile_blocked_block(const DlcOp *op, const DlcTargetCpu *t, int64_t b, int64_t cb,
                              int64_t nv, int64_t pb);

/* tile.c: the CPU dlc runs on (caches from sysconf, vector width and
 * VNNI from cpuid), and --target-cpu's "l1=32K,l2=1M,vector=32,registers=16,vnni=1" over
 * it; parse returns NULL, or what is wrong with spec. */
void dlc_target_cpu_host(DlcTargetCpu *t);
const char *dlc_target_cpu_parse(const char *spec, DlcTargetCpu *t);

#endif /* DLC_PASSES_H */
