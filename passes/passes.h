/* passes.h — the pass registry.
 *
 * Every pass is Module -> Module (it rewrites the module in place), states
 * its preconditions at the top of its file, and is registered by name in
 * passes.c, which is the one table the driver's --passes and --print-after
 * read. */
#ifndef DLC_PASSES_H
#define DLC_PASSES_H

#include "../ir/ir.h"

/* The CPU the tile pass chooses for (docs/passes.md). */
typedef struct DlcTargetCpu {
    int64_t l1, l2; /* bytes of data cache per core */
    int vector;     /* bytes of a SIMD register: 16 (SSE, NEON), 32 (AVX), 64 (AVX-512) */
    int registers;  /* SIMD registers */
} DlcTargetCpu;

/* What the command line tells the passes. */
typedef struct DlcPassOptions {
    int64_t mem_budget; /* --mem-budget: bytes a training step may take at the
                           train section's batch size; 0 for no budget */
    DlcTargetCpu cpu;   /* --target-cpu over the machine's own; vector 0 for
                           the machine's own */
    bool gpu;           /* the GPU code generator also reads the result
                           (--target=cpu,cuda, --emit=ptx): fuse leaves out
                           the patterns it has no kernels for */
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

/* tile.c: the CPU dlc runs on (caches from sysconf, vector width from
 * cpuid), and --target-cpu's "l1=32K,l2=1M,vector=32,registers=16" over
 * it; parse returns NULL, or what is wrong with spec. */
void dlc_target_cpu_host(DlcTargetCpu *t);
const char *dlc_target_cpu_parse(const char *spec, DlcTargetCpu *t);

/* plan_memory.c: an analysis the code generators run on each network.
 * Where each op result lives in the activation arena.  Values in a batch
 * are in part 0, in floats per sample (the arena holds max_batch samples of
 * it); the others in part 1, in floats. */
typedef struct DlcMemPlan {
    DlcMap offset;    /* value name -> offset in its part + 1 */
    int64_t size[2];  /* the arena's parts */
    int64_t naive[2]; /* each value in a slot of its own */
    int64_t lower[2]; /* the most live at any one op: no plan needs less */
    int64_t *live[2]; /* what is live during each op */
    DlcMap last;      /* op result name -> the last op that needs it + 1 (the
                         end for outputs, and for parameter gradients when
                         they are kept), before in-place sharing joins it to
                         another value */
} DlcMemPlan;

typedef enum DlcPlanKind {
    DLC_PLAN_SHARED,  /* values share memory over time, and in place where the
                         op allows it */
    DLC_PLAN_OWN,     /* a slot of its own for each value (-fno-plan-memory) */
    DLC_PLAN_MEASURE, /* the figures of SHARED (live, lower, naive) without
                         placing anything: no offsets, no sizes */
} DlcPlanKind;

/* Plans net's results as the generated code runs it: the outputs live to
 * the end; the gradient of each parameter dies at its weight update, or
 * with keep_gradients lives to the end too, for a code generator whose
 * NAME_gradient shows it in the arena after NAME_gradients (the GPU's; the
 * CPU's copies each gradient out at its update instead). */
void dlc_plan_memory(DlcArena *arena, const DlcNetwork *net, DlcPlanKind kind,
                     bool keep_gradients, DlcMemPlan *plan);
/* The elements a value (or parameter) takes in the arena: numel rounded up
 * to 16, so that every buffer starts 64-byte aligned. */
int64_t dlc_plan_elements(const DlcValue *v);
/* The last op that needs an op result, as the plan counts it. */
int dlc_plan_last_use(const DlcMemPlan *plan, const DlcValue *v);
/* A planned value's offset in its part. */
int64_t dlc_plan_offset(const DlcMemPlan *plan, const DlcValue *v);
/* The op that consumes the gradient of parameter p in a training network:
 * its weight update (or its param_grad, before the optimizer pass); NULL
 * for buffers and for networks without a backward pass. */
const DlcOp *dlc_param_update(const DlcNetwork *net, const DlcValue *p);
/* The gradient that op consumes: its first operand; NULL also for a
 * dense_sgd_update or dense_adam_update, which compute the gradient
 * themselves. */
const DlcValue *dlc_param_gradient(const DlcNetwork *net, const DlcValue *p);

#endif /* DLC_PASSES_H */
