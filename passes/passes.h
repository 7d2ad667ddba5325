/* passes.h — the pass registry.
 *
 * Every pass is Module -> Module (it rewrites the module in place), states
 * its preconditions at the top of its file, and is registered by name in
 * passes.c, which is the one table the driver's --passes and --print-after
 * read. */
#ifndef DLC_PASSES_H
#define DLC_PASSES_H

#include "../ir/ir.h"

typedef struct DlcPass {
    const char *name;    /* as written in --passes= and --print-after= */
    const char *summary; /* one line for --list-passes */
    /* Rewrites m; returns false after reporting errors. */
    bool (*run)(DlcCtx *ctx, DlcModule *m);
} DlcPass;

/* passes.c */
const DlcPass *dlc_pass_lookup(const char *name);
const DlcPass *dlc_pass_table(int *n);
/* The pipeline a .dl input gets when --passes is not given. */
extern const char *const dlc_default_pipeline[];

/* one file each */
bool dlc_pass_dce(DlcCtx *ctx, DlcModule *m);
bool dlc_pass_autodiff(DlcCtx *ctx, DlcModule *m);
bool dlc_pass_optimizer(DlcCtx *ctx, DlcModule *m);
bool dlc_pass_cse(DlcCtx *ctx, DlcModule *m);
bool dlc_pass_fuse(DlcCtx *ctx, DlcModule *m);

/* plan_memory.c: an analysis the code generators run on each network.
 * Where each op result lives in the activation arena.  Values in a batch
 * are in part 0, in floats per sample (the arena holds max_batch samples of
 * it); the others in part 1, in floats. */
typedef struct DlcMemPlan {
    DlcMap offset;   /* value name -> offset in its part + 1 */
    int64_t size[2];  /* the arena's parts */
    int64_t naive[2]; /* each value in a slot of its own */
    int64_t lower[2]; /* the most live at any one op: no plan needs less */
} DlcMemPlan;

/* Plans net's results; the outputs and the pinned values live to the end.
 * Without share, each value gets a slot of its own (for comparison). */
void dlc_plan_memory(DlcArena *arena, const DlcNetwork *net, const DlcValue *const *pinned,
                     int npinned, bool share, DlcMemPlan *plan);
/* A planned value's offset in its part. */
int64_t dlc_plan_offset(const DlcMemPlan *plan, const DlcValue *v);

#endif /* DLC_PASSES_H */
