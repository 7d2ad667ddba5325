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

#endif /* DLC_PASSES_H */
