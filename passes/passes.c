/* passes.c — the table of passes, by name. */
#include "passes.h"

#include <string.h>

/* The summaries are what --list-passes prints, one line each; docs/passes.md
 * describes every pass. */
static const DlcPass table[] = {
    {"cse", "merge ops that compute the same thing from the same operands", dlc_pass_cse},
    {"fuse", "merge an op into the one that computes its operand, which then computes both "
             "(docs/passes.md)", dlc_pass_fuse},
    {"quantize", "with --quantize=int8, the inference network's layers in int8 "
                 "(docs/quantization.md)", dlc_pass_quantize},
    {"layout", "choose plain or blocked (NCHWc) layouts for the inference network's tensors "
               "(docs/passes.md)", dlc_pass_layout},
    {"fuse-residual", "merge a blocked add into the blocked conv2d that computes one of its "
                      "terms (docs/passes.md)", dlc_pass_fuse_residual},
    {"tile", "choose how the CPU computes each convolution and max pooling, from its caches "
             "(docs/passes.md)", dlc_pass_tile},
    {"recompute", "with --mem-budget, recompute cheap forward values in the backward pass to "
                  "fit (docs/passes.md)", dlc_pass_recompute},
    {"dce", "remove ops whose results are never used, and their parameters", dlc_pass_dce},
    {"autodiff", "build NAME.train: forward pass, loss and each trainable parameter's gradient, "
                 "as ops", dlc_pass_autodiff},
    {"optimizer", "turn each gradient of NAME.train into the train section's weight update "
                  "(SGD or Adam)", dlc_pass_optimizer},
    {"step", "build NAME.step: a sequence network at one step, its state carried, to generate "
             "a token at a time", dlc_pass_step},
};

const char *const dlc_default_pipeline[] = {"cse", "dce", NULL};

const DlcPass *dlc_pass_lookup(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

const DlcPass *dlc_pass_table(int *n) {
    *n = (int)(sizeof table / sizeof *table);
    return table;
}
