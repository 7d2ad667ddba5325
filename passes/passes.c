/* passes.c — the table of passes, by name. */
#include "passes.h"

#include <string.h>

static const DlcPass table[] = {
    {"cse", "merge ops that compute the same thing from the same operands", dlc_pass_cse},
    {"fuse", "merge an op into the op computing its operand, when it is that value's only reader: relu into conv2d, dense, batchnorm or add (relu=true), sigmoid, tanh or leaky_relu (slope >= 0) into conv2d or dense (not when feeding the GPU), relu_grad into the gradient op computing its operand (relu_grad=true: maxpool_grad; lrn_grad, conv2d_grad_input, dense_grad_input, dropout_grad, slice (the mask from the concatenation), add or globalavgpool_grad, not when feeding the GPU), an inference batchnorm into the conv2d before it (batchnorm=true), a dense weight gradient into its SGD or Adam update (dense_sgd_update, dense_adam_update), a chain of adds into one add of all its terms (up to 16)", dlc_pass_fuse},
    {"tile", "choose for each convolution im2col and BLAS or dlc's own loops, and their "
             "register block, and for each max pooling the output rows computed at a time "
             "(band), from a model of the target CPU (--target-cpu)", dlc_pass_tile},
    {"recompute", "with --mem-budget, compute cheap forward values again in the backward pass "
                  "instead of keeping them, until each network fits the budget", dlc_pass_recompute},
    {"dce", "remove ops whose results are never used, and their parameters", dlc_pass_dce},
    {"autodiff", "build NAME.train for each network with a train section: forward, loss, "
                 "and the gradient of every trainable parameter (for the CPU, a maxpool that "
                 "alone reads its input also returns its argmax: maxpool_train)",
     dlc_pass_autodiff},
    {"optimizer", "turn each param_grad of NAME.train into the weight update of the train "
                  "section's optimizer (sgd or adam), with the learning rate as input %lr, "
                  "right after the last op that needs the gradient or the weight",
     dlc_pass_optimizer},
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
